/**
 * Jobs: run_tests, the one-job-at-a-time loop, stop, and recovery after a
 * crash. A job is data (JobRepository) plus, while it runs, an in-memory loop
 * that runs its test cases one after another through the TestRunner.
 */
import { FarmError, invalid } from './errors.js';
import { jobExited, jobStarted, runFinished, type EventSink } from './events.js';
import { formatJobUid, formatResultId, runStamp } from './ids.js';
import { classifyOutcome, describeOutcome, infrastructureKindOf, infrastructureReason, type InfrastructureFault } from './infrastructure.js';
import type { JobRecord, ResultRecord, RunOutcome } from './model.js';
import { chooseRemote, type RemoteRule } from './remoteControl.js';
import type { FrameSource, IniConfig, JobRepository, Logger, ResultRepository, RunControl, TestPack, TestRunner, VideoRecorder } from './ports.js';
import type { RunRequest } from './runRequest.js';
import { schedule, speedWeights, type Rng } from './shuffle.js';

export interface JobServiceDeps {
  nodeId: string;
  /** 4 hex digits chosen once per installation. */
  installationHex: string;
  jobs: JobRepository;
  results: ResultRepository;
  testPack: TestPack;
  runner: TestRunner;
  frames: FrameSource;
  /** Per-run video; absent when the capture does not record. */
  video?: VideoRecorder;
  /** The control channel test scripts use for key presses and frames; absent: none. */
  control?: RunControl;
  logger: Logger;
  /** Where job and run events go (docs/events.md); absent: nowhere. */
  events?: EventSink;
  settings: { defaultTimeoutSecs: number; stopResponseSecs: number };
  now?: () => Date;
  rng?: Rng;
  /** Told of every run recorded (the health check counts infrastructure errors in a row). */
  onRecorded?: (record: ResultRecord) => void;
}

interface ActiveJob {
  record: JobRecord;
  abort: AbortController;
  done: Promise<void>;
  /** What the job loop is doing now (logged at debug as it changes; named when a stop does not end). */
  step: string;
}

export const DAEMON_RESTARTED = infrastructureReason('daemon_restart', 'farmhand restarted while this test was running');
/** The start of the failure reason of a run recorded as an error because the data disk was full. */
export const DISK_FULL = 'InfrastructureError: disk_full';

export class JobService {
  private active: ActiveJob | undefined;
  private starting = false;
  /** The start under way and the `username\nkey` of its Idempotency-Key, if it has one. */
  private startingKey: { key: string; job: Promise<JobRecord> } | undefined;
  private readonly ended = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  private readonly now: () => Date;
  private readonly rng: Rng;

  constructor(private readonly d: JobServiceDeps) {
    this.now = d.now ?? (() => new Date());
    this.rng = d.rng ?? Math.random;
  }

  /**
   * After a crash: a job stored as running is exited, and its in-flight run
   * becomes an `error` result saying the daemon restarted. Returns the pids of
   * test processes that may still be alive, so the caller can end them.
   */
  async recover(): Promise<number[]> {
    const pids: number[] = [];
    const running = this.d.jobs.running();
    // First: a run killed between writing its result.json and its index line is indexed again, so it is not
    // taken for in flight. (The rest a crash leaves in the results is swept in the background after start.)
    const inFlight = running.flatMap((j) => (j.current_run ? [j.current_run.result_id] : []));
    await this.d.results.tidy({ nodeId: this.d.nodeId, keep: inFlight });
    for (const job of running) {
      const run = job.current_run;
      const end = this.now();
      if (run) {
        if (run.pid) pids.push(run.pid);
        const recorded = this.d.results.get(run.result_id);
        // The job file is saved once the run is recorded and counted: still naming the run, it has not counted it.
        if (recorded !== undefined && recorded !== 'deleted') {
          job.result_counts[recorded.result]++;
          // Killed between the run's record and the job file's save, so before its run.finished (published after
          // that save): published now, or the portal would never get the run (docs/farm.md, "The node stream").
          this.publishRunFinished(run.result_id);
        }
        if (recorded === undefined) {
          await this.d.results.createRunDir(run.result_id);
          // Its metadata files and logs first, so once recorded it has the files of every other run.
          await this.d.results.sealInterrupted(run.result_id, {
            test_case: run.test_case,
            test_pack_sha: job.test_pack_sha,
            duration: Math.max(0, (end.getTime() - new Date(run.start_time).getTime()) / 1000),
            failure_reason: DAEMON_RESTARTED,
          });
          await this.record(job, run.result_id, run.test_case, new Date(run.start_time), end, {
            result: 'error',
            failure_reason: DAEMON_RESTARTED,
            traceback: null,
            exit_status: null,
          });
          job.result_counts.error++;
          this.publishRunFinished(run.result_id);
        }
      }
      job.current_run = null;
      job.status = 'exited';
      job.end_time = end.toISOString();
      await this.d.jobs.save(job);
      this.d.events?.publish('job.exited', jobExited(job));
      this.d.logger.warn({ job: job.job_uid }, 'job was running when the daemon stopped; marked exited');
    }
    return pids;
  }

