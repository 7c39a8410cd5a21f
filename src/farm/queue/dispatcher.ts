/**
 * The queue's dispatcher (docs/queue.md, "Dispatching"): gives the highest-priority-then-oldest waiting job to
 * the first free node that matches it, on every portal process (replica) at once, each job exactly once.
 *
 * A pass: end the jobs past their queue timeout; ask again after the starts whose answer was lost (below); read
 * which nodes are free (NodeStates: online, not running, not reserved by a person, not in maintenance, not
 * unhealthy) and local; plan who goes where (core/queue.ts planAssignments); start each assignment:
 *
 * 1. The claim, one short transaction: the node's advisory lock and the job's, both held by the session until the
 *    node has answered (another replica neither starts a second job on the node nor asks about this one meanwhile);
 *    the job's row `FOR UPDATE SKIP LOCKED`, then pinned to the node with a fresh key (node_id, start_key,
 *    start_at; the job stays `queued`). Committed before the node is asked: the intent outlives this process.
 * 2. The start: the run_tests forwarded with the key as its Idempotency-Key.
 * 3. The outcome: a job_uid makes the row `started`; the node's "not now" (busy, in maintenance) unpins it (it
 *    waits again, in its place); a refusal of the request itself fails it; no answer that says (no answer in time,
 *    the connection lost) leaves it pinned.
 *
 * A pinned job whose claimer is gone (this process died: its session, so its locks, went with it) or whose answer
 * was lost is sent again by the process the node is connected to, with the same key: the node answers the job it
 * started, or starts it now, never a second one. A job pinned to a node offline for longer than lostNodeMs since the
 * start began goes back to the queue (the node is taken for dead, and its job with it).
 *
 * Woken by: a job queued on any replica (the trigger's NOTIFY, kind `queue_job`), a node that may have become free
 * (NodeStates.onChange: the hub's job.exited and node.online, a node's own availability changing), the LISTEN connection coming back
 * (`resync`), a start finished, the next queue timeout, and a slow poll in case a wake-up was lost.
 */
import type pg from 'pg';
import type { Availability } from '../../core/availability.js';
import type { Logger } from '../../core/ports.js';
import { planAssignments, type QueueNode } from '../../core/queue.js';
import { allNodeLabels } from './labels.js';
import type { JobStarter, NodeStates, QueueWakeups, StartOutcome } from './ports.js';
import { presentRow, waitingOf, type PgJobQueue, type QueuedJob, type QueueRow } from './store.js';

/** The class of the node locks (pg_try_advisory_lock(class, hashtext(node_id))): 'queu' in ASCII. */
export const NODE_LOCK_CLASS = 0x71756575;
/** The class of the job locks (pg_try_advisory_lock(class, hashtext(queue_id::text))), held by a start's claimer: 'qjob'. */
export const JOB_LOCK_CLASS = 0x716a6f62;
/** How long a node whose lock another replica holds (it is starting a job there) is left out. */
const LOCKED_NODE_MS = 250;
/** A pass this long is logged at warn (every free node waited for it). */
const SLOW_PASS_MS = 2_000;

export type DispatchEvent =
  | { type: 'started'; job: QueuedJob }
  | { type: 'failed'; job: QueuedJob }
  | { type: 'expired'; job: QueuedJob }
  | { type: 'returned'; queue_id: number; node_id: string; message: string }
  /** The node's answer did not say whether it started the job: it stays pinned to the node, asked again. */
  | { type: 'unanswered'; queue_id: number; node_id: string; message: string };

export interface QueueDispatcherOptions {
  pool: pg.Pool;
  queue: PgJobQueue;
  nodes: NodeStates;
  starter: JobStarter;
  wakeups?: QueueWakeups | undefined;
  logger?: Logger | undefined;
  /** A start the node has not answered within this goes back to the queue (default 30 s). */
  startTimeoutMs?: number | undefined;
  /** A pass at least this often, woken or not (default 5 s). */
  pollMs?: number | undefined;
  /** A node that could not take a job is left out this long (default 2 s). */
  cooldownMs?: number | undefined;
  /**
   * A node just given a job is left out until it shows busy, its job is heard of (NodeStates.jobOf: a short job may
   * end before a pass sees it busy), or this long (default 5 s).
   */
  settleMs?: number | undefined;
  /** A job being started on a node that is offline this long after the start began goes back to the queue (default 60 s). */
  lostNodeMs?: number | undefined;
  /** Told of each job started, failed, expired or given back (events, the audit trail, tests). */
  onEvent?: ((e: DispatchEvent) => void) | undefined;
}

