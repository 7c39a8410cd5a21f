/**
 * The queue's dispatcher (docs/queue.md, "Dispatching"): gives the highest-priority-then-oldest waiting job to
 * the first free node that matches it, on every portal process (replica) at once, each job exactly once.
 *
 * A pass: end the jobs past their queue timeout; read which nodes are free (NodeStates: online, not running, not
 * reserved by a person, not in maintenance, not unhealthy) and local; plan who goes where (core/queue.ts
 * planAssignments); start each assignment in a transaction of its own that holds, until the node has answered,
 *
 * - a transaction-scoped advisory lock on the node (another replica does not start a second job on it meanwhile);
 * - the job's row, `FOR UPDATE SKIP LOCKED` (another replica skips it and takes the next one).
 *
 * The node answers with its job_uid: the row becomes `started` and the transaction commits. The node cannot take
 * it (busy, gone, no answer within startTimeoutMs) or this process dies during the start: the transaction rolls
 * back (PostgreSQL does it when the connection goes) and the job is waiting again, in its place. The node refuses
 * the request itself (a 4xx other than 409): the job is `failed` with the node's message.
 *
 * Woken by: a job queued on any replica (the trigger's NOTIFY, kind `queue_job`), a node that may have become free
 * (NodeStates.onChange: the hub's job.exited, node.online, node.state), the LISTEN connection coming back
 * (`resync`), a start finished, the next queue timeout, and a slow poll in case a wake-up was lost.
 */
import type pg from 'pg';
import type { Availability } from '../../core/availability.js';
import type { Logger } from '../../core/ports.js';
import { planAssignments, type QueueNode } from '../../core/queue.js';
import { allNodeLabels } from './labels.js';
import type { JobStarter, NodeStates, QueueWakeups, StartOutcome } from './ports.js';
import { presentRow, waitingOf, type PgJobQueue, type QueuedJob, type QueueRow } from './store.js';

/** The class of the node locks (pg_try_advisory_xact_lock(class, hashtext(node_id))): 'queu' in ASCII. */
const NODE_LOCK_CLASS = 0x71756575;
/** How long a node whose lock another replica holds (it is starting a job there) is left out. */
const LOCKED_NODE_MS = 250;

