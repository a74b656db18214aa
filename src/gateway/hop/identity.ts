// An exit's TLS identity on the hop: an ECDSA P-256 key and a self-signed certificate, made here with
// node:crypto alone (a few DER structures; no CA, no name: entries pin the certificate's SHA-256 fingerprint,
// read from the exit registry). One PEM bundle holds both, so a file swap is atomic.
import { createPrivateKey, generateKeyPairSync, randomBytes, sign, X509Certificate } from 'node:crypto';

export interface HopIdentity {
  /** PEM of the private key, then of the certificate. */
  readonly pem: string;
  readonly key: string;
  readonly cert: string;
  /** SHA-256 of the certificate's DER, 64 lower-case hex digits. */
  readonly fingerprint: string;
  readonly notBefore: Date;
  readonly notAfter: Date;
}

/** What an exit registry row may hold as a fingerprint. */
export const FINGERPRINT = /^[0-9a-f]{64}$/;

/** A colon-separated upper-case fingerprint (X509Certificate's) as the registry writes it. */
export function normalFingerprint(colons: string): string {
  return colons.replaceAll(':', '').toLowerCase();
}

// ---- DER, just what a certificate needs -----------------------------------------------------------------

function tlv(tag: number, body: Buffer): Buffer {
  const n = body.length;
  const len = n < 0x80 ? Buffer.from([n]) : n < 0x100 ? Buffer.from([0x81, n]) : Buffer.from([0x82, n >> 8, n & 0xff]);
  return Buffer.concat([Buffer.from([tag]), len, body]);
}
const seq = (...parts: Buffer[]): Buffer => tlv(0x30, Buffer.concat(parts));
const set = (...parts: Buffer[]): Buffer => tlv(0x31, Buffer.concat(parts));
const int = (b: Buffer): Buffer => tlv(0x02, b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
const bits = (b: Buffer): Buffer => tlv(0x03, Buffer.concat([Buffer.from([0]), b]));
const utf8 = (s: string): Buffer => tlv(0x0c, Buffer.from(s, 'utf8'));
const explicit = (n: number, b: Buffer): Buffer => tlv(0xa0 + n, b);

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number) as [number, number, ...number[]];
  const out = [a * 40 + b];
  for (const v of rest) {
    const stack = [v & 0x7f];
    for (let x = v >>> 7; x > 0; x >>>= 7) stack.unshift((x & 0x7f) | 0x80);
    out.push(...stack);
  }
  return tlv(0x06, Buffer.from(out));
}

/** RFC 5280 4.1.2.5: UTCTime through 2049, GeneralizedTime from 2050. */
function time(d: Date): Buffer {
  const iso = d.toISOString().replace(/[-:T]/g, '').slice(0, 14); // YYYYMMDDHHMMSS
  return d.getUTCFullYear() < 2050 ? tlv(0x17, Buffer.from(`${iso.slice(2)}Z`)) : tlv(0x18, Buffer.from(`${iso}Z`));
}

const ECDSA_SHA256 = seq(oid('1.2.840.10045.4.3.2'));

/** A new key and a certificate valid from a minute ago (clock skew) for `lifetimeMs`. */
export function makeHopIdentity(lifetimeMs: number, now = Date.now()): HopIdentity {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const serial = randomBytes(16);
  // Positive, and its first byte neither 0x00 nor high: a minimal DER INTEGER as it stands (a leading 0x00
  // before a byte below 0x80 is invalid DER, and OpenSSL refuses the certificate).
  serial[0] = (serial[0]! & 0x7f) | 0x40;
  const name = seq(set(seq(oid('2.5.4.3'), utf8('proxyd hop exit'))));
  const notBefore = new Date(Math.floor((now - 60_000) / 1000) * 1000);
  const notAfter = new Date(Math.floor((now + lifetimeMs) / 1000) * 1000);
  const spki = publicKey.export({ type: 'spki', format: 'der' });
  const tbs = seq(
    explicit(0, int(Buffer.from([2]))),
    int(serial),
    ECDSA_SHA256,
    name,
    seq(time(notBefore), time(notAfter)),
    name,
    spki,
  );
  const der = seq(tbs, ECDSA_SHA256, bits(sign('sha256', tbs, privateKey)));
  const cert = `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;
  const key = privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
  return readHopIdentity(key + cert);
}

/** The identity in a PEM bundle (key, then certificate); throws a plain message when it is not one. */
export function readHopIdentity(pem: string): HopIdentity {
  const keyPem = /-----BEGIN PRIVATE KEY-----[\s\S]+?-----END PRIVATE KEY-----\n?/.exec(pem)?.[0];
  const certPem = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/.exec(pem)?.[0];
  if (!keyPem || !certPem) throw new Error('not a hop identity (a private key and a certificate in PEM)');
  const x = new X509Certificate(certPem);
  const key = createPrivateKey(keyPem);
  if (!x.checkPrivateKey(key)) throw new Error('the hop certificate does not match its key');
  return {
    pem: keyPem + certPem,
    key: keyPem,
    cert: certPem,
    fingerprint: normalFingerprint(x.fingerprint256),
    notBefore: new Date(x.validFrom),
    notAfter: new Date(x.validTo),
  };
}
