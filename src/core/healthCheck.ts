/**
 * The node's health check, after LAVA's device health model: a test case the
 * test pack names (`[test_pack] health_check`) is run as a job of its own
 * (category `health-check`) when the daemon starts, after N infrastructure
 * errors in a row, and periodically; never while a job runs. While the last
 * check failed the node is not available ("health check failed: <reason>")
 * and the check is run again every `retrySecs` until it passes. States,
 * triggers and settings are documented in docs/health-checks.md.
 */
import { FarmError } from './errors.js';
import { kindOfRecord } from './infrastructure.js';
import type { ResultRecord } from './model.js';
import type { IniConfig, Logger, TestPack } from './ports.js';
import type { Clock } from './reservations.js';

/** The category of the jobs (and so of the results) health checks run as. */
export const HEALTH_CHECK_CATEGORY = 'health-check';
/** The user health-check jobs run as. */
export const HEALTH_CHECK_USER = 'farmhand';
/** How often a due check looks again whether the node is free (a job ran or the node was reserved). */
export const BUSY_RECHECK_MS = 2000;

/**
 * `none`: the test pack names no health check (the node is never held back);
 * `unknown`: not checked yet; `good`: the last check passed; `bad`: it did not.
 */
export type HealthState = 'none' | 'unknown' | 'good' | 'bad';

export interface HealthCheckStatus {
  state: HealthState;
  /** The check in progress, if one runs. */
  running: boolean;
  /** The test case the last check ran (or tried to). */
  test_case: string | null;
  /** Why the last check failed; null unless `bad`. */
  reason: string | null;
  /** The result of the last check that recorded one. */
  last_result_id: string | null;
  /** When the last check ended (ISO 8601). */
  last_checked: string | null;
}

export interface HealthCheckSettings {
  /** Infrastructure errors in a row (health-check runs not counted) that make a check due; 0: never. */
  afterInfrastructureErrors: number;
  /** Seconds from the end of a passed check to the next; 0: no periodic check. */
  intervalSecs: number;
  /** Seconds from the end of a failed check to the next try. */
  retrySecs: number;
}

export interface HealthCheckDeps {
  /** The health-check test case the test pack names now; undefined when it names none. */
  testCase(): Promise<string | undefined>;
  /** Start a job of the one test case (category `health-check`); resolves with its job uid once it runs. */
  start(testCase: string): Promise<string>;
  /** Resolves when the job has exited. */
  whenEnded(jobUid: string): Promise<void>;
  /** True while a check must wait: a job runs, the node is reserved, the capture has no picture yet. */
  busy(): boolean;
  settings: HealthCheckSettings;
  clock: Clock;
  logger?: Logger;
}

export class HealthCheckService {
  private state: HealthState = 'unknown';
  private running = false;
  private testCase: string | null = null;
  private reason: string | null = null;
  private lastResult: ResultRecord | undefined;
  private lastChecked: string | null = null;
  /** Why a check is due; undefined when none is. */
  private due: string | undefined;
  private checkJob: string | undefined;
  private checkRecord: ResultRecord | undefined;
  private inARow = 0;
  private timer: unknown;
  private busyTimer: unknown;
  private stopped = false;
  private runs: Promise<void> = Promise.resolve();

  constructor(private readonly d: HealthCheckDeps) {}

  /** The daemon has started: check now (as soon as the node is free). */
  start(): void {
    this.request('the daemon started');
  }

  /** No more checks: timers cleared; resolves once a check in progress has ended. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.d.clock.clearTimer(this.timer);
    this.d.clock.clearTimer(this.busyTimer);
    await this.runs;
  }

  status(): HealthCheckStatus {
    return {
      state: this.state,
      running: this.running,
      test_case: this.testCase,
      reason: this.reason,
      last_result_id: this.lastResult?.result_id ?? null,
      last_checked: this.lastChecked,
    };
  }

  /** The node's not-available reason while the last check failed; else null. */
  problem(): string | null {
    return this.state === 'bad' ? `health check failed: ${this.reason ?? 'unknown reason'}` : null;
  }

  /** Every recorded run: the check's own result, or one more (or no longer) infrastructure error in a row. */
  observe(record: ResultRecord): void {
    if (this.checkJob !== undefined && record.job_uid === this.checkJob) {
      this.checkRecord = record;
      return;
    }
    if (kindOfRecord(record) === null || record.result !== 'error') {
      this.inARow = 0;
      return;
    }
    this.inARow++;
    const n = this.d.settings.afterInfrastructureErrors;
    if (n > 0 && this.inARow >= n) {
      this.inARow = 0;
      this.request(`${n} infrastructure error(s) in a row (the last: ${kindOfRecord(record)})`);
    }
  }

