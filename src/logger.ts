/** pino to stdout (journald keeps time and rotation); tests use `silentLogger`. */
import { pino } from 'pino';
import type { Logger } from './core/ports.js';

export function createLogger(level: string): Logger {
  return pino({ level, base: undefined, timestamp: pino.stdTimeFunctions.isoTime });
}

const noop = (): void => undefined;

/** A Logger that drops everything: the default when a caller passes none, and what tests pass. */
export const silentLogger: Logger = { debug: noop, info: noop, warn: noop, error: noop, child: () => silentLogger };
