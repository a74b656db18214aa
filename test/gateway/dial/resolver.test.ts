// The gateway's resolver (src/gateway/dial/resolver.ts): /etc/hosts names answered locally, other names asked
// of a DNS server over c-ares (here a small responder on loopback), cached for their TTL, concurrent
// questions folded into one, a name with no address remembered briefly.
import dgram from 'node:dgram';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CachingResolver, parseHosts } from '../../../src/gateway/dial/resolver.js';

/** A DNS responder: `known.test` → A 192.0.2.7 and AAAA 2001:db8::7 (TTL 60); every other name NXDOMAIN. */
let server: dgram.Socket;
let port = 0;
const asked: string[] = [];

function answer(msg: Buffer): Buffer {
  let i = 12;
  const labels: string[] = [];
  while (msg[i]! > 0) {
    labels.push(msg.subarray(i + 1, i + 1 + msg[i]!).toString('latin1'));
    i += msg[i]! + 1;
  }
  const qtype = msg.readUInt16BE(i + 1);
  const question = msg.subarray(12, i + 5);
  const name = labels.join('.').toLowerCase();
  asked.push(`${name}/${qtype}`);
  const known = name === 'known.test';
  const rdata = qtype === 1 ? Buffer.from([192, 0, 2, 7]) : Buffer.from('20010db8000000000000000000000007', 'hex');
  const header = Buffer.alloc(12);
  header.writeUInt16BE(msg.readUInt16BE(0), 0);
  header.writeUInt16BE(known ? 0x8180 : 0x8183, 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(known ? 1 : 0, 6);
  if (!known) return Buffer.concat([header, question]);
  const rr = Buffer.alloc(12);
  rr.writeUInt16BE(0xc00c, 0);
  rr.writeUInt16BE(qtype, 2);
  rr.writeUInt16BE(1, 4);
  rr.writeUInt32BE(60, 6);
  rr.writeUInt16BE(rdata.length, 10);
  return Buffer.concat([header, question, rr, rdata]);
}

let hostsFile: string;

beforeAll(async () => {
  server = dgram.createSocket('udp4');
  server.on('message', (msg, rinfo) => server.send(answer(msg), rinfo.port, rinfo.address));
  await new Promise<void>((r) => server.bind(0, '127.0.0.1', r));
  port = server.address().port;
  hostsFile = path.join(mkdtempSync(path.join(tmpdir(), 'proxyd-hosts-')), 'hosts');
  writeFileSync(
    hostsFile,
    '127.0.0.1\tlocalhost\n::1 localhost ip6-localhost # comment\n127.0.0.9 Target.Local  alias\n# 10.0.0.1 commented\n',
  );
});
afterAll(() => server.close());

const resolver = () => new CachingResolver({ servers: [`127.0.0.1:${port}`], hostsFile, timeoutMs: 1000, tries: 1 });

describe('the gateway resolver', () => {
  it('parses a hosts file: names case-insensitive, IPv4 first, comments ignored', () => {
    const h = parseHosts('::1 localhost\n127.0.0.1 localhost\n10.1.1.1 A b # x\nbad line\n# 1.2.3.4 c\n');
    expect(h.get('localhost')).toEqual([
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ]);
    expect(h.get('a')).toEqual([{ address: '10.1.1.1', family: 4 }]);
    expect(h.has('c')).toBe(false);
  });

  it('answers names of the hosts file without asking DNS', async () => {
    const r = resolver();
    asked.length = 0;
    expect(await r.lookup('TARGET.local')).toEqual([{ address: '127.0.0.9', family: 4 }]);
    expect(await r.lookup('localhost')).toEqual([
      { address: '127.0.0.1', family: 4 },
      { address: '::1', family: 6 },
    ]);
    expect(asked).toEqual([]);
  });

  it('asks DNS for other names, both families, then answers from the cache; concurrent questions fold into one', async () => {
    const r = resolver();
    asked.length = 0;
    const both = await Promise.all([r.lookup('known.test'), r.lookup('Known.Test.'), r.lookup('known.test')]);
    for (const list of both)
      expect(list).toEqual([
        { address: '192.0.2.7', family: 4 },
        { address: '2001:db8::7', family: 6 },
      ]);
    expect(asked.sort()).toEqual(['known.test/1', 'known.test/28']);
    await r.lookup('known.test');
    expect(asked).toHaveLength(2);
  });

  it('rejects a name with no address (ENOTFOUND) and remembers that briefly', async () => {
    const r = resolver();
    asked.length = 0;
    await expect(r.lookup('missing.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    await expect(r.lookup('missing.test')).rejects.toMatchObject({ code: 'ENOTFOUND' });
    expect(asked).toHaveLength(2); // one A and one AAAA question, then the negative cache
  });
});
