// Stage tcp: open a TCP connection to the proxy.
import { connect } from 'node:net';
import { formatHostPort } from '../../rules/host-port.js';
import { describeNetError, fail, ok, type StageFn } from './stage.js';

export const tcpStage: StageFn = (ctx, signal) =>
  new Promise((resolve) => {
    const addr = ctx.proxyAddress!;
    const shown = formatHostPort(addr.address, ctx.proxy.port);
    const socket = connect({ host: addr.address, port: ctx.proxy.port, family: addr.family, noDelay: true });
    ctx.sockets.add(socket);
    signal.addEventListener('abort', () => socket.destroy(), { once: true });
    socket.once('connect', () => {
      socket.removeAllListeners('error');
      socket.on('error', () => {}); // later stages attach their own handlers
      ctx.socket = socket;
      resolve(ok(`connected to ${shown} from ${socket.localAddress}:${socket.localPort}`));
    });
    socket.once('error', (err: NodeJS.ErrnoException) => {
      resolve(fail(`${shown}: ${describeNetError(err)}`, { kind: 'tcp', code: err.code ?? 'ERROR' }));
    });
  });
