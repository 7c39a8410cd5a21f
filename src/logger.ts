/** pino to stdout (journald keeps time and rotation); tests use `silentLogger`. */
import { pino } from 'pino';
import type { Logger } from './core/ports.js';

export function createLogger(level: string): Logger {
  return pino({ level, base: undefined, timestamp: pino.stdTimeFunctions.isoTime });
}

export const silentLogger: Logger = pino({ level: 'silent' });
