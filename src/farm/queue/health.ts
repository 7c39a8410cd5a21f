/**
 * The portal's runner of pools' health checks (docs/health-checks.md, "A pool's health check"), after LAVA's health
 * checks: the test case a pool names (pool_health_checks, `farmhand farm pool health-check`) is run on each node of the
 * pool connected to this portal process
 *
 * - when the node comes (back) online: its connection to this portal starts (the node restarted, the network or the
 *   portal came back);
 * - every `every_hours` from the start of its last check (or from an administrator putting it back).
 *
 * A check is an ordinary job started on the node through the same JobStarter as the queue's (adapters.ts
 * hubJobStarter: run_tests with the node's id, as user `farmhand`, category `health-check`), never put in the queue
 * (where another node could take it). It starts only on a node that is free (connected, not running a job, not
 * reserved by a person, not in maintenance): it waits for that. While a check is due or runs, the node is held
 * (`held`): the queue's NodeStates (adapters.ts farmNodeStates) shows it busy, so the queue gives it nothing meanwhile.
 * The start takes the queue dispatcher's lock on the node (the same advisory lock), so the two never start at once.
 *
 * Its verdict: the job's results in the farm's index (folded from the node's run.finished before its job.exited is
 * published): every result a pass is a pass; else it failed with the first result that did not pass, or with "no
 * result" (a job that recorded none), or with the node's refusal of the start (a test case the test pack lacks).
 * node_health keeps it with the result id; a node whose check failed is `unhealthy` until a check passes or an
 * administrator puts it back (`farmhand farm node healthy`).
 */
import type pg from 'pg';
import type { Availability } from '../../core/availability.js';
import type { NewAuditEntry } from '../../core/audit.js';
import type { FarmEvent } from '../../core/events.js';
import type { Logger } from '../../core/ports.js';
import type { RunRequest } from '../../core/runRequest.js';
import type { FarmHub } from '../contract.js';
import { allNodeLabels } from './labels.js';
import type { JobStarter, QueueWakeups, StartOutcome } from './ports.js';
import { CHECK_SETTER, checkFor, POOL_CHECK_USER, poolHealthChecks, type PoolHealthCheck } from './poolStore.js';

/** The queue dispatcher's class of node locks (dispatcher.ts NODE_LOCK_CLASS, 'queu'): one start on a node at a time. */
const NODE_LOCK_CLASS = 0x71756575;
/** The category of a pool's check jobs (and results), as the node's own checks (core/healthCheck.ts). */
export const POOL_CHECK_CATEGORY = 'health-check';
/** A check's job the farm never heard of this long after its start, on a connected node running something else, is lost. */
const LOST_SECS = 120;

export interface PoolHealthChecksOptions {
  pool: pg.Pool;
  hub: Pick<FarmHub, 'link' | 'links' | 'onEvent' | 'onAvailabilityChange' | 'folded'>;
  starter: JobStarter;
  /** Each node's availability without the health checks' (adapters.ts farmNodeStates without `health`). */
  base: { availability(): Promise<Map<string, Availability>> };
  wakeups?: QueueWakeups | undefined;
  logger?: Logger | undefined;
  /** The audit trail (`node.health_check` when a check changes a node's health). */
  audit?: { record(entry: NewAuditEntry): void } | undefined;
  /** A pass at least this often (default 30 s): periodic checks coming due, a result missed. */
  pollMs?: number | undefined;
  /** A node that could not take a check (busy) is left alone this long (default 2 s). */
  cooldownMs?: number | undefined;
  startTimeoutMs?: number | undefined;
}

interface Running {
  check_id: number;
  node_id: string;
  job_uid: string | null;
  selector: string;
  test_case: string;
  started_at: Date;
}

/** The hold of a node just connected, until a pass has looked whether its pool's check is due. */
const LOOKING = 'health check: looking whether one is due';

export class PoolHealthChecks {
  /** Local nodes whose connection started and which have not had a check started since. */
  private readonly reconnected = new Set<string>();
  /** Local nodes held back from the queue: a check due, starting or running; the words shown. */
  private readonly holds = new Map<string, string>();
  private readonly starting = new Set<string>();
  private readonly cooling = new Map<string, number>();
  private readonly listeners = new Set<() => void>();
  private readonly unsubscribe: (() => void)[] = [];
  private readonly work = new Set<Promise<unknown>>();
  private looping: Promise<void> | undefined;
  private dirty = false;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  /** Passes run, for tests. */
  passes = 0;

  constructor(private readonly o: PoolHealthChecksOptions) {}

