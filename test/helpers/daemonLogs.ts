/**
 * Each test daemon logs (level debug) to a file of its own, so a failure on a loaded CI machine can
 * be read afterwards: the root hook prints the end of the log of every daemon that was alive during
 * a failed test, and a daemon whose stop does not end prints its log too.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import type { Logger } from '../../src/core/ports.js';

/** Tests are numbered as they start (by the root hook); a daemon log notes the test it started and stopped in. */
interface DaemonLog {
  file: string;
  started: number;
  stopped: number | undefined;
}

let currentTest = 0;

/** Called by the root hook as each test starts; returns its number. */
export function testStarted(): number {
  return ++currentTest;
}

// Made at the first daemon's log, not at import: mocha's main process loads the root hooks too in a parallel run,
// and a process that starts no daemon leaves no folder behind.
let dir: string | undefined;
const logs: DaemonLog[] = [];
let seq = 0;

/** A logger writing to a new file; `done()` marks the daemon stopped. */
export function daemonLogger(): { logger: Logger; file: string; done: () => void } {
  dir ??= mkdtempSync(path.join(os.tmpdir(), 'farmhand-test-logs-'));
  const file = path.join(dir, `daemon-${++seq}.log`);
  const entry: DaemonLog = { file, started: currentTest, stopped: undefined };
  logs.push(entry);
  const logger = pino({ level: 'debug', base: undefined, timestamp: pino.stdTimeFunctions.isoTime }, pino.destination({ dest: file, sync: true, mkdir: true }));
  return { logger, file, done: () => (entry.stopped = currentTest) };
}

/** The last `lines` lines of a daemon log, for a failure message. */
export function logTail(file: string, lines = 60): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return '(no log)';
  }
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

/** Print the logs of the daemons alive during test number `test` (or started in a hook before it). */
export function printLogsOfTest(test: number, title: string): void {
  const alive = logs.filter((l) => l.stopped === undefined || l.stopped >= test);
  for (const l of alive) {
    process.stderr.write(`\n----- ${title}: end of ${path.basename(l.file)} -----\n${logTail(l.file)}\n----- end -----\n`);
  }
}

/** Forget stopped daemons' logs (files and entries); called after each passing test. */
export function dropStoppedLogs(): void {
  for (let i = logs.length - 1; i >= 0; i--) {
    const l = logs[i]!;
    if (l.stopped !== undefined) {
      rmSync(l.file, { force: true });
      logs.splice(i, 1);
    }
  }
}

/** Remove the folder at the end of the run. */
export function removeLogDir(): void {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
}
