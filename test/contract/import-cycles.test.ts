// The layering of docs/architecture.md, checked on the source: no import cycle in src/, the arrows point one
// way (cli → contract; daemon → contract, gateway; gateway → nothing of ours), no private path of a dependency.
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

const SPECIFIER = /(?:\bfrom\s*|\bimport\s*\(\s*|^\s*import\s+)['"]([^'"]+)['"]/gm;

/** Specifiers a file imports (static, `export … from`, side-effect and dynamic), type-only lines kept unless `runtimeOnly`. */
function specifiersOf(file: string, runtimeOnly: boolean): string[] {
  let text = readFileSync(file, 'utf8');
  if (runtimeOnly) text = text.replace(/^\s*(?:import|export) type\b[^;]*;/gm, '');
  return [...text.matchAll(SPECIFIER)].map((m) => m[1]!);
}

/** The graph of relative imports between files under src/. */
function graph(runtimeOnly: boolean): Map<string, string[]> {
  const files = sources(SRC);
  return new Map(
    files.map((f) => {
      const deps = specifiersOf(f, runtimeOnly)
        .filter((s) => s.startsWith('.'))
        .map((s) => path.resolve(path.dirname(f), s).replace(/\.js$/, '.ts'));
      return [f, [...new Set(deps)].filter((d) => d !== f)];
    }),
  );
}

/** Every cycle, each as the list of files from its first module back to it. */
export function findCycles(g: Map<string, string[]>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (n: string): void => {
    state.set(n, 'open');
    stack.push(n);
    for (const m of g.get(n) ?? []) {
      if (!g.has(m)) continue;
      if (state.get(m) === 'open') cycles.push([...stack.slice(stack.indexOf(m)), m]);
      else if (!state.has(m)) visit(m);
    }
    stack.pop();
    state.set(n, 'done');
  };
  for (const n of g.keys()) if (!state.has(n)) visit(n);
  return cycles;
}

const rel = (f: string) => path.relative(ROOT, f);
const shown = (cycles: string[][]) => cycles.map((c) => c.map(rel).join(' -> '));
const layer = (f: string) => path.relative(SRC, f).split(path.sep)[0]!;
const ALLOWED: Record<string, string[]> = {
  contract: ['contract'],
  gateway: ['gateway'],
  cli: ['cli', 'contract'],
  daemon: ['daemon', 'contract', 'gateway'],
};

describe('import graph of src/', () => {
  it('the cycle finder finds a planted cycle', () => {
    expect(findCycles(new Map([['a', ['b']], ['b', ['c']], ['c', ['a']], ['d', ['a']]]))).toEqual([['a', 'b', 'c', 'a']]);
  });

  it('finds the sources and their imports', () => {
    const g = graph(false);
    expect(g.size).toBeGreaterThan(50);
    expect([...g.values()].some((deps) => deps.length > 0)).toBe(true);
  });

  it('has no cycle through runtime imports', () => {
    expect(shown(findCycles(graph(true)))).toEqual([]);
  });

  // Type-only imports vanish at build time but still tie modules together.
  it('has no cycle through type-only imports either', () => {
    expect(shown(findCycles(graph(false)))).toEqual([]);
  });

  it('imports only along the allowed arrows (type-only imports included)', () => {
    const wrong: string[] = [];
    for (const [from, deps] of graph(false)) {
      for (const to of deps) if (!(ALLOWED[layer(from)] ?? []).includes(layer(to))) wrong.push(`${rel(from)} -> ${rel(to)}`);
    }
    expect(wrong).toEqual([]);
  });

  // Inside src/daemon/ (docs/architecture.md, "Rooms"): a room's files import only what its line there allows.
  const inDaemon = (f: string, dir: string) => rel(f).startsWith(`src/daemon/${dir}/`);
  const INNER: Array<{ rule: string; from: (f: string) => boolean; forbidden: (to: string) => boolean; runtimeOnly?: boolean }> = [
    // The gateway's face declares what it hands over (`UsageDelta`): the store may name those types, and run nothing of it.
    {
      rule: "a store backend imports nothing outside store/ (contract aside; the gateway's types.ts, type-only)",
      from: (f) => inDaemon(f, 'store'),
      forbidden: (to) => !inDaemon(to, 'store') && !rel(to).startsWith('src/contract/') && rel(to) !== 'src/gateway/types.ts',
    },
    { rule: 'a store backend runs nothing outside store/ but contract/', from: (f) => inDaemon(f, 'store'), forbidden: (to) => !inDaemon(to, 'store') && !rel(to).startsWith('src/contract/'), runtimeOnly: true },
    { rule: 'the console does not import the API', from: (f) => inDaemon(f, 'console'), forbidden: (to) => inDaemon(to, 'api') },
    { rule: "api/body.ts does not reach into the API's routes", from: (f) => rel(f) === 'src/daemon/api/body.ts', forbidden: (to) => inDaemon(to, 'api/routes') },
    { rule: 'the gateway-facing admission imports no HTTP side', from: (f) => inDaemon(f, 'admission'), forbidden: (to) => inDaemon(to, 'api') || inDaemon(to, 'console') },
  ];

  it.each(INNER.map((r) => [r.rule, r] as const))('inner rule: %s', (_name, r) => {
    const wrong: string[] = [];
    for (const [from, deps] of graph(r.runtimeOnly ?? false)) if (r.from(from)) for (const to of deps) if (r.forbidden(to)) wrong.push(`${rel(from)} -> ${rel(to)}`);
    expect(wrong).toEqual([]);
  });

  it('imports no private path of a dependency', () => {
    const priv = /^(?:@[^/]+\/)?[^./][^/]*\/(?:lib|dist|src|types|internal)\//;
    const bad = sources(SRC).flatMap((f) => specifiersOf(f, false).filter((s) => priv.test(s)).map((s) => `${rel(f)}: ${s}`));
    expect(bad).toEqual([]);
  });
});
