// What every API key starts with (docs/api.md, "Authentication"): its own file, importing nothing, so the gateway's
// username rule and proxyctl's error printer can tell a key by its shape without loading the key's other rules.
export const KEY_PREFIX = 'pxk_';
