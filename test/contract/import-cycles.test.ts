// The layering of docs/architecture.md, checked on the source: no import cycle in src/, the arrows point one
// way (cli → contract; daemon → contract, gateway; contract, gateway → the leaf of rules; the leaf → nothing of
// ours), no private path of a dependency.
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
  rules: ['rules'],
  contract: ['contract', 'rules'],
  gateway: ['gateway', 'rules'],
  cli: ['cli', 'contract', 'rules'],
  daemon: ['daemon', 'contract', 'gateway', 'rules'],
};
// What the leaf (src/rules/) may import besides itself: pure rules, no I/O, no package with weight.
const LEAF_PACKAGES = new Set(['node:net', 'node:buffer']);

describe('import graph of src/', () => {
  it('the cycle finder finds a planted cycle', () => {
    expect(
      findCycles(
        new Map([
          ['a', ['b']],
          ['b', ['c']],
          ['c', ['a']],
          ['d', ['a']],
        ]),
      ),
    ).toEqual([['a', 'b', 'c', 'a']]);
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
      for (const to of deps)
        if (!(ALLOWED[layer(from)] ?? []).includes(layer(to))) wrong.push(`${rel(from)} -> ${rel(to)}`);
    }
    expect(wrong).toEqual([]);
  });

  it('every room of src/ has its arrows', () => {
    expect(readdirSync(SRC).sort()).toEqual(Object.keys(ALLOWED).sort());
  });

  // The leaf (docs/architecture.md, "The leaf of rules"): one home for a rule both sides of the gateway's wall apply.
  it('the leaf imports nothing of ours outside itself, and no package but node:net and node:buffer', () => {
    const leaf = sources(path.join(SRC, 'rules'));
    expect(leaf.length).toBeGreaterThan(0);
    const wrong: string[] = [];
    for (const f of leaf) {
      for (const s of specifiersOf(f, false)) {
        if (s.startsWith('.')) {
          if (layer(path.resolve(path.dirname(f), s)) !== 'rules') wrong.push(`${rel(f)} -> ${s}`);
        } else if (!LEAF_PACKAGES.has(s)) wrong.push(`${rel(f)} -> ${s}`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('the gateway imports of ours only its own files and the leaf', () => {
    const wrong: string[] = [];
    for (const [from, deps] of graph(false)) {
      if (layer(from) !== 'gateway') continue;
      for (const to of deps) if (!['gateway', 'rules'].includes(layer(to))) wrong.push(`${rel(from)} -> ${rel(to)}`);
    }
    expect(wrong).toEqual([]);
  });

  // Inside src/daemon/ (docs/architecture.md, "Rooms"): a room's files import only what its line there allows.
  const inDaemon = (f: string, dir: string) => rel(f).startsWith(`src/daemon/${dir}/`);
  const INNER: Array<{
    rule: string;
    from: (f: string) => boolean;
    forbidden: (to: string) => boolean;
    runtimeOnly?: boolean;
  }> = [
    // The gateway's face declares what it hands over (`UsageDelta`): the store may name those types, and run nothing of it.
    {
      rule: "a store backend imports nothing outside store/ (contract and the leaf aside; the gateway's types.ts, type-only)",
      from: (f) => inDaemon(f, 'store'),
      forbidden: (to) =>
        !inDaemon(to, 'store') &&
        !rel(to).startsWith('src/contract/') &&
        !rel(to).startsWith('src/rules/') &&
        rel(to) !== 'src/gateway/types.ts',
    },
    {
      rule: 'a store backend runs nothing outside store/ but contract/ and the leaf',
      from: (f) => inDaemon(f, 'store'),
      forbidden: (to) =>
        !inDaemon(to, 'store') && !rel(to).startsWith('src/contract/') && !rel(to).startsWith('src/rules/'),
      runtimeOnly: true,
    },
    {
      rule: 'the console does not import the API',
      from: (f) => inDaemon(f, 'console'),
      forbidden: (to) => inDaemon(to, 'api'),
    },
    {
      rule: "api/body.ts does not reach into the API's routes",
      from: (f) => rel(f) === 'src/daemon/api/body.ts',
      forbidden: (to) => inDaemon(to, 'api/routes'),
    },
    {
      rule: 'the gateway-facing admission imports no HTTP side',
      from: (f) => inDaemon(f, 'admission'),
      forbidden: (to) => inDaemon(to, 'api') || inDaemon(to, 'console'),
    },
  ];

  it.each(INNER.map((r) => [r.rule, r] as const))('inner rule: %s', (_name, r) => {
    const wrong: string[] = [];
    for (const [from, deps] of graph(r.runtimeOnly ?? false))
      if (r.from(from)) for (const to of deps) if (r.forbidden(to)) wrong.push(`${rel(from)} -> ${rel(to)}`);
    expect(wrong).toEqual([]);
  });

  // Inside src/gateway/ (docs/architecture.md, "The gateway's rooms"): rooms on floors, each importing only its own
  // floor and those below; types.ts, the boundary, is named by all and names only types; the daemon sees the face.
  const GATEWAY_FLOORS: Record<string, number> = { wire: 0, relay: 1, dial: 2, hop: 3, '': 4, listen: 5 };
  const gatewayRoom = (f: string): string | null => {
    const r = rel(f);
    if (!r.startsWith('src/gateway/')) return null;
    const inner = r.slice('src/gateway/'.length);
    return inner.includes('/') ? inner.split('/')[0]! : '';
  };

  it('the gateway: no file imports a room above its own', () => {
    const wrong: string[] = [];
    for (const [from, deps] of graph(false)) {
      const room = gatewayRoom(from);
      if (room === null || rel(from) === 'src/gateway/index.ts') continue;
      for (const to of deps) {
        const target = gatewayRoom(to);
        if (target === null || rel(to) === 'src/gateway/types.ts') continue;
        if (rel(to) === 'src/gateway/index.ts' || (GATEWAY_FLOORS[target] ?? 99) > (GATEWAY_FLOORS[room] ?? -1))
          wrong.push(`${rel(from)} (${room || 'root'}) -> ${rel(to)} (${target || 'root'})`);
      }
    }
    expect(Object.keys(GATEWAY_FLOORS).sort()).toEqual(
      [...new Set(sources(path.join(SRC, 'gateway')).map((f) => gatewayRoom(f)!))].sort(),
    );
    expect(wrong).toEqual([]);
  });

  it("the gateway's types.ts imports types only", () => {
    expect(graph(true).get(path.join(SRC, 'gateway/types.ts'))).toEqual([]);
  });

  it("the daemon imports only the gateway's face (index.ts and types.ts)", () => {
    const face = new Set(['src/gateway/index.ts', 'src/gateway/types.ts']);
    const wrong: string[] = [];
    for (const [from, deps] of graph(false)) {
      if (!rel(from).startsWith('src/daemon/')) continue;
      for (const to of deps)
        if (rel(to).startsWith('src/gateway/') && !face.has(rel(to))) wrong.push(`${rel(from)} -> ${rel(to)}`);
    }
    expect(wrong).toEqual([]);
  });

  it('the import rules catch a planted breach', () => {
    // The checks above read real files; this one proves their predicate on made-up paths.
    const planted = (from: string, to: string) =>
      (GATEWAY_FLOORS[gatewayRoom(path.join(ROOT, to))!] ?? 99) >
      (GATEWAY_FLOORS[gatewayRoom(path.join(ROOT, from))!] ?? -1);
    expect(planted('src/gateway/relay/splice.ts', 'src/gateway/conn.ts')).toBe(true);
    expect(planted('src/gateway/wire/http-head.ts', 'src/gateway/dial/dialer.ts')).toBe(true);
    expect(planted('src/gateway/listen/socks5.ts', 'src/gateway/conn.ts')).toBe(false);
    const arrow = (from: string, to: string) =>
      (ALLOWED[layer(path.join(ROOT, from))] ?? []).includes(layer(path.join(ROOT, to)));
    expect(arrow('src/rules/host-port.ts', 'src/contract/paths.ts')).toBe(false);
    expect(arrow('src/gateway/conn.ts', 'src/contract/paths.ts')).toBe(false);
    expect(arrow('src/gateway/conn.ts', 'src/rules/host-port.ts')).toBe(true);
  });

  it('imports no private path of a dependency', () => {
    const priv = /^(?:@[^/]+\/)?[^./][^/]*\/(?:lib|dist|src|types|internal)\//;
    const bad = sources(SRC).flatMap((f) =>
      specifiersOf(f, false)
        .filter((s) => priv.test(s))
        .map((s) => `${rel(f)}: ${s}`),
    );
    expect(bad).toEqual([]);
  });
});