export type DispatchEvent =
  | { type: 'started'; job: QueuedJob }
  | { type: 'failed'; job: QueuedJob }
  | { type: 'expired'; job: QueuedJob }
  | { type: 'returned'; queue_id: number; node_id: string; message: string };

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
  /** A node just given a job is left out until it shows busy, or this long (default 5 s). */
  settleMs?: number | undefined;
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
  private readonly given = new Map<string, number>();
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
    for (const job of await this.o.queue.expire()) this.o.onEvent?.({ type: 'expired', job });
    const free = this.freeNodes(await this.o.nodes.availability());
    if (free.length === 0) return;
    const labels = await allNodeLabels(this.o.pool);
    const waiting = await this.o.queue.waiting({ skipLocked: true });
    if (waiting.length === 0) return;
    const nodes: QueueNode[] = free.map(([node_id, availability]) => ({ node_id, availability, labels: labels.get(node_id) ?? {} }));
    const byId = new Map(waiting.map((j) => [j.queue_id, j]));
    for (const { job, node_id } of planAssignments(waiting.map(waitingOf), nodes)) this.launch(byId.get(job.queue_id)!, node_id);
  }

  /** The nodes that take a job now: available, local, not being started, not cooling down, not just given one. */
  private freeNodes(all: Map<string, Availability>): [string, Availability][] {
    const now = Date.now();
    const settle = this.o.settleMs ?? 5_000;
    for (const [id, at] of this.given) if (all.get(id)?.kind !== 'available' || now - at > settle) this.given.delete(id);
    for (const [id, until] of this.cooling) if (until <= now) this.cooling.delete(id);
    return [...all].filter(([id, a]) => a.kind === 'available' && (this.o.nodes.isLocal?.(id) ?? true) && !this.starting.has(id) && !this.cooling.has(id) && !this.given.has(id));
  }

  /** Leave a node out for `ms`, then look again (a pass when it is back). */
  private coolDown(nodeId: string, ms: number): void {
    this.cooling.set(nodeId, Date.now() + ms);
    setTimeout(() => this.wake(), ms + 1).unref();
  }

  private launch(job: QueuedJob, nodeId: string): void {
    this.starting.add(nodeId);
    const p = this.startOne(job, nodeId)
      .catch((err: unknown) => this.o.logger?.warn({ err, queue_id: job.queue_id, node: nodeId }, 'queue: starting a job failed; it waits again'))
      .finally(() => {
        this.starting.delete(nodeId);
        this.starts.delete(p);
        this.wake();
      });
    this.starts.add(p);
  }

  /** Claim the job and the node in one transaction, start it, record the outcome; see the header. */
  private async startOne(job: QueuedJob, nodeId: string): Promise<void> {
    const timeout = this.o.startTimeoutMs ?? 30_000;
    const client = await this.o.pool.connect();
    let broken: Error | undefined;
    try {
      await client.query('BEGIN');
      // A process that hangs (not one that dies: its connection closing rolls back at once) lets go too.
      await client.query(`SET LOCAL idle_in_transaction_session_timeout = ${Math.round(timeout + 10_000)}`);
      const lock = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_xact_lock($1, hashtext($2)) AS ok', [NODE_LOCK_CLASS, nodeId]);
      const row = lock.rows[0]?.ok
        ? (await client.query<QueueRow>(`SELECT * FROM queue_jobs WHERE queue_id = $1 AND state = 'queued' AND (expires_at IS NULL OR expires_at > now()) FOR UPDATE SKIP LOCKED`, [job.queue_id])).rows[0]
        : undefined;
      if (!row) {
        await client.query('ROLLBACK');
        // Another replica is starting a job on this node (its lock): look again shortly, not in a loop meanwhile.
        if (!lock.rows[0]?.ok) this.coolDown(nodeId, LOCKED_NODE_MS);
        return;
      }
      const outcome = await this.o.starter.start({ nodeId, run: job.request, username: job.username, queueId: job.queue_id }, AbortSignal.timeout(timeout)).catch(
        (e: unknown): StartOutcome => ({ ok: false, retry: true, status: null, message: e instanceof Error ? e.message : String(e) }),
      );
      await this.record(client, job, nodeId, outcome);
    } catch (e) {
      // A connection in an unknown state (a COMMIT that failed, the server gone) is not handed to the next caller.
      broken = e instanceof Error ? e : new Error(String(e));
      throw e;
    } finally {
      client.release(broken);
    }
  }

  private async record(client: pg.PoolClient, job: QueuedJob, nodeId: string, outcome: StartOutcome): Promise<void> {
    if (outcome.ok) {
      const { rows } = await client.query<QueueRow>(
        `UPDATE queue_jobs SET state = 'started', node_id = $2, job_uid = $3, ended_at = now(), end_reason = 'started', attempts = attempts + 1 WHERE queue_id = $1 RETURNING *`,
        [job.queue_id, nodeId, outcome.job_uid],
      );
      await client.query('COMMIT');
      this.given.set(nodeId, Date.now());
      this.o.onEvent?.({ type: 'started', job: presentRow(rows[0]!) });
      return;
    }
    if (!outcome.retry) {
      const { rows } = await client.query<QueueRow>(
        `UPDATE queue_jobs SET state = 'failed', node_id = $2, ended_at = now(), end_reason = $3, last_error = $3, attempts = attempts + 1 WHERE queue_id = $1 RETURNING *`,
        [job.queue_id, nodeId, `node ${nodeId} refused the request (${outcome.status ?? 'no status'}): ${outcome.message}`],
      );
      await client.query('COMMIT');
      this.o.onEvent?.({ type: 'failed', job: presentRow(rows[0]!) });
      return;
    }
    await client.query('ROLLBACK');
    this.coolDown(nodeId, this.o.cooldownMs ?? 2_000);
    const message = `node ${nodeId} could not take it${outcome.status ? ` (${outcome.status})` : ''}: ${outcome.message}`;
    await this.o.pool
      .query(`UPDATE queue_jobs SET attempts = attempts + 1, last_error = $2 WHERE queue_id = $1 AND state = 'queued'`, [job.queue_id, message])
      .catch(() => undefined);
    this.o.onEvent?.({ type: 'returned', queue_id: job.queue_id, node_id: nodeId, message });
  }
}