  get(jobUid: string): JobRecord | undefined {
    if (this.active?.record.job_uid === jobUid) return this.active.record;
    return this.d.jobs.get(jobUid);
  }

  /** The running job, or the last one; undefined if the node never ran one. */
  current(): JobRecord | undefined {
    return this.active?.record ?? this.d.jobs.latest();
  }

  isRunning(): boolean {
    return this.active !== undefined || this.starting;
  }

  /**
   * The job `username` started with this Idempotency-Key: stored (running or ended), or the start under way (its
   * outcome, an error included); undefined when the key is new, so a start with it may go ahead.
   */
  startedWithKey(username: string, key: string): Promise<JobRecord> | undefined {
    if (this.startingKey?.key === `${username}\n${key}`) return this.startingKey.job;
    const found = this.active?.record.idempotency_key === key && this.active.record.username === username ? this.active.record : this.d.jobs.findByKey(username, key);
    return found ? Promise.resolve(found) : undefined;
  }

  /**
   * Validate against the test pack, then start the job; resolves once it is
   * running. Whether the node may be used (licence, reservation, online) is
   * NodePolicy's call; the busy check stays here too because it guards the
   * one-job-at-a-time loop itself. `key`: the request's Idempotency-Key, kept
   * with the job (startedWithKey).
   */
  async runTests(req: RunRequest, username: string, remoteRule: RemoteRule = 'v1', key?: string): Promise<JobRecord> {
    if (this.isRunning()) {
      throw new FarmError('conflict', `a test job is already running (${this.active?.record.job_uid ?? 'starting'}); stop it or wait for it to end`);
    }
    this.starting = true;
    const job = this.start(req, username, remoteRule, key);
    if (key !== undefined) this.startingKey = { key: `${username}\n${key}`, job };
    try {
      return await job;
    } finally {
      this.starting = false;
      this.startingKey = undefined;
    }
  }

  private async start(req: RunRequest, username: string, remoteRule: RemoteRule, key: string | undefined): Promise<JobRecord> {
    // Each step's end in ms since the start began, logged at debug once the job runs (what a slow answer was made of).
    const began = performance.now();
    const took: Record<string, number> = {};
    const mark = (step: string) => (took[step] = Math.round(performance.now() - began));
    const rev = await this.d.testPack.resolve(req.test_pack_revision, { fresh: true });
    mark('resolved_ms');
    const known = new Set(await this.d.testPack.testCaseNames(rev.sha));
    mark('listed_ms');
    const missing = req.test_cases.filter((t) => !known.has(t));
    if (missing.length) {
      throw invalid(`test case(s) not found at ${rev.sha.slice(0, 10)}: ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', ...' : ''}`);
    }
    const config = await this.d.testPack.config(rev.sha);
    const remote = await chooseRemote(this.d.testPack, rev.sha, req.remote_control, remoteRule);
    mark('configured_ms');
    const number = await this.d.jobs.nextNumber();
    mark('numbered_ms');
    const record: JobRecord = {
      job_uid: formatJobUid({ nodeId: this.d.nodeId, hex: this.d.installationHex, number }),
      number,
      status: 'running',
      start_time: this.now().toISOString(),
      end_time: null,
      result_counts: { pass: 0, fail: 0, error: 0, total: req.soak === 'run once' ? req.test_cases.length : 0 },
      test_cases: req.test_cases,
      test_pack_revision: req.test_pack_revision,
      test_pack_sha: rev.sha,
      test_pack_branch: rev.branch,
      category: req.category,
      soak: req.soak,
      shuffle: req.shuffle,
      remote_control: remote,
      tags: req.tags,
      username,
      ...(key !== undefined && { idempotency_key: key }),
      current_run: null,
    };
    await this.d.jobs.save(record);
    mark('saved_ms');
    this.d.logger.debug({ job: record.job_uid, ...took }, 'job: started');
    const abort = new AbortController();
    const active: ActiveJob = { record, abort, done: Promise.resolve(), step: 'starting' };
    this.active = active;
    this.d.events?.publish('job.started', jobStarted(record));
    active.done = this.loop(active, config).catch((e: unknown) => {
      this.d.logger.error({ err: e, job: record.job_uid }, 'job loop failed');
    });
    return record;
  }

