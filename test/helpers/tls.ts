// Certificates for TLS tests, made with openssl in a temp dir: a CA, leaves it signed, and a self-signed one.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export interface Certs {
  dir: string;
  caPem: string;
  caFile: string;
  /** Signed by the CA for 127.0.0.1 and localhost. */
  good: { key: string; cert: string };
  /** Self-signed for 127.0.0.1. */
  selfSigned: { key: string; cert: string };
  /** Signed by the CA for wrong.example only. */
  wrongHost: { key: string; cert: string };
  /** Signed by the CA, expired yesterday. */
  expired: { key: string; cert: string };
}

const EC_KEY = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** A self-signed certificate for `san` (e.g. `IP:127.0.0.1,DNS:localhost`), made in `dir`: its key and cert in PEM and the cert's file. */
export function selfSignedCert(
  dir: string,
  name: string,
  san: string,
  days = '2',
): { key: string; cert: string; certFile: string } {
  const certFile = path.join(dir, `${name}.pem`);
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      ...EC_KEY,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.pem`,
      '-days',
      days,
      '-subj',
      `/CN=${name}`,
      '-addext',
      `subjectAltName=${san}`,
    ],
    {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  );
  return { key: readFileSync(path.join(dir, `${name}.key`), 'utf8'), cert: readFileSync(certFile, 'utf8'), certFile };
}

export function makeCerts(): Certs {
  const dir = mkdtempSync(path.join(tmpdir(), 'check-certs-'));
  const ossl = (args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
  const key = EC_KEY;
  ossl(['req', '-x509', ...key, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=proxyctl test CA']);
  const leaf = (name: string, san: string, days: string, selfSigned = false) => {
    writeFileSync(path.join(dir, `${name}.ext`), `subjectAltName=${san}\n`);
    if (selfSigned) {
      const { key: k, cert } = selfSignedCert(dir, name, san, days);
      return { key: k, cert };
    } else {
      ossl(['req', ...key, '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', `/CN=${name}`]);
      ossl([
        'x509',
        '-req',
        '-in',
        `${name}.csr`,
        '-CA',
        'ca.pem',
        '-CAkey',
        'ca.key',
        '-days',
        days,
        '-extfile',
        `${name}.ext`,
        '-out',
        `${name}.pem`,
      ]);
    }
    return {
      key: readFileSync(path.join(dir, `${name}.key`), 'utf8'),
      cert: readFileSync(path.join(dir, `${name}.pem`), 'utf8'),
    };
  };
  return {
    dir,
    caFile: path.join(dir, 'ca.pem'),
    caPem: readFileSync(path.join(dir, 'ca.pem'), 'utf8'),
    good: leaf('good', 'IP:127.0.0.1,DNS:localhost', '2'),
    selfSigned: leaf('self', 'IP:127.0.0.1,DNS:localhost', '2', true),
    wrongHost: leaf('wrong', 'DNS:wrong.example', '2'),
    expired: leaf('expired', 'IP:127.0.0.1,DNS:localhost', '-1'),
  };
}