  start(): void {
    // The nodes already connected are held as a node coming online is (onEvent): a dispatcher's pass may read `held`
    // before the first pass ends.
    for (const l of this.o.hub.links()) if (l.online) this.connected(l.nodeId);
    this.unsubscribe.push(this.o.hub.onEvent((e) => this.onEvent(e)));
    const off = this.o.hub.onAvailabilityChange?.(() => this.wake());
    if (off) this.unsubscribe.push(off);
    if (this.o.wakeups) {
      this.unsubscribe.push(this.o.wakeups.on('node_health', () => (this.changed(), this.wake())));
      this.unsubscribe.push(this.o.wakeups.on('resync', () => this.wake()));
    }
    this.wake();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    for (const off of this.unsubscribe.splice(0)) off();
    await this.looping;
    await Promise.all([...this.work]);
  }

  /** Why a node of this process is held back from the queue now (a check due or running), or undefined. */
  held(nodeId: string): string | undefined {
    return this.holds.get(nodeId);
  }

  /** Subscribe to "a node's health or hold changed" (the queue's NodeStates.onChange); returns the unsubscribe. */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Look now (a pass after the one under way). */
  wake(): void {
    if (this.closed) return;
    this.dirty = true;
    this.looping ??= this.loop().finally(() => {
      this.looping = undefined;
      this.schedule();
    });
  }

  private changed(): void {
    for (const fn of [...this.listeners]) fn();
  }

  private onEvent(e: FarmEvent): void {
    if (e.type === 'node.online') this.connected(e.data.node_id);
    if (e.type === 'node.offline') this.reconnected.delete(e.data.node_id);
    if (e.type === 'job.exited') this.track(this.resolveJob((e as FarmEvent<'job.exited'>).data.job_uid, e.data.node_id));
    if (['node.online', 'node.offline', 'job.exited', 'reservation.ended', 'reservation.interrupted'].includes(e.type)) this.wake();
  }

  /**
   * A node connected (at start, or back online): due for its pool's check, and held synchronously, before any
   * dispatcher's pass reads `held`, until a pass has looked whether a check applies (a node is checked before it takes
   * a job).
   */
  private connected(nodeId: string): void {
    this.reconnected.add(nodeId);
    this.holds.set(nodeId, LOOKING);
  }

  private track(p: Promise<unknown>): void {
    const q = p.catch((err: unknown) => this.o.logger?.warn({ err }, 'health checks: recording a check failed; the next pass tries again')).finally(() => this.work.delete(q));
    this.work.add(q);
  }

  private async loop(): Promise<void> {
    while (this.dirty && !this.closed) {
      this.dirty = false;
      try {
        await this.pass();
      } catch (err) {
        this.o.logger?.warn({ err }, 'health checks: a pass failed; trying again at the next event or poll');
      }
    }
  }

