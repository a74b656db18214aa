// A bad --geoip-db stops the start with the flag and the file named, not maxmind's bare words.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { isMainlandChina, openCountryLookup } from '../../../src/daemon/services/geo.js';
import { tempDir } from '../../helpers/daemon.js';

describe('openCountryLookup', () => {
  it('names the flag and the file when the file is missing, a directory, or not an MMDB database', async () => {
    const dir = tempDir();
    const junk = path.join(dir, 'passwd');
    writeFileSync(junk, 'root:x:0:0:root:/root:/bin/bash\n');
    await expect(openCountryLookup(path.join(dir, 'none.mmdb'))).rejects.toThrow(
      `--geoip-db: cannot open ${dir}/none.mmdb: ENOENT`,
    );
    await expect(openCountryLookup(dir)).rejects.toThrow(`--geoip-db: cannot open ${dir}: EISDIR`);
    await expect(openCountryLookup(junk)).rejects.toThrow(
      new RegExp(`^--geoip-db: cannot open ${junk}: not an MMDB database \\(`),
    );
  });

  it('the bundled database still opens', async () => {
    const geo = await openCountryLookup();
    expect(isMainlandChina(geo, '8.8.8.8')).toBe(false);
  });
});