  /** Make a check due now; it runs as soon as the node is free. */
  request(why: string): void {
    if (this.stopped) return;
    this.due ??= why;
    this.tryRun();
  }

  private tryRun(): void {
    if (this.stopped || this.running || this.due === undefined) return;
    this.d.clock.clearTimer(this.busyTimer);
    this.busyTimer = undefined;
    if (this.d.busy()) {
      this.busyTimer = this.d.clock.setTimer(() => this.tryRun(), BUSY_RECHECK_MS);
      return;
    }
    const why = this.due;
    this.due = undefined;
    this.running = true;
    this.d.clock.clearTimer(this.timer);
    this.timer = undefined;
    this.runs = this.check(why)
      .catch((e: unknown) => this.d.logger?.error({ err: e }, 'health check failed to run'))
      .finally(() => {
        this.running = false;
        this.tryRun();
      });
  }

  private async check(why: string): Promise<void> {
    let testCase: string | undefined;
    try {
      testCase = await this.d.testCase();
    } catch (e) {
      // The test pack cannot be read now: not the node's health; look again at the next retry.
      this.d.logger?.warn({ err: e }, 'could not read the health-check test case from the test pack');
      this.arm(this.d.settings.retrySecs);
      return;
    }
    if (testCase === undefined) {
      if (this.state !== 'none') this.d.logger?.info({}, 'the test pack names no health check (test_pack.health_check)');
      this.set('none', null, null);
      this.arm(this.d.settings.intervalSecs);
      return;
    }
    this.testCase = testCase;
    let jobUid: string;
    try {
      jobUid = await this.d.start(testCase);
    } catch (e) {
      if (e instanceof FarmError && e.code === 'conflict') {
        // A job got in first: look again later (at once would spin while it starts).
        this.d.clock.clearTimer(this.busyTimer);
        this.busyTimer = this.d.clock.setTimer(() => this.request(why), BUSY_RECHECK_MS);
        return;
      }
      this.finish('bad', `could not start ${testCase}: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    this.checkJob = jobUid;
    this.checkRecord = undefined;
    this.d.logger?.info({ job: jobUid, test_case: testCase, why }, 'health check started');
    await this.d.whenEnded(jobUid);
    const r = this.checkRecord as ResultRecord | undefined;
    this.checkJob = undefined;
    if (r) this.lastResult = r;
    if (r?.result === 'pass') this.finish('good', null);
    else this.finish('bad', r ? (r.failure_reason ?? r.result) : `${testCase} recorded no result`);
  }

  private finish(state: 'good' | 'bad', reason: string | null): void {
    const was = this.state;
    this.lastChecked = new Date(this.d.clock.now()).toISOString();
    this.set(state, reason, this.testCase);
    this.inARow = 0;
    if (state === 'bad') this.d.logger?.error({ reason, result: this.lastResult?.result_id }, 'health check failed: the node is not available until it passes');
    else if (was === 'bad') this.d.logger?.info({ result: this.lastResult?.result_id }, 'health check passed again: the node is available');
    else this.d.logger?.info({ result: this.lastResult?.result_id }, 'health check passed');
    this.arm(state === 'bad' ? this.d.settings.retrySecs : this.d.settings.intervalSecs);
  }

  private set(state: HealthState, reason: string | null, testCase: string | null): void {
    this.state = state;
    this.reason = reason;
    this.testCase = testCase;
  }

  /** The next check in `secs` (0: none). */
  private arm(secs: number): void {
    this.d.clock.clearTimer(this.timer);
    this.timer = undefined;
    if (secs <= 0 || this.stopped) return;
    const why = this.state === 'bad' ? 'retry after a failed health check' : 'periodic health check';
    this.timer = this.d.clock.setTimer(() => this.request(why), secs * 1000);
  }
}

/**
 * The health-check test case at the test pack's HEAD: `[test_pack]
 * health_check` of the node's own `config/test-farm/<node_id>.conf`, else of
 * the test pack's configuration file; undefined when neither names one.
 */
export async function healthCheckTestCase(
  testPack: Pick<TestPack, 'resolve' | 'config' | 'readFile'>,
  nodeConfigPath: string,
  parseIni: (text: string) => IniConfig,
): Promise<string | undefined> {
  // Not on a request's path (it runs between jobs, as a run): a push is seen as run_tests sees it.
  const { sha } = await testPack.resolve('HEAD', { fresh: true });
  const nodeText = await testPack.readFile(sha, nodeConfigPath);
  const own = nodeText === undefined ? undefined : parseIni(nodeText).test_pack?.health_check;
  const name = own ?? (await testPack.config(sha)).test_pack?.health_check;
  return name === undefined || name.trim() === '' ? undefined : name.trim();
}
