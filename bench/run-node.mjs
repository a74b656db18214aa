// Shared by the bench scripts: run a Node script to completion with stdin, collecting its output.
import { spawn } from 'node:child_process';

export function runNode(args, input) {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (err += d));
    p.on('exit', (code) => resolve({ code, out, err }));
    p.stdin.end(input ?? '');
  });
}
