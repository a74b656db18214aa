// A hidden prompt on a TTY: nothing typed is echoed; Ctrl-C aborts.
import type { ReadStream } from 'node:tty';
import { CliError } from './errors.js';
import type { Writer } from './io.js';

export async function readHidden(stdin: NodeJS.ReadableStream, out: Writer, question: string): Promise<string> {
  const tty = stdin as ReadStream;
  out.write(question);
  return new Promise<string>((resolve, reject) => {
    let value = '';
    const wasRaw = tty.isRaw === true;
    tty.setRawMode?.(true);
    tty.setEncoding('utf8');
    tty.resume();
    const done = (err?: Error) => {
      tty.off('data', onData);
      tty.setRawMode?.(wasRaw);
      tty.pause();
      out.write('\n');
      if (err) reject(err);
      else resolve(value);
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') return done();
        if (ch === '\u0003') return done(new CliError('cancelled', 130 as never));
        if (ch === '\u007f' || ch === '\b') value = [...value].slice(0, -1).join('');
        else if (ch >= ' ') value += ch;
      }
    };
    tty.on('data', onData);
  });
}

/** A yes/no question on a TTY (visible input); anything but y/yes, or end of input, is no. */
export async function askYesNo(stdin: NodeJS.ReadableStream, out: Writer, question: string): Promise<boolean> {
  const { createInterface } = await import('node:readline');
  out.write(`${question} [y/N] `);
  const rl = createInterface({ input: stdin, terminal: false });
  try {
    for await (const line of rl) return /^\s*y(es)?\s*$/i.test(line);
    return false;
  } finally {
    rl.close();
  }
}
