// The product version, read once from package.json: `proxyd --version`, `proxyctl --version`, the CLI's user agent and /openapi.json.
import { readFileSync } from 'node:fs';

function readVersion(): string {
  try {
    return (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string })
      .version;
  } catch {
    return '0.0.0'; // not where the build put it: whatever reports the version still works
  }
}

export const VERSION = readVersion();
