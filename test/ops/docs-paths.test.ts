// The docs name files and functions a newcomer will open: every repository path named in docs/*.md,
// docs/benchmarks/*.md and README.md must exist, every relative link in them must resolve, every
// `docs/decisions.md#d-NNN` (in docs, code, tests and benches) must name an entry, and every step of
// docs/architecture.md's traces (`src/….ts:function`, `src/….ts:Class.method`) must name a symbol that file
// declares (a method, as a member of that class), as must every `Class.method` they name without its file. It
// once named five files that no longer existed.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/daemon.js';

const read = (rel: string): string => readFileSync(path.join(ROOT, rel), 'utf8');
const mdIn = (dir: string): string[] =>
  readdirSync(path.join(ROOT, dir))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `${dir}/${f}`);
const DOCS = [...mdIn('docs'), ...mdIn('docs/benchmarks'), 'README.md'];

/** A path as the docs write it: a file or folder, or a test/bench named without its extension. */
function exists(rel: string): boolean {
  return ['', '.ts', '.test.ts', '.mjs', '.md'].some((ext) => existsSync(path.join(ROOT, rel + ext)));
}

// A repository path: starts with one of the top folders, not inside a URL or a longer path.
const PATH = /(?<![\w./@:-])((?:src|test|bench|packaging|docs|scripts|vendor|bin)\/[\w.\-/]*[\w/])/g;

function pathsIn(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(PATH)) {
    const p = m[1]!.replace(/\/$/, '');
    // A placeholder (`src/….ts`, `docs/benchmarks/<topic>.md`) names no one file.
    const after = text[m.index! + m[0].length];
    if (after === '…' || after === '<' || after === '*' || after === '{') continue;
    out.push(p);
  }
  return out;
}

/** Declared in this source text: a function, class, const, type, interface or enum, or a member of one. */
function declares(src: string, name: string): boolean {
  const n = name.replace(/[$]/g, '\\$');
  return (
    new RegExp(`(?:function\\*?|class|const|let|type|interface|enum)\\s+${n}\\b`).test(src) ||
    new RegExp(
      `^\\s*(?:(?:export|private|public|protected|static|readonly|async|get|set|override)\\s+)*${n}\\s*[(<=:?]`,
      'm',
    ).test(src)
  );
}

/** The text of `class name { … }` in a (Prettier-formatted) source: from its line to the `}` that closes it at the line's indent. */
function classBody(src: string, name: string): string | null {
  const m = new RegExp(`^([ \\t]*)(?:export\\s+)?(?:abstract\\s+)?class\\s+${name}\\b`, 'm').exec(src);
  if (!m) return null;
  const close = src.indexOf(`\n${m[1]}}`, m.index);
  return src.slice(m.index, close < 0 ? undefined : close);
}

/** Every .ts file under src/. */
function srcFiles(dir = 'src'): string[] {
  return readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? srcFiles(`${dir}/${e.name}`) : e.name.endsWith('.ts') ? [`${dir}/${e.name}`] : [],
  );
}