export class QueueDispatcher {
  private dirty = false;
  private looping: Promise<void> | undefined;
  private closed = false;
  private timer: NodeJS.Timeout | undefined;
  private readonly starting = new Set<string>();
  private readonly starts = new Set<Promise<void>>();
  private readonly cooling = new Map<string, number>();
  private readonly given = new Map<string, { at: number; job_uid: string }>();
  private readonly unsubscribe: (() => void)[] = [];
  /** Passes run, for tests and metrics. */
  passes = 0;

  constructor(private readonly o: QueueDispatcherOptions) {}

  /** Listen for wake-ups and run a first pass. */
  start(): void {
    const wake = () => this.wake();
    if (this.o.wakeups) for (const kind of ['queue_job', 'resync', 'reservation_ended']) this.unsubscribe.push(this.o.wakeups.on(kind, wake));
    const off = this.o.nodes.onChange?.(wake);
    if (off) this.unsubscribe.push(off);
    this.wake();
  }

  /** Stop: no new pass or start; waits for the pass and the starts under way. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    for (const off of this.unsubscribe.splice(0)) off();
    await this.idle();
  }

  /** The pass under way, if any, and the starts it launched, done (tests; close). */
  async idle(): Promise<void> {
    await this.looping;
    await Promise.all([...this.starts]);
  }

  /** Look at the queue now (a pass after the one under way, if any). */
  wake(): void {
    if (this.closed) return;
    this.dirty = true;
    this.looping ??= this.loop().finally(() => {
      this.looping = undefined;
      this.schedule();
    });
  }

  private async loop(): Promise<void> {
    while (this.dirty && !this.closed) {
      this.dirty = false;
      try {
        await this.pass();
      } catch (err) {
        this.o.logger?.warn({ err }, 'queue: a dispatch pass failed; trying again at the next wake-up or poll');
      }
    }
  }

