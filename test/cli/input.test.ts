import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { collectItems, parseEntry, parseLines } from '../../src/cli/input.js';
import { KEY_PREFIX } from '../../src/contract/key-prefix.js';

const stdin = (s = '') => Readable.from([Buffer.from(s)]);

describe('IP input', () => {
  it('parses IP and IP=REMARK, comments and blanks', () => {
    expect(parseEntry('8.8.8.8')).toEqual({ ip: '8.8.8.8' });
    expect(parseEntry('  8.8.8.8  # office ')).toEqual({ ip: '8.8.8.8' });
    expect(parseEntry('8.8.8.8=office #2')).toEqual({ ip: '8.8.8.8', remark: 'office #2' });
    expect(parseEntry('8.8.8.8=')).toEqual({ ip: '8.8.8.8', remark: '' });
    expect(parseEntry('# comment')).toBeNull();
    expect(parseEntry('   ')).toBeNull();
    expect(parseLines('8.8.8.8\r\n\n# x\n9.9.9.9\r\n')).toEqual([{ ip: '8.8.8.8' }, { ip: '9.9.9.9' }]);
  });

  it('folds duplicates into the first occurrence and applies --remark to entries without one', async () => {
    const r = await collectItems({
      args: ['8.8.8.8=a', '9.9.9.9'],
      files: ['f'],
      readTextFile: async () => '8.8.8.8=b\n9.9.9.9\n1.1.1.1\n',
      defaultRemark: 'dflt',
      remarks: true,
      stdin: stdin(),
    });
    expect(r.items).toEqual([
      { ip: '8.8.8.8', remark: 'a' },
      { ip: '9.9.9.9', remark: 'dflt' },
      { ip: '1.1.1.1', remark: 'dflt' },
    ]);
    expect(r.duplicates).toBe(2);
  });

  it('reads every --file given, in order (a repeated --file once kept only the last)', async () => {
    const texts: Record<string, string> = { a: '8.8.8.8\n1.1.1.1\n', b: '9.9.9.9\n8.8.8.8\n' };
    const r = await collectItems({
      args: ['2.2.2.2'],
      files: ['a', 'b'],
      readTextFile: async (p) => texts[p]!,
      remarks: false,
      stdin: stdin(),
    });
    expect(r.items).toEqual([{ ip: '2.2.2.2' }, { ip: '8.8.8.8' }, { ip: '1.1.1.1' }, { ip: '9.9.9.9' }]);
    expect(r.duplicates).toBe(1);
  });

  it('names an API key given as an IP as a key, not a token (and sends neither)', async () => {
    await expect(
      collectItems({ args: [`${KEY_PREFIX}abcd1234_${'x'.repeat(16)}`], remarks: true, stdin: stdin() }),
    ).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('proxyctl key set') });
    // A token as the IP and `pxk_` merely written in the remark: a token, named as one.
    const token = `ak${'0'.repeat(20)}.${'A'.repeat(43)}`;
    await expect(
      collectItems({ args: [`${token}=about pxk_ keys`], remarks: true, stdin: stdin() }),
    ).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('proxyctl login') });
  });

  it('reads - from stdin and drops remarks for delete', async () => {
    const r = await collectItems({
      args: [],
      files: ['-'],
      remarks: false,
      stdin: stdin('8.8.8.8=x\n# c\n9.9.9.9\n8.8.8.8\n'),
    });
    expect(r.items).toEqual([{ ip: '8.8.8.8' }, { ip: '9.9.9.9' }]);
    expect(r.duplicates).toBe(1);
  });

  it('refuses reading stdin twice and reports an unreadable file as a usage error', async () => {
    await expect(
      collectItems({ args: ['-'], files: ['-'], remarks: false, stdin: stdin('1.1.1.1') }),
    ).rejects.toMatchObject({ exitCode: 2 });
    await expect(
      collectItems({ args: [], files: ['/nonexistent/x'], remarks: false, stdin: stdin() }),
    ).rejects.toMatchObject({ exitCode: 2, message: 'cannot read /nonexistent/x: no such file (ENOENT)' });
  });

  it('reads UTF-16 files and stdin (byte-order mark: what Windows PowerShell `>` writes), UTF-8 with or without BOM', async () => {
    const text = '8.8.8.8\r\n9.9.9.9=caf\u00e9\r\n';
    const le = Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(text, 'utf16le')]);
    const be = Buffer.from(le);
    be.swap16();
    const want = [{ ip: '8.8.8.8' }, { ip: '9.9.9.9', remark: 'caf\u00e9' }];
    const dir = mkdtempSync(path.join(tmpdir(), 'proxyctl-input-'));
    for (const [name, bytes] of [
      ['le.txt', le],
      ['be.txt', be],
      ['bom8.txt', Buffer.from(`\ufeff${text}`)],
      ['plain.txt', Buffer.from(text)],
    ] as const) {
      writeFileSync(path.join(dir, name), bytes);
      const r = await collectItems({ args: [], files: [path.join(dir, name)], remarks: true, stdin: stdin() });
      expect(r.items, name).toEqual(want);
    }
    const piped = await collectItems({
      args: ['-'],
      remarks: true,
      stdin: Readable.from([le.subarray(0, 5), le.subarray(5)]),
    });
    expect(piped.items).toEqual(want);
  });
});
