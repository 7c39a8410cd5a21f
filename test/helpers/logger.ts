/** A real pino Logger whose output the test can read, parsed per entry or as raw text. */
import { pino } from 'pino';
import type { Logger } from '../../src/core/ports.js';

/** One log line: its level name, message, and every other field (child bindings included). */
export interface LogEntry {
  level: string;
  msg: string;
  obj: Record<string, unknown>;
}

export type CapturingLogger = Logger & {
  /** Every entry so far, parsed, in order. */
  readonly entries: LogEntry[];
  /** The messages so far, in order. */
  messages(): string[];
  /** Everything written, as pino wrote it (to check that nothing secret was logged, however serialised). */
  text(): string;
};

export function capturingLogger(): CapturingLogger {
  const raw: string[] = [];
  const log = pino(
    { level: 'trace', base: undefined, timestamp: false, formatters: { level: (label) => ({ level: label }) } },
    { write: (line: string) => void raw.push(line) },
  );
  const parse = (line: string): LogEntry => {
    const { level, msg, ...obj } = JSON.parse(line) as Record<string, unknown>;
    return { level: String(level), msg: typeof msg === 'string' ? msg : '', obj };
  };
  return {
    debug: (o, m) => log.debug(o, m),
    info: (o, m) => log.info(o, m),
    warn: (o, m) => log.warn(o, m),
    error: (o, m) => log.error(o, m),
    child: (b) => log.child(b),
    get entries() {
      return raw.join('').split('\n').filter(Boolean).map(parse);
    },
    messages() {
      return this.entries.map((e) => e.msg);
    },
    text: () => raw.join(''),
  };
}
