// The process's streams behind an interface, so commands are tested without a process.
export interface Writer {
  write(chunk: string): unknown;
}

export interface Io {
  stdout: Writer;
  stderr: Writer;
  stdin: NodeJS.ReadableStream;
  stdoutIsTTY: boolean;
  stderrIsTTY: boolean;
  stdinIsTTY: boolean;
  /** Terminal width of stdout, when it is a terminal. */
  stdoutColumns?: number | undefined;
  /** The stream ora draws on (stderr); absent in tests. */
  progressStream?: NodeJS.WritableStream;
}

export function processIo(): Io {
  return {
    stdout: process.stdout,
    stderr: process.stderr,
    stdin: process.stdin,
    stdoutIsTTY: process.stdout.isTTY === true,
    stderrIsTTY: process.stderr.isTTY === true,
    stdinIsTTY: process.stdin.isTTY === true,
    stdoutColumns: process.stdout.isTTY ? process.stdout.columns : undefined,
    progressStream: process.stderr,
  };
}

/** Reads a whole stream as text (see decodeText). */
export async function readAll(stream: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(typeof c === 'string' ? Buffer.from(c) : (c as Buffer));
  return decodeText(Buffer.concat(chunks));
}

/**
 * UTF-8, or UTF-16 when the bytes start with its byte-order mark (a list saved by Windows PowerShell's `>` or
 * Notepad's "Unicode"), which read as UTF-8 would turn every line into an invalid IP.
 */
export function decodeText(buf: Buffer): string {
  if (buf[0] === 0xff && buf[1] === 0xfe) return buf.subarray(2).toString('utf16le');
  if (buf[0] === 0xfe && buf[1] === 0xff) {
    const le = Buffer.from(buf.subarray(2, buf.length - (buf.length % 2)));
    return le.swap16().toString('utf16le');
  }
  return buf.toString('utf8');
}
