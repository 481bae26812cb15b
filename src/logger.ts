import { pino, type DestinationStream, type Logger } from 'pino';
import type { Config } from './config.js';

export type { Logger };

/**
 * The root logger of one instance: pino JSON, every line tagged with the instance label and schema.
 * In stdio mode stdout carries the MCP protocol, so logs go to stderr (fd 2) there; always stderr
 * is simplest and keeps the launcher's prefixing uniform.
 */
export function createLogger(config: Pick<Config, 'logLevel' | 'label' | 'db'>, destination: number | DestinationStream = 2): Logger {
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
    typeof destination === 'number' ? pino.destination({ fd: destination, sync: false }) : destination,
  );
}
