/** The data the domain talks about: jobs, results, artifacts. Plain objects, JSON-safe. */
import type { InfrastructureKind } from './infrastructure.js';

export type Outcome = 'pass' | 'fail' | 'error';
export type Soak = 'run once' | 'run forever';

export interface ResultCounts {
  pass: number;
  fail: number;
  error: number;
  total: number;
}

/** A job as stored. Presenters turn it into the v1/v2 Job object. */
export interface JobRecord {
  /** `/<node_id>/<hex>/<number>` */
  job_uid: string;
  /** The number part of job_uid; also v1's deprecated `job_id`. */
  number: number;
  status: 'running' | 'exited';
  start_time: string; // ISO 8601, UTC
  end_time: string | null;
  result_counts: ResultCounts;
  test_cases: string[];
  test_pack_revision: string; // as the client sent it
  test_pack_sha: string;
  test_pack_branch: string | null;
  category: string;
  soak: Soak;
  shuffle: boolean;
  remote_control: string | null;
  tags: Record<string, string>;
  username: string;
  /**
   * The `Idempotency-Key` it was started with (v2 run_tests; the queue's starts send one): the same key from the same
   * user answers this job instead of starting another (core/jobs.ts `startedWithKey`). Absent: none was sent.
   */
  idempotency_key?: string;
  /** The run in flight, kept so a restart can close it as an error. */
  current_run: { result_id: string; test_case: string; start_time: string; pid: number | null } | null;
}

/**
 * One completed test run. Written as `result.json` in the run's folder and
 * kept in the results index. `start_time`/`end_time` are ISO 8601 UTC with
 * milliseconds (`2026-11-23T09:19:15.123Z`).
 */
export interface ResultRecord {
  result_id: string; // `<job_uid>/<YYYY-MM-DD>_<hh.mm.ss>`
  job_uid: string;
  test_case: string; // `tests/path/file.py::test_name`
  test_pack_sha: string;
  test_pack_branch: string | null;
  category: string;
  username: string;
  tags: Record<string, string>;
  start_time: string;
  end_time: string;
  /** Seconds, end_time - start_time. */
  duration: number;
  result: Outcome;
  failure_reason: string | null;
  traceback: string | null;
  /**
   * The node's fault that made this run an error (docs/health-checks.md); null
   * when the script decided the outcome. Records stored before the field
   * existed lack it: readers take `kindOfRecord` (core/infrastructure.ts).
   */
  infrastructure_error?: InfrastructureKind | null;
}

/** The fields of a record that the spec's Result summary (a results list's row) shows. */
export type ResultSummaryFields = Pick<ResultRecord, 'result_id' | 'job_uid' | 'start_time' | 'end_time' | 'test_case' | 'test_pack_sha' | 'result' | 'failure_reason'>;

/** Artifact listing: relative path -> size in bytes and md5 hex digest. */
export type ArtifactListing = Record<string, { size: number; md5: string }>;

/** What a test run produced, as the runner reports it. */
export interface RunOutcome {
  result: Outcome;
  failure_reason: string | null;
  traceback: string | null;
  /** Process exit status; signals as 128+N; null if it never started. */
  exit_status: number | null;
}