  /**
   * Stop a job. Resolves `stopped: true` once it has stopped (or had already
   * exited), `false` when it is still stopping after the configured bound.
   */
  async stop(jobUid: string): Promise<{ job: JobRecord; stopped: boolean }> {
    const active = this.active;
    if (!active || active.record.job_uid !== jobUid) {
      const job = this.d.jobs.get(jobUid);
      if (!job) throw new FarmError('not_found', `no job ${jobUid}`);
      return { job, stopped: true };
    }
    active.abort.abort();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((res) => {
      timer = setTimeout(() => res('timeout'), this.d.settings.stopResponseSecs * 1000);
    });
    const outcome = await Promise.race([active.done.then(() => 'done' as const), timeout]);
    clearTimeout(timer);
    return { job: active.record, stopped: outcome === 'done' };
  }

  /** Resolves when the job is exited (at once if it already is). */
  whenEnded(jobUid: string): Promise<void> {
    if (this.active?.record.job_uid !== jobUid) return Promise.resolve();
    let e = this.ended.get(jobUid);
    if (!e) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      e = { promise, resolve };
      this.ended.set(jobUid, e);
    }
    return e.promise;
  }

  /**
   * Stop whatever runs and wait for it, and for every job save to land (daemon shutdown); false when
   * the job had not ended within `boundMs` (it is left behind, logged).
   */
  async shutdown(boundMs?: number): Promise<boolean> {
    const active = this.active;
    if (active) {
      active.abort.abort();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<'late'>((resolve) => {
        if (boundMs !== undefined) timer = setTimeout(() => resolve('late'), boundMs);
      });
      const outcome = await Promise.race([active.done.then(() => 'done' as const), late]);
      clearTimeout(timer);
      if (outcome === 'late') {
        // Never a stop that hangs for ever: the daemon stops without the job, and the next start
        // records its run as interrupted (daemon_restart), as after a crash.
        this.d.logger.error(
          { job: active.record.job_uid, stuck_at: active.step, bound_ms: boundMs },
          'the job did not end after the stop; stopping without it (the next start records its run as interrupted)',
        );
        return false;
      }
    }
    // The job may have ended just before: its last save can still be on its way to disk.
    await this.d.jobs.flush();
    return true;
  }

  private step(active: ActiveJob, what: string, fields: Record<string, unknown>): void {
    active.step = what;
    this.d.logger.debug(fields, `job: ${what}`);
  }

  private async loop(active: ActiveJob, config: IniConfig): Promise<void> {
    const job = active.record;
    try {
      const weights = speedWeights(job.test_cases.map((t) => this.d.results.meanDuration(t)));
      const order = schedule(job.test_cases, { forever: job.soak === 'run forever', shuffle: job.shuffle, weights, rng: this.rng });
      const timeoutSecs = Number(config.test_pack?.test_timeout_secs) || this.d.settings.defaultTimeoutSecs;
      const runConfig: IniConfig = { ...config, 'result.tags': job.tags };
      this.step(active, 'checking out the test pack', { job: job.job_uid, sha: job.test_pack_sha });
      const checkout = await this.d.testPack.checkout(job.test_pack_sha).catch((e: unknown) => e as Error);
      let lastStamp = '';
      for (const testCase of order) {
        if (active.abort.signal.aborted) break;
        const start = await this.distinctStart(lastStamp, active.abort.signal);
        if (!start) break;
        lastStamp = runStamp(start);
        if (typeof checkout !== 'string') {
          // No working tree to run in: every test case of the job is the node's error, once (a soak ends here).
          await this.recordCheckoutFailure(active, testCase, start, checkout);
          if (job.soak === 'run forever') break;
          continue;
        }
        await this.runOne(active, testCase, start, { checkoutDir: checkout, timeoutSecs, runConfig });
      }
    } finally {
      job.status = 'exited';
      job.end_time = this.now().toISOString();
      job.current_run = null;
      // The repository holds the exited job from this call on; waiters need not wait for the disk.
      const saved = this.d.jobs.save(job).catch((e: unknown) => this.d.logger.error({ err: e }, 'could not save job'));
      this.active = undefined;
      this.d.events?.publish('job.exited', jobExited(job));
      this.ended.get(job.job_uid)?.resolve();
      this.ended.delete(job.job_uid);
      await saved;
    }
  }

  private async runOne(
    active: ActiveJob,
    testCase: string,
    start: Date,
    ctx: { checkoutDir: string; timeoutSecs: number; runConfig: IniConfig },
  ): Promise<void> {
    const job = active.record;
    const resultId = formatResultId(job.job_uid, start);
    this.step(active, 'creating the run folder', { job: job.job_uid, result: resultId, test: testCase });
    const resultDir = await this.d.results.createRunDir(resultId);
    job.current_run = { result_id: resultId, test_case: testCase, start_time: start.toISOString(), pid: null };
    if (job.soak === 'run forever') job.result_counts.total++;
    await this.d.jobs.save(job);
    this.d.events?.publish('run.started', { job_uid: job.job_uid, result_id: resultId, test_case: testCase, start_time: start.toISOString() });
    const control = await this.d.control?.open({ resultDir, testPackSha: job.test_pack_sha, remote: job.remote_control });
    const clip = this.d.video?.begin();
    const faults = this.faultWatch(control);
    const spec = {
      resultDir,
      env: control?.env,
      control,
      checkoutDir: ctx.checkoutDir,
      testCase,
      testPackSha: job.test_pack_sha,
      config: ctx.runConfig,
      timeoutSecs: ctx.timeoutSecs,
      faults,
      onSpawn: (pid: number) => {
        job.current_run = { ...job.current_run!, pid };
        void this.d.jobs.save(job).catch(() => undefined);
      },
    };
    this.step(active, 'running the test', { result: resultId });
    // The runner classifies with the faults it saw; what it could not see yet (or a runner that does not) is caught here.
    const outcome = classifyOutcome(await this.d.runner.run(spec, active.abort.signal).finally(() => control?.close()), faults());
    this.step(active, 'saving the screenshot and video', { result: resultId, result_of_run: outcome.result });
    await Promise.all([
      this.d.frames.saveScreenshot(resultDir).catch((e: unknown) => {
        this.d.logger.warn({ err: e, result: resultId }, 'could not save the end-of-run screenshot');
      }),
      clip?.finish(resultDir).catch((e: unknown) => {
        this.d.logger.warn({ err: e, result: resultId }, 'could not save the video of the run');
      }),
    ]);
    this.step(active, 'recording the result', { result: resultId });
    const recorded = await this.record(job, resultId, testCase, start, this.now(), outcome);
    job.result_counts[recorded.result]++;
    job.current_run = null;
    await this.d.jobs.save(job);
    this.publishRunFinished(resultId);
    this.step(active, 'retention', { result: resultId });
    await this.d.results.enforceRetention().catch((e: unknown) => this.d.logger.error({ err: e }, 'retention failed'));
  }

  /**
   * Record a run. When the disk is full the run is still recorded: its own
   * artifacts (then, if need be, its logs) are deleted to make room, and it
   * becomes an error whose reason starts with DISK_FULL. Returns the outcome recorded.
   */
  private async record(job: JobRecord, resultId: string, testCase: string, start: Date, end: Date, o: RunOutcome): Promise<RunOutcome> {
    let outcome = o;
    for (const what of ['artifacts', 'logs'] as const) {
      try {
        await this.addRecord(this.resultRecord(job, resultId, testCase, start, end, outcome));
        return outcome;
      } catch (e) {
        if (!(e instanceof FarmError && e.code === 'storage_full')) throw e;
        const freed = await this.d.results.freeRunSpace(resultId, what);
        const was = describeOutcome(o);
        const reason = `${DISK_FULL}: the data disk filled up during this run; its ${what} (${freed.files} files, ${freed.bytes} bytes) were deleted to record it (the test's own outcome was ${was})`;
        outcome = { result: 'error', failure_reason: reason, traceback: o.traceback, exit_status: o.exit_status };
        const duration = Math.max(0, (end.getTime() - start.getTime()) / 1000);
        await this.d.results.sealInterrupted(resultId, { test_case: testCase, test_pack_sha: job.test_pack_sha, duration, failure_reason: reason, note: `farmhand: ${reason}` }).catch(() => []);
        this.d.logger.error({ result: resultId, freed }, 'data disk full: recorded the run as an infrastructure error');
      }
    }
    await this.addRecord(this.resultRecord(job, resultId, testCase, start, end, outcome));
    return outcome;
  }

  private async addRecord(record: ResultRecord): Promise<void> {
    await this.d.results.add(record);
    try {
      this.d.onRecorded?.(record);
    } catch (e) {
      this.d.logger.error({ err: e }, 'a listener of recorded runs failed');
    }
  }

  /** The node's faults seen since now: capture lost (its loss count moved) and what the control channel saw. */
  private faultWatch(control: { faults?(): InfrastructureFault[] } | undefined): () => InfrastructureFault[] {
    const lostAtStart = this.d.frames.losses?.().count ?? 0;
    return () => {
      const lost = this.d.frames.losses?.();
      const capture: InfrastructureFault[] =
        lost && lost.count > lostAtStart ? [{ kind: 'capture_lost', detail: `capture lost during the run: ${lost.reason ?? 'unknown reason'}` }] : [];
      return [...capture, ...(control?.faults?.() ?? [])];
    };
  }

  /** A test case that could not run because the test pack's commit could not be checked out. */
  private async recordCheckoutFailure(active: ActiveJob, testCase: string, start: Date, e: Error): Promise<void> {
    const job = active.record;
    const resultId = formatResultId(job.job_uid, start);
    if (job.soak === 'run forever') job.result_counts.total++;
    const reason = infrastructureReason('checkout_failed', `could not check out the test pack at ${job.test_pack_sha.slice(0, 10)}: ${e.message}`);
    this.d.logger.error({ err: e, result: resultId }, 'test-pack checkout failed: recorded the run as an infrastructure error');
    await this.d.results.createRunDir(resultId);
    await this.d.results
      .sealInterrupted(resultId, { test_case: testCase, test_pack_sha: job.test_pack_sha, duration: 0, failure_reason: reason, note: `farmhand: the test did not run; ${reason}` })
      .catch((err: unknown) => this.d.logger.warn({ err, result: resultId }, 'could not write the files of a run that did not start'));
    const recorded = await this.record(job, resultId, testCase, start, start, { result: 'error', failure_reason: reason, traceback: null, exit_status: null });
    job.result_counts[recorded.result]++;
    await this.d.jobs.save(job);
    // A run the node recorded: its run.finished (with the record) reaches the portal like any other's.
    this.publishRunFinished(resultId);
  }

  private resultRecord(job: JobRecord, resultId: string, testCase: string, start: Date, end: Date, o: RunOutcome): ResultRecord {
    return {
      result_id: resultId,
      job_uid: job.job_uid,
      test_case: testCase,
      test_pack_sha: job.test_pack_sha,
      test_pack_branch: job.test_pack_branch,
      category: job.category,
      username: job.username,
      tags: job.tags,
      start_time: start.toISOString(),
      end_time: end.toISOString(),
      duration: Math.max(0, (end.getTime() - start.getTime()) / 1000),
      result: o.result,
      failure_reason: o.result === 'pass' ? null : o.failure_reason,
      traceback: o.result === 'pass' ? null : o.traceback,
      infrastructure_error: o.result === 'error' ? infrastructureKindOf(o.failure_reason) : null,
    };
  }

  /** `run.finished` from the record as stored (so it carries what the store keeps, e.g. infrastructure_error). */
  private publishRunFinished(resultId: string): void {
    const rec = this.d.events && this.d.results.get(resultId);
    if (rec && rec !== 'deleted') this.d.events?.publish('run.finished', runFinished(rec));
  }

  /** A start time whose stamp differs from the previous run's (waits for the next second). */
  private async distinctStart(lastStamp: string, signal: AbortSignal): Promise<Date | undefined> {
    let now = this.now();
    while (runStamp(now) === lastStamp) {
      await sleep(1000 - (now.getTime() % 1000) + 1, signal);
      if (signal.aborted) return undefined;
      now = this.now();
    }
    return now;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}
