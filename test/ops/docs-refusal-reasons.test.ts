// The connection log's reasons are a closed list with one home in the code (REASON_TEXT, keyed by the gateway's
// LogReason). Two docs tables repeat it for two readers: docs/gateway.md "The connection log" (what each reason
// means and what the client is answered) and docs/support.md (what support tells the customer). Both must list
// exactly the code's reasons, no more and no fewer, so a reason added or renamed in the code fails here until both
// tables follow.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { LOG_REASONS } from '../../src/daemon/services/connection-log.js';
import { ROOT } from '../helpers/daemon.js';

/** The first cell of each row of the first table whose header's first cell is `reason`, in the section `heading`. */
function tableReasons(file: string, heading: string): string[] {
  const doc = readFileSync(path.join(ROOT, file), 'utf8');
  const start = heading === '' ? 0 : doc.indexOf(heading);
  expect(start, `${file} has no "${heading}"`).toBeGreaterThanOrEqual(0);
  const lines = doc.slice(start).split('\n');
  const head = lines.findIndex((l) => /^\|\s*reason\s*\|/.test(l));
  expect(head, `${file} has no reason table after "${heading}"`).toBeGreaterThanOrEqual(0);
  const out: string[] = [];
  for (const line of lines.slice(head + 2)) {
    if (!line.startsWith('|')) break;
    const cell = /^\|\s*`([a-z_]+)`\s*\|/.exec(line);
    expect(cell, `${file}: a row whose first cell is not a reason: ${line.slice(0, 60)}`).not.toBeNull();
    out.push(cell![1]!);
  }
  return out;
}

describe('docs: the connection log reasons', () => {
  const code = [...LOG_REASONS].sort();
  it('docs/gateway.md "The connection log" lists every reason once, and only those', () => {
    const doc = tableReasons('docs/gateway.md', '## The connection log');
    expect(doc.length, 'a reason listed twice').toBe(new Set(doc).size);
    expect([...doc].sort()).toEqual(code);
  });
  it('docs/support.md lists every reason once, and only those', () => {
    const doc = tableReasons('docs/support.md', '');
    expect(doc.length, 'a reason listed twice').toBe(new Set(doc).size);
    expect([...doc].sort()).toEqual(code);
  });
});