  private schedule(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.wake(), this.o.pollMs ?? 30_000);
    this.timer.unref();
  }

  /** Record the checks whose jobs ended; then hold and start what is due. */
  private async pass(): Promise<void> {
    this.passes++;
    await this.sweepEnded();
    const checks = await poolHealthChecks(this.o.pool);
    const labels = await allNodeLabels(this.o.pool);
    const running = await this.runningChecks();
    const ages = await this.ages();
    const base = await this.o.base.availability();
    const before = new Map(this.holds);
    this.holds.clear();
    for (const link of this.o.hub.links()) {
      if (!link.online) continue;
      const check = checkFor(labels.get(link.nodeId) ?? {}, checks);
      if (!check) continue;
      const id = link.nodeId;
      if (running.has(id) || this.starting.has(id)) {
        this.holds.set(id, `health check ${check.test_case} of pool ${check.selector} running`);
        continue;
      }
      if (!this.due(id, check, ages.get(id))) continue;
      this.holds.set(id, `health check ${check.test_case} of pool ${check.selector} due: it runs once the node is free`);
      if (base.get(id)?.kind === 'available' && !((this.cooling.get(id) ?? 0) > Date.now())) this.launch(id, check);
    }
    if (!sameMap(before, this.holds)) this.changed();
  }

  /** Due: the node came back online since its last check started, or `every_hours` have passed since then. */
  private due(nodeId: string, check: PoolHealthCheck, ageSecs: number | undefined): boolean {
    if (this.reconnected.has(nodeId) || ageSecs === undefined) return true;
    return check.every_hours > 0 && ageSecs >= check.every_hours * 3600;
  }

  /** Seconds since each node's last check started, or an administrator put it back (the database's clock). */
  private async ages(): Promise<Map<string, number>> {
    const { rows } = await this.o.pool.query<{ node_id: string; age: number }>(
      `SELECT node_id, extract(epoch FROM now() - max(at))::float8 AS age FROM (
         SELECT node_id, started_at AS at FROM node_health_checks
         UNION ALL SELECT node_id, since FROM node_health WHERE set_by <> $1) t GROUP BY node_id`,
      [CHECK_SETTER],
    );
    return new Map(rows.map((r) => [r.node_id, Number(r.age)]));
  }

  private async runningChecks(): Promise<Map<string, Running>> {
    const { rows } = await this.o.pool.query<Running>('SELECT check_id, node_id, job_uid, selector, test_case, started_at FROM node_health_checks WHERE ended_at IS NULL');
    return new Map(rows.map((r) => [r.node_id, r]));
  }

  /**
   * Checks in progress whose job the farm has seen end (a job.exited missed: this process restarted, another
   * replica's); and those whose job was lost: the node is connected and free, yet the farm never heard of the job
   * (LOST_SECS after its start: the node lost its data), which are failed, else the node would be held for ever.
   */
  private async sweepEnded(): Promise<void> {
    const { rows } = await this.o.pool.query<{ job_uid: string; node_id: string; lost: boolean }>(
      `SELECT c.job_uid, c.node_id, j.job_uid IS NULL AS lost FROM node_health_checks c LEFT JOIN jobs j ON j.job_uid = c.job_uid
       WHERE c.ended_at IS NULL AND c.job_uid IS NOT NULL AND (j.ended_at IS NOT NULL OR (j.job_uid IS NULL AND c.started_at < now() - make_interval(secs => $1)))`,
      [LOST_SECS],
    );
    for (const r of rows) {
      const link = this.o.hub.link(r.node_id);
      if (!r.lost) await this.resolveJob(r.job_uid, r.node_id);
      else if (link?.online && link.job?.job_uid !== r.job_uid) await this.resolveJob(r.job_uid, r.node_id, 'the check\'s job was lost: the node no longer knows it');
    }
  }

  private launch(nodeId: string, check: PoolHealthCheck): void {
    this.starting.add(nodeId);
    const p = this.startCheck(nodeId, check)
      .catch((err: unknown) => this.o.logger?.warn({ err, node: nodeId }, 'health checks: starting a check failed; it is tried again'))
      .finally(() => {
        this.starting.delete(nodeId);
        this.work.delete(p);
        this.wake();
      });
    this.work.add(p);
  }

  /**
   * In one transaction held until the node answers: the node's lock (the dispatcher's), the check's row (at most one
   * running per node), the start. A refusal of the request itself is the check's failure; a busy node, a retry.
   */
  private async startCheck(nodeId: string, check: PoolHealthCheck): Promise<void> {
    const timeout = this.o.startTimeoutMs ?? 30_000;
    const client = await this.o.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      await client.query(`SET LOCAL idle_in_transaction_session_timeout = ${Math.round(timeout + 10_000)}`);
      const lock = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1, hashtext($2)) AS ok', [NODE_LOCK_CLASS, nodeId]);
      const row = lock.rows[0]?.ok
        ? (await client.query<{ check_id: string }>(`INSERT INTO node_health_checks (node_id, selector, test_case) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING check_id`, [nodeId, check.selector, check.test_case])).rows[0]
        : undefined;
      if (!row) return void (await client.query('ROLLBACK'), this.coolDown(nodeId, 250));
      const outcome = await this.o.starter.start({ nodeId, run: checkRun(check), username: POOL_CHECK_USER, queueId: 0 }, AbortSignal.timeout(timeout)).catch(
        (e: unknown): StartOutcome => ({ ok: false, retry: true, status: null, message: e instanceof Error ? e.message : String(e) }),
      );
      await this.recordStart(client, nodeId, Number(row.check_id), outcome);
    } catch (e) {
      broken = e instanceof Error ? e : new Error(String(e));
      throw e;
    } finally {
      client.release(broken);
    }
  }

  private async recordStart(client: pg.PoolClient, nodeId: string, checkId: number, outcome: StartOutcome): Promise<void> {
    if (outcome.ok) {
      await client.query('UPDATE node_health_checks SET job_uid = $2 WHERE check_id = $1', [checkId, outcome.job_uid]);
      await client.query('COMMIT');
      this.reconnected.delete(nodeId);
      this.o.logger?.info({ node: nodeId, job_uid: outcome.job_uid }, 'health checks: a check started');
      return;
    }
    if (outcome.retry) {
      await client.query('ROLLBACK');
      this.coolDown(nodeId, this.o.cooldownMs ?? 2_000);
      return;
    }
    const reason = `the node refused the check (${outcome.status ?? 'no status'}): ${outcome.message}`;
    await this.verdict(client, checkId, { outcome: 'not_started', result_id: null, reason });
    await client.query('COMMIT');
    this.reconnected.delete(nodeId);
    this.changed();
  }

  private coolDown(nodeId: string, ms: number): void {
    this.cooling.set(nodeId, Date.now() + ms);
    setTimeout(() => this.wake(), ms + 1).unref();
  }

  /** The job of a check in progress has exited: its results give the verdict. Other jobs: nothing. */
  private async resolveJob(jobUid: string, nodeId: string, lost?: string): Promise<void> {
    const running = await this.o.pool.query<{ check_id: string }>('SELECT check_id FROM node_health_checks WHERE job_uid = $1 AND ended_at IS NULL', [jobUid]);
    const checkId = running.rows[0]?.check_id;
    if (checkId === undefined) return;
    if (this.o.hub.link(nodeId)) await this.o.hub.folded(nodeId);
    const { rows } = await this.o.pool.query<{ result_id: string; result: string; failure_reason: string | null }>(
      'SELECT result_id, result::text AS result, failure_reason FROM results WHERE job_uid = $1 ORDER BY start_time, result_id',
      [jobUid],
    );
    const bad = rows.find((r) => r.result !== 'pass');
    const v: Verdict =
      rows.length === 0
        ? { outcome: 'error', result_id: null, reason: lost ?? 'the check recorded no result' }
        : bad
          ? { outcome: bad.result as Verdict['outcome'], result_id: bad.result_id, reason: bad.failure_reason ?? bad.result }
          : { outcome: 'pass', result_id: rows.at(-1)!.result_id, reason: null };
    const client = await this.o.pool.connect();
    try {
      await client.query('BEGIN');
      await this.verdict(client, Number(checkId), v);
      await client.query('COMMIT');
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
    this.changed();
    this.wake();
  }

  /** End the check's row and set the node's health from it (in the caller's transaction); audited when it changes. */
  private async verdict(client: pg.PoolClient, checkId: number, v: Verdict): Promise<void> {
    const ended = await client.query<Running>(
      `UPDATE node_health_checks SET ended_at = now(), outcome = $2, result_id = $3, reason = $4 WHERE check_id = $1 AND ended_at IS NULL RETURNING *`,
      [checkId, v.outcome, v.result_id, v.reason],
    );
    const c = ended.rows[0];
    if (!c) return;
    const state = v.outcome === 'pass' ? 'healthy' : 'unhealthy';
    const before = await client.query<{ state: string }>('SELECT state FROM node_health WHERE node_id = $1 FOR UPDATE', [c.node_id]);
    // A verdict older than the node's present one (an administrator put the node back after this check started) leaves it.
    const set = await client.query(
      `INSERT INTO node_health (node_id, state, check_id, selector, test_case, result_id, reason, since, set_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (node_id) DO UPDATE SET state = EXCLUDED.state, check_id = EXCLUDED.check_id, selector = EXCLUDED.selector, test_case = EXCLUDED.test_case,
         result_id = EXCLUDED.result_id, reason = EXCLUDED.reason, since = EXCLUDED.since, set_by = EXCLUDED.set_by
       WHERE node_health.since <= EXCLUDED.since
       RETURNING node_id`,
      [c.node_id, state, checkId, c.selector, c.test_case, v.result_id, v.reason, c.started_at, CHECK_SETTER],
    );
    if (set.rowCount === 0) {
      this.o.logger?.info({ node: c.node_id, outcome: v.outcome, result_id: v.result_id }, `health checks: node ${c.node_id}'s check ended (${v.outcome}), older than its present health (${before.rows[0]?.state}); that stands`);
      return;
    }
    this.o.logger?.info({ node: c.node_id, outcome: v.outcome, result_id: v.result_id }, `health checks: node ${c.node_id} is ${state}`);
    if (before.rows[0]?.state !== state) this.audit(c, state, v);
  }

  private audit(c: Running, state: string, v: Verdict): void {
    const detail = { pool: c.selector, test_case: c.test_case, state, outcome: v.outcome, result_id: v.result_id, reason: v.reason, job_uid: c.job_uid };
    this.o.audit?.record({ at: new Date().toISOString(), who: POOL_CHECK_USER, via: 'portal', token_id: null, from: null, action: 'node.health_check', node: c.node_id, target: c.job_uid, detail, outcome: 0 });
  }
}

interface Verdict {
  outcome: 'pass' | 'fail' | 'error' | 'not_started';
  result_id: string | null;
  reason: string | null;
}

/** The run_tests body of a pool's check: its one test case at the pool's revision, category health-check. */
export function checkRun(check: PoolHealthCheck): RunRequest {
  return {
    test_pack_revision: check.revision,
    test_cases: [check.test_case],
    category: POOL_CHECK_CATEGORY,
    soak: 'run once',
    shuffle: false,
    remote_control: null,
    tags: { health_check: check.selector },
  };
}

function sameMap(a: Map<string, string>, b: Map<string, string>): boolean {
  return a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
}
