/**
 * The interfaces the domain talks to. Adapters in storage/, runner/ and
 * hardware/ implement them; daemon.ts wires concrete classes to them. Nothing
 * in core/ imports Koa, serialport, sharp, child_process or lowdb.
 */
import type { InfrastructureFault } from './infrastructure.js';
import type { ArtifactListing, JobRecord, ResultRecord, RunOutcome } from './model.js';
import type { ResultQuery } from './query.js';

// ---------------------------------------------------------------- logging

/** The subset of pino the code uses; tests pass a silent one. */
export interface Logger {
  debug(obj: object | string, msg?: string): void;
  info(obj: object | string, msg?: string): void;
  warn(obj: object | string, msg?: string): void;
  error(obj: object | string, msg?: string): void;
  child(bindings: Record<string, unknown>): Logger;
}

// ---------------------------------------------------------------- results

export interface ResultRepository {
  /** Create the folder of a run about to start; returns its absolute path. */
  createRunDir(resultId: string): Promise<string>;
  /** Absolute folder of a result id (no I/O, no check that it exists). */
  dirOf(resultId: string): string;
  /** Record a finished run: writes `result.json` into its folder, then indexes it. */
  add(record: ResultRecord): Promise<void>;
  /** A finished run; `'deleted'` once retention removed it; undefined if unknown or still running. */
  get(resultId: string): ResultRecord | 'deleted' | undefined;
  /** Filtered, sorted, capped at `q.limit`. */
  query(q: ResultQuery): ResultRecord[];
  /** Every regular file under the result folder, recursively, with size and md5. */
  artifacts(resultId: string): Promise<ArtifactListing>;
  /**
   * A file of the result folder by relative path, or undefined when there is
   * none - including any path that would leave the folder, by `..` or by a
   * symlink pointing outside it.
   */
  openArtifact(resultId: string, relPath: string): Promise<{ path: string; size: number; mtime: Date } | undefined>;
  /** Mean duration in seconds of the past runs of a test case; undefined when none. */
  meanDuration(testCase: string): number | undefined;
  /** Delete the oldest results past the configured count or free-space floor; returns their ids. */
  enforceRetention(): Promise<string[]>;
  /**
   * Write the metadata files and logs a run interrupted by the daemon's death
   * (or recorded as an infrastructure error) lacks, never replacing a log that
   * is there; `failure-reason` is replaced and `note` (default: the daemon
   * stopped) appended to an existing `farmhand.log`. Returns the names written.
   */
  sealInterrupted(resultId: string, run: { test_case: string; test_pack_sha: string; duration: number; failure_reason: string; note?: string }): Promise<string[]>;
  /**
   * The disk filled during a run and its record could not be written: delete
   * the run's own files to make room - its artifacts (`'artifacts'`), or also
   * its logs (`'logs'`); the metadata files stay. Returns what was deleted.
   */
  freeRunSpace(resultId: string, what: 'artifacts' | 'logs'): Promise<{ files: number; bytes: number }>;
  /**
   * After a crash, before runs start: index again a run of `keep` (the runs
   * in flight) whose record was written but whose index line was lost. The
   * rest a crash leaves (folders retention tombstoned, folders of runs never
   * recorded, temporary files) is swept in the background after start.
   */
  tidy(opts: { nodeId: string; keep: readonly string[] }): Promise<TidyReport>;
  /** Flush and close the index. */
  close(): Promise<void>;
}

/** What ResultRepository.tidy (or the background sweep after start) found and fixed. */
export interface TidyReport {
  /** Folders of deleted results still on disk. */
  orphans: number;
  /** Folders of runs that were never recorded. */
  unrecorded: number;
  /** Recorded runs missing from the index. */
  reindexed: number;
  /** Temporary files deleted. */
  temps: number;
}

// ---------------------------------------------------------------- jobs

export interface JobRepository {
  get(jobUid: string): JobRecord | undefined;
  /** The job with the highest number, running or not. */
  latest(): JobRecord | undefined;
  /**
   * Persist (atomically) the job's current state; `get`/`latest` answer it
   * from the call on. Saves of one job land in call order (the last one
   * wins); rejects after `close`.
   */
  save(job: JobRecord): Promise<void>;
  /** Resolves once every save made before the call has landed (or failed). */
  flush(): Promise<void>;
  /** Flush, then refuse further saves: nothing lands after the daemon stopped. */
  close(): Promise<void>;
  /** Allocate the next job number (persisted before it is returned). */
  nextNumber(): Promise<number>;
  /** Every job whose stored status is `running` (after a crash, these are stale). */
  running(): JobRecord[];
  /** The job `username` started with this `Idempotency-Key`, among the node's recent jobs (the store says how many). */
  findByKey(username: string, key: string): JobRecord | undefined;
}

// ---------------------------------------------------------------- test pack

export interface Revision {
  sha: string;
  /** Branch name when the revision named a branch (or HEAD: the default branch); else null. */
  branch: string | null;
}

