// Progress on a TTY only (ora on stderr); scripts and --quiet get none.
import type { BatchProgress } from './batch.js';

export interface Progress {
  update(p: BatchProgress, verb: string): void;
  stop(): void;
}

export function describeProgress(p: BatchProgress, verb: string): string {
  const parts = [`${verb} ${p.settled}/${p.total}`, `${p.succeeded} ok`];
  if (p.alreadyDone) parts.push(`${p.alreadyDone} already done`);
  if (p.failed) parts.push(`${p.failed} failed`);
  let text = parts.join(', ');
  if (p.waiting) {
    const s = Math.ceil(p.waiting.ms / 1000);
    const why =
      p.waiting.reason === 'backoff'
        ? 'before a retry'
        : p.waiting.reason === 'retry-after'
          ? '(server asked: Retry-After)'
          : `for the rate limit (${p.waiting.limit ?? '10 requests/min'})`;
    text += ` — waiting ${s}s ${why}`;
  }
  return text;
}

/** A spinner on a terminal that reports its width; null otherwise (a 0-column pty makes ora redraw forever). */
export async function createSpinner(stream: NodeJS.WritableStream, color: boolean): Promise<Progress | null> {
  const columns = (stream as { columns?: number }).columns ?? 0;
  if (columns < 20) return null;
  const { default: ora } = await import('ora');
  const spinner = ora({ stream, color: color ? 'cyan' : false, discardStdin: false, hideCursor: true }).start();
  return {
    update: (p, verb) => {
      // One line, never wrapped: ora clears by counting lines.
      const text = describeProgress(p, verb);
      const max = ((stream as { columns?: number }).columns ?? columns) - 3;
      spinner.text = text.length > max ? `${text.slice(0, Math.max(0, max - 1))}…` : text;
    },
    stop: () => {
      spinner.stop();
    },
  };
}
