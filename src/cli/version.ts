// The proxyctl version, read once from package.json (one source of truth for --version, the user agent and reports).
import { readFileSync } from 'node:fs';

export const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
