import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.js';

export type { Logger };

/**
 * Where log lines go: stderr, and, when stderr is a pipe whose reader went away (a detached
 * group's supervisor that was killed: it writes the group's log file), the log file descriptor the
 * launcher left the process (VCON_LOG_FALLBACK_FD), so the group keeps logging to its file. The
 * lines buffered when the pipe broke are lost.
 */
function stderrDestination(fallbackFd: number | undefined): DestinationStream {
  const primary = pino.destination({ fd: 2, sync: false });
  if (fallbackFd === undefined) return primary;
  let current = primary;
  primary.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE' && current === primary) current = pino.destination({ fd: fallbackFd, sync: false });
  });
  return {
    write: (line: string) => current.write(line),
    flush: (cb?: (err?: Error) => void) => current.flush(cb),
    flushSync: () => current.flushSync(),
  } as DestinationStream;
}

/**
 * The root logger of one instance: pino JSON, every line tagged with the instance label and schema.
 * In stdio mode stdout carries the MCP protocol, so logs go to stderr (fd 2) there; always stderr
 * is simplest and keeps the launcher's prefixing uniform.
 */
export function createLogger(
  config: Pick<Config, 'logLevel' | 'label' | 'db'> & Partial<Pick<Config, 'logs'>>,
  destination: number | DestinationStream = 2,
): Logger {
  return pino(
    {
      level: config.logLevel,
      base: { pid: process.pid, instance: config.label, schema: config.db.schema },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: {
        paths: [
          'req.headers.authorization',
          'req.headers["x-api-key"]',
          'req.headers.cookie',
          'headers.authorization',
          'headers["x-api-key"]',
          '*.apiKey',
          '*.password',
        ],
        censor: '[redacted]',
      },
    },
    destination === 2
      ? stderrDestination(config.logs?.fallbackFd)
      : typeof destination === 'number'
        ? pino.destination({ fd: destination, sync: false })
        : destination,
  );
}
