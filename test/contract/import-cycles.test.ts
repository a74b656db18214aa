// The arrows point one way: no module in src/ reaches itself again through its runtime imports (static or
// dynamic). `import type` lines are left out: they vanish at build time (gateway conn.ts <-> core.ts is one).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/daemon.js';

const SRC = path.join(ROOT, 'src');

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [p] : [];
  });
}

/** Relative runtime imports of a file, resolved to .ts files under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8').replace(/^\s*(?:import|export) type\b[^;]*;/gm, '');
  const out = new Set<string>();
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"](\.{1,2}\/[^'"]+)['"]/gm)) {
    out.add(path.resolve(path.dirname(file), m[1]!).replace(/\.js$/, '.ts'));
  }
  return [...out];
}

/** Every cycle, each as the list of files from its first module back to it. */
export function findCycles(graph: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (n: string): void => {
    state.set(n, 'open');
    stack.push(n);
    for (const m of graph.get(n) ?? []) {
      if (state.get(m) === 'open') cycles.push([...stack.slice(stack.indexOf(m)), m]);
      else if (!state.has(m)) visit(m);
    }
    stack.pop();
    state.set(n, 'done');
  };
  for (const n of graph.keys()) if (!state.has(n)) visit(n);
  return cycles;
}

describe('import graph of src/', () => {
  it('the cycle finder finds a planted cycle', () => {
    expect(findCycles(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]))).toEqual([['a', 'b', 'c', 'a']]);
  });

  it('has no cycles', () => {
    const files = sources(SRC);
    expect(files.length).toBeGreaterThan(20);
    const graph = new Map(files.map((f) => [f, importsOf(f)]));
    const cycles = findCycles(graph).map((c) => c.map((f) => path.relative(ROOT, f)).join(' -> '));
    expect(cycles).toEqual([]);
  });
});