describe('docs: every named path and symbol exists', () => {
  it('has docs to check', () => {
    expect(DOCS.length).toBeGreaterThan(10);
    expect(DOCS).toContain('docs/architecture.md');
  });

  it.each(DOCS)('%s: every repository path it names exists', (doc) => {
    const missing = [...new Set(pathsIn(read(doc)))].filter((p) => !exists(p));
    expect(missing, `${doc} names paths that do not exist`).toEqual([]);
  });

  it.each(DOCS)('%s: every relative link resolves', (doc) => {
    const text = read(doc);
    const missing: string[] = [];
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1]!;
      if (/^(?:[a-z]+:|#)/.test(target)) continue;
      const file = target.split('#')[0]!;
      if (!existsSync(path.join(ROOT, path.dirname(doc), file))) missing.push(target);
    }
    expect(missing, `${doc} links to files that do not exist`).toEqual([]);
  });

  it('every decisions.md#d-NNN anchor named in docs, code, tests and benches is an entry', () => {
    const decisions = read('docs/decisions.md');
    const anchors = new Set([...decisions.matchAll(/<a id="(d-\d{3})"><\/a>/g)].map((m) => m[1]!));
    expect(anchors.size).toBeGreaterThan(40);
    const walk = (dir: string): string[] =>
      readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? walk(`${dir}/${e.name}`) : /\.(?:ts|mjs|md)$/.test(e.name) ? [`${dir}/${e.name}`] : [],
      );
    const files = [...DOCS, ...walk('src'), ...walk('test'), ...walk('bench')];
    const missing: string[] = [];
    const flat = (s: string): string => s.replace(/\s+(?:\/\/|\*)?\s*/g, ' ').toLowerCase();
    for (const f of files) {
      const text = read(f);
      for (const m of text.matchAll(/decisions\.md#(d-\d+)/g)) if (!anchors.has(m[1]!)) missing.push(`${f}: ${m[1]}`);
      // `decisions.md#d-NNN, "a title or phrase"`: the phrase is in that entry (a grep for it lands there).
      for (const m of text.matchAll(/decisions\.md#(d-\d+),? \(?"([^"]+)"/g)) {
        const at = decisions.indexOf(`<a id="${m[1]}"></a>`);
        const next = decisions.indexOf('<a id="d-', at + 1);
        const entry = flat(decisions.slice(at, next < 0 ? undefined : next));
        if (at < 0 || !entry.includes(flat(m[2]!).replace(/\s*…$/, ''))) missing.push(`${f}: ${m[1]} "${m[2]}"`);
      }
    }
    expect(missing).toEqual([]);
    for (const m of decisions.matchAll(/\]\(#(d-\d+)\)/g))
      if (!anchors.has(m[1]!)) missing.push(`docs/decisions.md: #${m[1]}`);
    expect(missing).toEqual([]);
    // Each entry: its anchor, its numbered heading and a status line.
    for (const a of anchors) {
      const at = decisions.indexOf(`<a id="${a}"></a>`);
      const entry = decisions.slice(at, at + 600);
      expect(entry, a).toMatch(new RegExp(`### ${a.toUpperCase()} `));
      expect(entry, a).toMatch(/\nArea: .+ · Status: /);
      expect(decisions, `${a} is missing from the index`).toContain(`| [${a.toUpperCase()}](#${a}) |`);
    }
  });

  it('a docs/benchmarks/<topic>.md named with a quoted section holds that section', () => {
    const walk = (dir: string): string[] =>
      readdirSync(path.join(ROOT, dir), { withFileTypes: true }).flatMap((e) =>
        e.isDirectory() ? walk(`${dir}/${e.name}`) : /\.(?:ts|mjs|md)$/.test(e.name) ? [`${dir}/${e.name}`] : [],
      );
    const wrong: string[] = [];
    for (const f of [...DOCS, ...walk('src'), ...walk('test'), ...walk('bench')]) {
      for (const m of read(f).matchAll(/(docs\/benchmarks\/[\w-]+\.md),\s*(?:\/\/\s*|\*\s*)?"([^"]+)"/g)) {
        const target = m[1]!;
        if (!existsSync(path.join(ROOT, target))) continue; // the path check reports it
        const phrase = m[2]!.replace(/\s+(?:\/\/|\*)?\s*/g, ' ').toLowerCase();
        if (!read(target).replace(/\s+/g, ' ').toLowerCase().includes(phrase)) wrong.push(`${f}: ${target} "${m[2]}"`);
      }
    }
    expect(wrong).toEqual([]);
  });

  it('docs/architecture.md: every step of the traces names a file and a symbol it declares', () => {
    const doc = read('docs/architecture.md');
    const traces = doc.slice(doc.indexOf('## Traces'), doc.indexOf('\n## ', doc.indexOf('## Traces') + 1));
    const steps = [...traces.matchAll(/`((?:src|test|bench)\/[\w./-]+\.(?:ts|mjs)):([\w$.]+)`/g)];
    expect(steps.length, 'the traces have file:function steps').toBeGreaterThan(25);
    const wrong: string[] = [];
    for (const [, file, symbol] of steps) {
      if (!existsSync(path.join(ROOT, file!))) {
        wrong.push(`${file} does not exist`);
        continue;
      }
      const src = read(file!);
      const [owner, member] = symbol!.split('.');
      if (!declares(src, owner!)) wrong.push(`${file}:${symbol} (${owner} is not declared there)`);
      else if (member !== undefined && !declares(classBody(src, owner!) ?? '', member))
        wrong.push(`${file}:${symbol} (${owner} has no member ${member})`);
    }
    expect(wrong).toEqual([]);
    // Both traces are there, numbered.
    expect(traces).toMatch(/### \(a\)[^\n]*alice-country-us-session-abc/);
    expect(traces).toMatch(/### \(b\)[^\n]*UDP/);
    expect(traces).toMatch(/\n1\. /);
  });

  it('docs/architecture.md: every `Class.member` the traces name without a file is a member of that class of ours', () => {
    const doc = read('docs/architecture.md');
    const traces = doc.slice(doc.indexOf('## Traces'), doc.indexOf('\n## ', doc.indexOf('## Traces') + 1));
    const named = [...traces.matchAll(/(?<![\w/.:])`([A-Z][\w$]*)\.([\w$]+)`/g)];
    expect(named.length, 'the traces name methods by their class').toBeGreaterThan(20);
    const sources = srcFiles().map((f) => ({ f, text: read(f) }));
    const wrong: string[] = [];
    for (const [, owner, member] of named) {
      const homes = sources.filter((s) => new RegExp(`\\bclass\\s+${owner}\\b`).test(s.text));
      if (homes.length === 0) wrong.push(`${owner}.${member} (no class ${owner} in src/)`);
      else if (!homes.some((h) => declares(classBody(h.text, owner!) ?? '', member!)))
        wrong.push(`${owner}.${member} (${homes.map((h) => h.f).join(', ')}: class ${owner} has no member ${member})`);
    }
    expect(wrong).toEqual([]);
  });

  it('docs/architecture.md: a source file followed by a backticked symbol declares that symbol', () => {
    const doc = read('docs/architecture.md');
    const wrong: string[] = [];
    for (const m of doc.matchAll(/\b(src\/[\w./-]+\.ts) \(?`([\w$]+)`/g)) {
      const [, file, symbol] = m;
      if (!existsSync(path.join(ROOT, file!))) continue; // the path check reports it
      if (!declares(read(file!), symbol!)) wrong.push(`${file} \`${symbol}\``);
    }
    expect(wrong).toEqual([]);
  });
});
