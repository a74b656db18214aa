// The bench target's commands (bench/gateway.mjs --role target): U<len64> read len bytes and answer
// "K"; D<len64> send len bytes and end; E echo.
export function len64(cmd, n) {
  const b = Buffer.alloc(9);
  b.write(cmd, 0, 'latin1');
  b.writeBigUInt64BE(BigInt(n), 1);
  return b;
}