/** INI file parsed to sections of string values: `config['test_pack']['default_remote_control']`. */
export type IniConfig = Record<string, Record<string, string>>;

export interface TestPack {
  /**
   * SHA (full/short), branch, tag, HEAD or any ref. Fetches once before `not_found`.
   * `fresh`: fetch first when the mirror is stale (run_tests, test-case listings);
   * without it, refs as last fetched (what pages and presses use: no fetch on their path).
   */
  resolve(revision: string, opts?: { fresh?: boolean }): Promise<Revision>;
  /** `tests/**\/*.py::test_*`, sorted. */
  testCaseNames(sha: string): Promise<string[]>;
  /** A cached checkout of the commit; returns its absolute path. */
  checkout(sha: string): Promise<string>;
  /** `config/farmhand.conf`, else `config/stbt.conf`, else `.stbt.conf`; `{}` when none. */
  config(sha: string): Promise<IniConfig>;
  /** Names `<n>` of `config/remote-control/<n>.lircd.conf`, in alphabetical order. */
  remoteControls(sha: string): Promise<string[]>;
  /** A file's text at a commit; undefined when absent. */
  readFile(sha: string, path: string): Promise<string | undefined>;
  /** Fetch all refs from the origin, in a fetch that starts after this call (what was pushed before it is mirrored). */
  fetch(): Promise<void>;
  /** Why the origin cannot be fetched now ("test pack unreachable, retrying: ..."); undefined when it can. */
  problem?(): string | undefined;
}

// ---------------------------------------------------------------- test runs

export interface TestRunSpec {
  /** The run's folder: working directory and artifact store. */
  resultDir: string;
  checkoutDir: string;
  testCase: string;
  testPackSha: string;
  /** The test pack's configuration plus `result.tags`. */
  config: IniConfig;
  timeoutSecs: number;
  /** Extra environment for the test process (the run's control socket). */
  env?: Record<string, string>;
  /** Called once the child exists, so a restart can find and end it. */
  onSpawn?: (pid: number) => void;
  /** The run's control channel: what the test does through it goes into the run's log. */
  control?: RunControlChannel;
  /** Faults of the node seen so far in this run; a run that did not pass becomes an infrastructure error. */
  faults?: () => InfrastructureFault[];
}

export interface TestRunner {
  /**
   * Run one test case in its own process group and write the run's files
   * (logs and metadata). Never rejects for a test's failure: crashes, timeouts
   * and aborts are an `error` outcome. Aborting the signal ends the process
   * group (TERM, then KILL after a grace period) and resolves once it is gone.
   */
  run(spec: TestRunSpec, signal: AbortSignal): Promise<RunOutcome>;
}

// ---------------------------------------------------------------- frames

export interface CaptureHealth {
  online: boolean;
  /** Why not online; null when online. */
  reason: string | null;
  /** Set while per-run video is not recorded though it is configured ("no video: disk full"); the node stays online. */
  video?: string;
}

export interface FrameSource {
  health(): CaptureHealth;
  /** Lossless PNG of the latest frame; FarmError `device_unavailable` when offline. */
  screenshotPng(): Promise<Buffer>;
  /** Small JPEG of the latest frame; FarmError `device_unavailable` when offline. */
  thumbnailJpeg(): Promise<Buffer>;
  /** Write `screenshot.png` and `thumbnail.jpg` into a folder; resolves false when offline. */
  saveScreenshot(dir: string): Promise<boolean>;
  /** A copy of the latest raw RGB frame for test scripts; undefined when offline or not capturing. */
  latestFrame?(): { data: Buffer; width: number; height: number; seq?: number; at?: number } | undefined;
  /**
   * How many times the picture was lost since start (ffmpeg ended or stalled,
   * or the picture froze) and why the last time: a run compares the count at
   * its start and end to tell that capture was lost while it ran. Absent: never lost.
   */
  losses?(): { count: number; reason: string | null };
  start(): Promise<void>;
  stop(): Promise<void>;
}

// ---------------------------------------------------------------- video

/** A clip of the continuous recording, from `begin` until `finish`. */
export interface VideoClip {
  /** Cut the clip and write it as `video.mp4` into the folder; false when there is no video to write. */
  finish(dir: string): Promise<boolean>;
  /** Give up the clip without writing it. */
  discard(): void;
}

export interface VideoRecorder {
  /** Start a clip now (the run is about to start). */
  begin(): VideoClip;
}

// ---------------------------------------------------------------- run control

/** What a test script may ask of the daemon while it runs (key presses, frames). */
export interface RunControl {
  /** Open the control channel of one run; its `env` goes to the test process. */
  open(run: { resultDir: string; testPackSha: string; remote: string | null }): Promise<RunControlChannel>;
}

export interface RunControlChannel {
  env: Record<string, string>;
  /** Lines saying what the test did (key presses, matches) go to `listener`; undefined stops them. */
  onEvent?(listener: ((text: string) => void) | undefined): void;
  /** The node's faults the channel saw (a key press the IR transport failed to send). */
  faults?(): InfrastructureFault[];
  close(): Promise<void>;
}
