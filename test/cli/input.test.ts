import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { collectItems, parseEntry, parseLines } from '../../src/cli/input.js';

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
      file: 'f',
      readTextFile: async () => '8.8.8.8=b\n9.9.9.9\n1.1.1.1\n',
      defaultRemark: 'dflt',
      remarks: true,
      stdin: stdin(),
    });
    expect(r.items).toEqual([{ ip: '8.8.8.8', remark: 'a' }, { ip: '9.9.9.9', remark: 'dflt' }, { ip: '1.1.1.1', remark: 'dflt' }]);
    expect(r.duplicates).toBe(2);
  });

  it('reads - from stdin and drops remarks for delete', async () => {
    const r = await collectItems({ args: [], file: '-', remarks: false, stdin: stdin('8.8.8.8=x\n# c\n9.9.9.9\n8.8.8.8\n') });
    expect(r.items).toEqual([{ ip: '8.8.8.8' }, { ip: '9.9.9.9' }]);
    expect(r.duplicates).toBe(1);
  });

  it('refuses reading stdin twice and reports an unreadable file as a usage error', async () => {
    await expect(collectItems({ args: ['-'], file: '-', remarks: false, stdin: stdin('1.1.1.1') })).rejects.toMatchObject({ exitCode: 2 });
    await expect(collectItems({ args: [], file: '/nonexistent/x', remarks: false, stdin: stdin() })).rejects.toMatchObject({ exitCode: 2, message: expect.stringContaining('ENOENT') });
  });
});
