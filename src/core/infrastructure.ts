/**
 * Infrastructure errors: runs that ended in `error` because of the node (its
 * capture, its IR blaster, its disk, the daemon itself), not because of the
 * script or the product under test. Such a run's failure reason starts with
 * `InfrastructureError: <kind>: ` and its record carries `infrastructure_error:
 * <kind>`. The kinds, what each means and where it is detected are in
 * docs/health-checks.md.
 */
import type { Outcome, ResultRecord, RunOutcome } from './model.js';

export const INFRASTRUCTURE_KINDS = ['capture_lost', 'ir_transport', 'daemon_restart', 'disk_full', 'checkout_failed', 'runner_timeout'] as const;

export type InfrastructureKind = (typeof INFRASTRUCTURE_KINDS)[number];

/** What every infrastructure failure reason starts with. */
export const INFRASTRUCTURE_PREFIX = 'InfrastructureError: ';

const KINDS = new Set<string>(INFRASTRUCTURE_KINDS);
const REASON = /^InfrastructureError: ([a-z_]+): /;

/** `InfrastructureError: <kind>: <detail>` */
export function infrastructureReason(kind: InfrastructureKind, detail: string): string {
  return `${INFRASTRUCTURE_PREFIX}${kind}: ${detail}`;
}

/** The kind a failure reason names, or null when it is not an infrastructure error (or names an unknown kind). */
export function infrastructureKindOf(reason: string | null | undefined): InfrastructureKind | null {
  const m = REASON.exec(reason ?? '');
  return m && KINDS.has(m[1]!) ? (m[1] as InfrastructureKind) : null;
}

/** The record's kind: its field when set, else what its reason says (records stored before the field existed). */
export function kindOfRecord(r: Pick<ResultRecord, 'failure_reason' | 'infrastructure_error'>): InfrastructureKind | null {
  const stored = r.infrastructure_error;
  if (stored === null || (typeof stored === 'string' && KINDS.has(stored))) return stored;
  return infrastructureKindOf(r.failure_reason);
}

/** A fault of the node seen while a run was in progress. */
export interface InfrastructureFault {
  kind: InfrastructureKind;
  /** What happened, for a person ("capture lost during the run: ffmpeg was killed by SIGKILL"). */
  detail: string;
}

/** `pass`, or `fail: AssertionError: ...`: the test's own outcome, kept in the reason of the error that replaces it. */
export function describeOutcome(o: { result: Outcome; failure_reason: string | null }): string {
  return o.result === 'pass' ? 'pass' : `${o.result}: ${o.failure_reason ?? ''}`;
}

/**
 * A run that did not pass while the node had a fault is an infrastructure
 * error: the fault, not the script, is the likely cause (a test that cannot
 * see the picture or press a key fails or errors). A pass stands: the fault
 * did not stop the test. An outcome that is already an infrastructure error
 * keeps its own kind.
 */
export function classifyOutcome(o: RunOutcome, faults: readonly InfrastructureFault[]): RunOutcome {
  const [fault] = faults;
  if (!fault || o.result === 'pass' || infrastructureKindOf(o.failure_reason) !== null) return o;
  const reason = infrastructureReason(fault.kind, `${fault.detail} (the test's own outcome was ${describeOutcome(o)})`);
  return { ...o, result: 'error', failure_reason: reason };
}
