// The daemon's one logger: JSON lines on stderr, created once per process (run.ts) and handed to Fastify,
// the gateway, the rate-limit store and the start-up code alike.
import { pino, type Logger } from 'pino';

export type DaemonLog = Logger;

const LOG_SERIALIZERS = {
  // Never the URL: the query string can carry api_key (or an API key sent there by mistake).
  req: (req: { method?: string; routeOptions?: { url?: string } }) => ({
    method: req.method,
    route: req.routeOptions?.url,
  }),
  res: (res: { statusCode?: number }) => ({ status: res.statusCode }),
};

export function createLogger(level: string): DaemonLog {
  return pino(
    {
      level,
      serializers: LOG_SERIALIZERS,
      // Belt and braces: these keys never reach a log line even if someone logs them.
      redact: {
        paths: [
          'api_key',
          '*.api_key',
          'token',
          '*.token',
          'password',
          '*.password',
          'secret',
          '*.secret',
          'authorization',
          '*.authorization',
          '*["proxy-authorization"]',
          '*["x-api-key"]',
        ],
        censor: '[redacted]',
      },
    },
    process.stderr,
  );
}
