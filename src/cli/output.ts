// Human and machine output: colour on/off, cli-table3 tables, one JSON document on stdout.
import Table from 'cli-table3';
import type { Io } from './io.js';

const ANSI = { bold: [1, 22], dim: [2, 22], red: [31, 39], green: [32, 39], yellow: [33, 39], cyan: [36, 39] } as const;
type Style = keyof typeof ANSI;

export interface Output {
  readonly color: boolean;
  readonly json: boolean;
  readonly quiet: boolean;
  /** Colours `text` when colour is on. */
  paint(style: Style, text: string): string;
  /** A line on stdout (human output). */
  line(text?: string): void;
  /** A line on stderr that --quiet hides (progress notes, hints). */
  info(text: string): void;
  /** A one-line warning on stderr (always shown). */
  warn(text: string): void;
  /** An error on stderr (always shown). */
  error(text: string): void;
  /** The one JSON document of a --json run. */
  writeJson(doc: unknown): void;
  /** A table as text (no trailing newline). */
  table(head: string[], rows: Array<Array<string | number>>): string;
}

interface OutputOptions {
  color: boolean;
  json: boolean;
  quiet: boolean;
}

export function createOutput(io: Pick<Io, 'stdout' | 'stderr'>, opts: OutputOptions): Output {
  const paint = (style: Style, text: string): string => {
    if (!opts.color) return text;
    const [on, off] = ANSI[style];
    return `\u001b[${on}m${text}\u001b[${off}m`;
  };
  const errColor = opts.color;
  return {
    color: opts.color,
    json: opts.json,
    quiet: opts.quiet,
    paint,
    line: (text = '') => void io.stdout.write(`${text}\n`),
    info: (text) => {
      if (!opts.quiet) io.stderr.write(`${text}\n`);
    },
    // One line each, whatever a server's message in it holds.
    warn: (text) =>
      void io.stderr.write(`${errColor ? paint('yellow', 'warning:') : 'warning:'} ${terminalSafe(text)}\n`),
    error: (text) => void io.stderr.write(`${errColor ? paint('red', 'error:') : 'error:'} ${terminalSafe(text)}\n`),
    writeJson: (doc) => void io.stdout.write(`${JSON.stringify(doc, null, 2)}\n`),
    table: (head, rows) => renderTable(head, rows, opts.color),
  };
}

// Control characters (C0, DEL, C1) and Unicode's bidirectional controls: from a server's text (a remark, a reason)
// they would move the cursor, clear the screen, retitle the window or reorder what the terminal shows.
const CONTROL = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * Text from elsewhere made safe to print in a table, a TSV row or a message: a tab or line break becomes a space,
 * any other control character its escape (`\u{1b}`), so it is seen and never acted on by the terminal.
 */
export function terminalSafe(text: string): string {
  return text.replace(CONTROL, (c) =>
    c === '\t' || c === '\n' || c === '\r' ? ' ' : `\\u{${c.charCodeAt(0).toString(16)}}`,
  );
}

// The colours paint() adds: with colour on, the only escapes a cell keeps. Callers pass text from elsewhere
// through terminalSafe() before they colour a cell; this is the net under them.
const OUR_SGR = new RegExp(`(\u001b\\[(?:${[...new Set(Object.values(ANSI).flat())].join('|')})m)`);

/** A cell as shown: every control character made visible, but for paint()'s colours when colour is on. */
function cellText(c: string | number, color: boolean): string {
  const text = String(c);
  if (!color) return terminalSafe(text);
  return text
    .split(OUR_SGR)
    .map((part, i) => (i % 2 === 1 ? part : terminalSafe(part)))
    .join('');
}

function renderTable(head: string[], rows: Array<Array<string | number>>, color: boolean): string {
  const t = new Table({
    head: color ? head.map((h) => `\u001b[1m${h}\u001b[22m`) : head,
    style: { head: [], border: [], compact: false },
    wordWrap: false,
  });
  for (const r of rows) t.push(r.map((c) => cellText(c, color)));
  return t.toString();
}

/** Tab-separated rows for a pipe (no colour, no borders), one record per line. */
export function renderTsv(rows: Array<Array<string | number>>): string {
  return rows.map((r) => r.map((c) => terminalSafe(String(c))).join('\t')).join('\n');
}
