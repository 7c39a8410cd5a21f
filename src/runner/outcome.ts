/**
 * From what happened to a test process to a RunOutcome. The child's own
 * report (written by `python -m farmhand.run`) decides pass/fail/error; the
 * runner's knowledge wins over it when the runner ended the process (timeout,
 * stop) or when there is no report (crash, `os._exit`).
 */
import { constants } from 'node:os';
import { infrastructureReason } from '../core/infrastructure.js';
import type { Outcome, RunOutcome } from '../core/model.js';
import { readRegular } from '../storage/safeFile.js';

export interface ChildReport {
  result: Outcome;
  failure_reason: string | null;
  traceback: string | null;
}

/** What the runner saw of the process. */
export interface ProcessEnd {
  /** Exit status (signals as 128+N); null when it never started. */
  exitStatus: number | null;
  /** Why the runner ended it, if it did. */
  endedBy: 'timeout' | 'stop' | null;
  /** Set when the interpreter could not be started. */
  spawnError?: Error;
}

export const STOPPED_REASON = 'Stopped: the job was stopped';
export const timeoutReason = (secs: number) => `Timeout: test ran longer than ${secs} s`;

/** A report is a result and a traceback: anything larger is not one. */
export const MAX_REPORT_BYTES = 4 * 1024 * 1024;

/**
 * The child's report, or undefined when it is missing or not a report. The
 * test knows the report's path, so it is read as a file the test may have
 * replaced: a regular file only, never through a FIFO or symlink, capped.
 */
export async function readReport(file: string): Promise<ChildReport | undefined> {
  let data: unknown;
  try {
    data = JSON.parse(await readRegular(file, MAX_REPORT_BYTES));
  } catch {
    return undefined;
  }
  const r = data as Partial<ChildReport> | null;
  const strOrNull = (v: unknown) => v === null || typeof v === 'string';
  if (!r || !['pass', 'fail', 'error'].includes(r.result as string) || !strOrNull(r.failure_reason) || !strOrNull(r.traceback)) return undefined;
  return { result: r.result as Outcome, failure_reason: r.failure_reason ?? null, traceback: r.traceback ?? null };
}

/** `exited with status 3`, `was killed by SIGSEGV (exit status 139)` */
export function describeExit(status: number | null): string {
  if (status === null) return 'did not start';
  if (status > 128) {
    const name = Object.entries(constants.signals).find(([, n]) => n === status - 128)?.[0];
    if (name) return `was killed by ${name} (exit status ${status})`;
  }
  return `exited with status ${status}`;
}

export function decideOutcome(end: ProcessEnd, report: ChildReport | undefined, timeoutSecs: number, python: string): RunOutcome {
  const exit_status = end.exitStatus;
  if (end.spawnError) {
    // The node's interpreter is missing or broken: no script ever ran.
    const reason = infrastructureReason('runner_timeout', `could not start ${python}: ${end.spawnError.message}`);
    return { result: 'error', failure_reason: reason, traceback: null, exit_status };
  }
  // After a stop or timeout the report (if any) still shows where the test was: keep its traceback.
  if (end.endedBy === 'timeout') return { result: 'error', failure_reason: timeoutReason(timeoutSecs), traceback: report?.traceback ?? null, exit_status };
  if (end.endedBy === 'stop') return { result: 'error', failure_reason: STOPPED_REASON, traceback: report?.traceback ?? null, exit_status };
  if (report) {
    const passed = report.result === 'pass';
    return { result: report.result, failure_reason: passed ? null : report.failure_reason, traceback: passed ? null : report.traceback, exit_status };
  }
  return {
    result: 'error',
    failure_reason: `Crash: the test process ${describeExit(exit_status)} without reporting a result`,
    traceback: null,
    exit_status,
  };
}