  /** The next pass: at the poll, or sooner when a waiting job's queue timeout comes first. */
  private schedule(): void {
    if (this.closed) return;
    clearTimeout(this.timer);
    const poll = this.o.pollMs ?? 5_000;
    const at = (ms: number) => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => this.wake(), Math.max(0, Math.min(ms, poll)));
      this.timer.unref();
    };
    at(poll);
    this.o.queue.nextExpiryInSecs().then(
      (secs) => (secs !== null && !this.closed ? at(secs * 1000 + 5) : undefined),
      () => undefined,
    );
  }

  private async pass(): Promise<void> {
    this.passes++;
    const t0 = performance.now();
    const trace: Record<string, unknown> = { pass: this.passes, ...this.poolUse() };
    try {
      for (const job of await this.o.queue.expire()) this.o.onEvent?.({ type: 'expired', job });
      const availability = await this.o.nodes.availability();
      trace['read_ms'] = Math.round(performance.now() - t0);
      const pinned = await this.reconcile(availability);
      const { free, leftOut } = this.freeNodes(availability, pinned);
      trace['free'] = free.map(([id]) => id);
      trace['left_out'] = leftOut;
      if (free.length === 0) return;
      const labels = await allNodeLabels(this.o.pool);
      const waiting = await this.o.queue.waiting({ skipLocked: true });
      trace['waiting'] = waiting.length;
      if (waiting.length === 0) return;
      const nodes: QueueNode[] = free.map(([node_id, availability]) => ({ node_id, availability, labels: labels.get(node_id) ?? {} }));
      const byId = new Map(waiting.map((j) => [j.queue_id, j]));
      const plan = planAssignments(waiting.map(waitingOf), nodes);
      trace['assigned'] = plan.map((a) => `${a.job.queue_id}->${a.node_id}`);
      for (const { job, node_id } of plan) this.launch(byId.get(job.queue_id)!, node_id);
    } finally {
      const ms = Math.round(performance.now() - t0);
      // A slow pass holds every free node back: say so at warn; each pass at debug (docs/queue.md, "The dispatcher's log").
      if (ms >= SLOW_PASS_MS) this.o.logger?.warn({ ...trace, ms }, 'queue: a dispatch pass was slow');
      else this.o.logger?.debug({ ...trace, ms }, 'queue: dispatch pass');
    }
  }

  /** The pool's connections (open, idle, callers waiting for one): a pool used up stalls every pass. */
  private poolUse(): { pool?: string } {
    const p = this.o.pool as Partial<Record<'totalCount' | 'idleCount' | 'waitingCount', number>>;
    return p.totalCount === undefined ? {} : { pool: `${p.totalCount} open, ${p.idleCount} idle, ${p.waitingCount} waiting` };
  }

  /**
   * The nodes that take a job now (available, local, no job pinned to it, not being started, not cooling down, not
   * just given one), and why each other node does not (the pass's debug line).
   */
  private freeNodes(all: Map<string, Availability>, pinned: Set<string>): { free: [string, Availability][]; leftOut: Record<string, string> } {
    const now = Date.now();
    const settle = this.o.settleMs ?? 5_000;
    for (const [id, g] of this.given) {
      // Shown busy, or its job heard of (running, or already ended: a short job), or past the settle time.
      if (all.get(id)?.kind !== 'available' || this.o.nodes.jobOf?.(id)?.job_uid === g.job_uid || now - g.at > settle) this.given.delete(id);
    }
    for (const [id, until] of this.cooling) if (until <= now) this.cooling.delete(id);
    const free: [string, Availability][] = [];
    const leftOut: Record<string, string> = {};
    for (const [id, a] of all) {
      const why = this.whyNotFree(id, a, pinned);
      if (why === null) free.push([id, a]);
      else leftOut[id] = why;
    }
    return { free, leftOut };
  }

  /** Why the node does not take a job in this pass (the names of docs/queue.md, "The dispatcher's log"), or null: it does. */
  private whyNotFree(id: string, a: Availability, pinned: Set<string>): string | null {
    if (a.kind !== 'available') return a.kind;
    if (this.starting.has(id)) return 'starting';
    if (pinned.has(id)) return 'pinned';
    if (this.cooling.has(id)) return 'cooling';
    if (this.given.has(id)) return 'given';
    if (!(this.o.nodes.isLocal?.(id) ?? true)) return 'elsewhere';
    return null;
  }

  /**
   * The jobs pinned to a node (being started): sent again with their key where the node is connected here, the
   * claimer is gone (its job lock is free: startOne checks) and the node is not cooling down; given back to the queue
   * when the node has been offline past lostNodeMs. Returns the nodes with a pinned job (no other job for them).
   */
  private async reconcile(availability: Map<string, Availability>): Promise<Set<string>> {
    const pinned = await this.o.queue.pinned();
    const lost = this.o.lostNodeMs ?? 60_000;
    for (const p of pinned) {
      if (this.starting.has(p.node_id) || (this.cooling.get(p.node_id) ?? 0) > Date.now()) continue;
      if (this.o.nodes.isLocal?.(p.node_id) ?? true) this.launch(p.job, p.node_id, p.key);
      else if (availability.get(p.node_id)?.kind === 'offline' && p.age_ms >= lost) await this.unpinLost(p.job.queue_id, p.node_id, p.key, lost);
    }
    return new Set(pinned.map((p) => p.node_id));
  }

  /** Give back a job pinned to a node offline since its start began, unless its claimer still holds it. */
  private async unpinLost(queueId: number, nodeId: string, key: string, lostMs: number): Promise<void> {
    const client = await this.o.pool.connect();
    try {
      const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2::text)) AS ok', [JOB_LOCK_CLASS, String(queueId)]);
      if (!rows[0]?.ok) return;
      const message = `node ${nodeId} went offline while the job was being started and was not back within ${Math.round(lostMs / 1000)} s; the job waits again`;
      const done = await client.query(
        `UPDATE queue_jobs SET node_id = NULL, start_key = NULL, start_at = NULL, last_error = $3
         WHERE queue_id = $1 AND state = 'queued' AND start_key = $2 AND start_at <= now() - make_interval(secs => $4::float8)`,
        [queueId, key, message, lostMs / 1000],
      );
      if (done.rowCount) this.o.onEvent?.({ type: 'returned', queue_id: queueId, node_id: nodeId, message });
    } finally {
      await client.query('SELECT pg_advisory_unlock_all()').catch(() => undefined);
      client.release();
    }
  }

  /** Leave a node out for `ms`, then look again (a pass when it is back). */
  private coolDown(nodeId: string, ms: number): void {
    this.cooling.set(nodeId, Date.now() + ms);
    setTimeout(() => this.wake(), ms + 1).unref();
  }

  private launch(job: QueuedJob, nodeId: string, key?: string): void {
    this.starting.add(nodeId);
    const p = this.startOne(job, nodeId, key)
      .catch((err: unknown) => this.o.logger?.warn({ err, queue_id: job.queue_id, node: nodeId }, 'queue: starting a job failed; it waits again'))
      .finally(() => {
        this.starting.delete(nodeId);
        this.starts.delete(p);
        this.wake();
      });
    this.starts.add(p);
  }

  /**
   * Claim the job (a waiting one, or with `key` one pinned to this node whose claimer is gone), start it on the node
   * with its key, record the outcome; see the header. The claim's locks are the session's, so held by this connection
   * until the end (or until PostgreSQL sees it gone).
   */
  private async startOne(job: QueuedJob, nodeId: string, key?: string): Promise<void> {
    const timeout = this.o.startTimeoutMs ?? 30_000;
    const t0 = performance.now();
    const times: Record<string, number> = {};
    const mark = (what: string) => (times[what] = Math.round(performance.now() - t0));
    const client = await this.o.pool.connect();
    mark('connected_ms');
    let broken: Error | undefined;
    try {
      // A process that hangs (not one that dies: its connection closing lets go at once) lets go too.
      await client.query(`SET idle_session_timeout = ${Math.round(timeout + 10_000)}`);
      const claim = await this.claim(client, job.queue_id, nodeId, key);
      mark('claimed_ms');
      if (claim === 'locked') {
        // Another replica is starting a job on this node, or this job (their locks): look again shortly, not in a loop meanwhile.
        this.coolDown(nodeId, LOCKED_NODE_MS);
        return;
      }
      if (!claim) return;
      const req = { nodeId, run: claim.job.request, username: claim.job.username, queueId: claim.job.queue_id, key: claim.key };
      const outcome = await this.o.starter.start(req, AbortSignal.timeout(timeout)).catch(
        (e: unknown): StartOutcome => ({ ok: false, retry: true, unknown: true, status: null, message: e instanceof Error ? e.message : String(e) }),
      );
      mark('answered_ms');
      await this.record(client, claim.job, nodeId, claim.key, outcome);
      mark('recorded_ms');
      this.o.logger?.debug({ queue_id: job.queue_id, node: nodeId, ok: outcome.ok, ...times }, 'queue: a start');
    } catch (e) {
      // A connection in an unknown state (a COMMIT that failed, the server gone) is not handed to the next caller.
      broken = e instanceof Error ? e : new Error(String(e));
      throw e;
    } finally {
      if (!broken) await client.query('SELECT pg_advisory_unlock_all(); RESET idle_session_timeout').catch((e: unknown) => (broken = e instanceof Error ? e : new Error(String(e))));
      client.release(broken);
    }
  }

  /**
   * The claim (step 1): the node's and the job's session locks, the row, pinned with a fresh key (or, resuming, the
   * row pinned to this node with `key`). 'locked': another process is starting a job on the node, or this job;
   * undefined: the job is not (or no longer) this process's to start.
   */
  private async claim(client: pg.PoolClient, queueId: number, nodeId: string, key: string | undefined): Promise<{ job: QueuedJob; key: string } | 'locked' | undefined> {
    const lock = (cls: number, id: string) => client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2::text)) AS ok', [cls, id]).then((r) => r.rows[0]?.ok === true);
    if (!(await lock(NODE_LOCK_CLASS, nodeId))) return 'locked';
    await client.query('BEGIN');
    try {
      const row =
        key === undefined
          ? (await client.query<QueueRow>(`SELECT * FROM queue_jobs WHERE queue_id = $1 AND state = 'queued' AND start_key IS NULL AND (expires_at IS NULL OR expires_at > now()) FOR UPDATE SKIP LOCKED`, [queueId])).rows[0]
          : (await client.query<QueueRow>(`SELECT * FROM queue_jobs WHERE queue_id = $1 AND state = 'queued' AND node_id = $2 AND start_key = $3 FOR UPDATE SKIP LOCKED`, [queueId, nodeId, key])).rows[0];
      if (!row) {
        await client.query('ROLLBACK');
        return undefined;
      }
      // The job's lock free: nobody else is starting it (a pinned job's claimer is gone).
      if (!(await lock(JOB_LOCK_CLASS, String(queueId)))) {
        await client.query('ROLLBACK');
        return 'locked';
      }
      if (key !== undefined) {
        await client.query('COMMIT');
        return { job: presentRow(row), key };
      }
      const { rows } = await client.query<QueueRow>(
        `UPDATE queue_jobs SET node_id = $2, start_key = gen_random_uuid(), start_at = now(), attempts = attempts + 1 WHERE queue_id = $1 RETURNING *`,
        [queueId, nodeId],
      );
      await client.query('COMMIT');
      return { job: presentRow(rows[0]!), key: rows[0]!.start_key! };
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      // Another job pinned to this node meanwhile (queue_jobs_starting): not this pass's to start.
      if ((e as { code?: string }).code === '23505') return undefined;
      throw e;
    }
  }

  /** Step 3: the node's answer, recorded on the row still pinned with `key` (see the header). */
  private async record(client: pg.PoolClient, job: QueuedJob, nodeId: string, key: string, outcome: StartOutcome): Promise<void> {
    const mine = `queue_id = $1 AND state = 'queued' AND start_key = $2`;
    if (outcome.ok) {
      const { rows } = await client.query<QueueRow>(`UPDATE queue_jobs SET state = 'started', job_uid = $3, ended_at = now(), end_reason = 'started' WHERE ${mine} RETURNING *`, [
        job.queue_id,
        key,
        outcome.job_uid,
      ]);
      this.given.set(nodeId, { at: Date.now(), job_uid: outcome.job_uid });
      // Nothing else may wake a pass when the settle time ends (no event of the node seen meanwhile).
      setTimeout(() => this.wake(), (this.o.settleMs ?? 5_000) + 1).unref();
      if (rows[0]) this.o.onEvent?.({ type: 'started', job: presentRow(rows[0]) });
      return;
    }
    if (!outcome.retry) {
      const { rows } = await client.query<QueueRow>(`UPDATE queue_jobs SET state = 'failed', ended_at = now(), end_reason = $3, last_error = $3 WHERE ${mine} RETURNING *`, [
        job.queue_id,
        key,
        `node ${nodeId} refused the request (${outcome.status ?? 'no status'}): ${outcome.message}`,
      ]);
      if (rows[0]) this.o.onEvent?.({ type: 'failed', job: presentRow(rows[0]) });
      return;
    }
    this.coolDown(nodeId, this.o.cooldownMs ?? 2_000);
    if (outcome.unknown) {
      const message = `node ${nodeId} did not say whether it started the job${outcome.status ? ` (${outcome.status})` : ''}: ${outcome.message}; asking it again`;
      await client.query(`UPDATE queue_jobs SET last_error = $3 WHERE ${mine}`, [job.queue_id, key, message]);
      this.o.onEvent?.({ type: 'unanswered', queue_id: job.queue_id, node_id: nodeId, message });
      return;
    }
    const message = `node ${nodeId} could not take it${outcome.status ? ` (${outcome.status})` : ''}: ${outcome.message}`;
    await client.query(`UPDATE queue_jobs SET node_id = NULL, start_key = NULL, start_at = NULL, last_error = $3 WHERE ${mine}`, [job.queue_id, key, message]);
    this.o.onEvent?.({ type: 'returned', queue_id: job.queue_id, node_id: nodeId, message });
  }
}
