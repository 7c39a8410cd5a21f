/**
 * Cross-replica wake-ups (docs/farm.md, "Many portals"): one LISTEN connection per portal on the
 * channel `farmhand`, payloads JSON `{"kind": ..., ...}`. What a replica does in its own memory
 * when something ends (a reservation ended, a result stored, a job exited, a session ended) it
 * also tells the others with a NOTIFY, so a waiter on another replica wakes at once instead of at
 * its next poll.
 *
 * - `notify(kind, data)` sends after the caller's commit (pg_notify from the pool; a NOTIFY in a
 *   transaction would be sent at its commit too, the database's triggers use that).
 * - `on(kind, fn)` hears every replica's notifications, its own included (`from` is the sender's
 *   `id`; a wake-up is idempotent: a waiter that finds nothing new waits again).
 * - A job's end and a result stored already reach every replica in order through the events outbox
 *   (its rows are written in the fold's transaction and announced on `farm_events`, src/farm/events.ts):
 *   `whenJobExited` waits on that, with no second notification for the same thing.
 * - `node_owner` (`node_id`, `replica`) is sent by the statement of a node's hello that makes it a replica's
 *   (replicas/ownership.ts takeNode): the requests held for a node between owners go to its new one (nodePlace.ts).
 * - `queue_job` is sent by the database's trigger on `queue_jobs` (migration 15) when a job is queued, on any
 *   replica: every replica's dispatcher looks at the queue (src/farm/queue/dispatcher.ts).
 * - `node_health` and `pool_maintenance` are sent by the triggers of migration 16 when a node's health-check
 *   verdict or a pool's maintenance changes (src/farm/queue/health.ts, pool.ts; docs/health-checks.md).
 * - The LISTEN connection is a pg.Client of its own (never a pooled one); when it drops (PostgreSQL
 *   restarted) it is re-established with a jittered back-off, and the subscribers of `resync` are
 *   called: notifications sent meanwhile are lost, so each one looks again at what it waits for.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { FarmEvent } from '../core/events.js';
import type { Logger } from '../core/ports.js';

export const WAKEUP_CHANNEL = 'farmhand';

/** The kinds sent on the channel; `resync` is local only (the LISTEN connection came back). */
export type WakeupKind = 'reservation_ended' | 'result_stored' | 'job_exited' | 'session_ended' | 'node_owner' | 'queue_job' | 'node_health' | 'pool_maintenance' | 'resync';

export type Wakeup = { kind: WakeupKind } & Record<string, unknown>;

export interface FarmWakeupsOptions {
  pool: pg.Pool;
  logger?: Logger | undefined;
  /** Back-off of reconnects: first wait, doubling up to `retryMaxMs` (jittered). */
  retryInitialMs?: number | undefined;
  retryMaxMs?: number | undefined;
}

export class FarmWakeups {
  /** This process's name on the channel (`from` of what it sends), so a subscriber can tell its own. */
  readonly id = randomBytes(6).toString('hex');
  private client: pg.Client | undefined;
  private closed = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private failures = 0;
  private readonly subscribers = new Map<WakeupKind, Set<(w: Wakeup) => void>>();
  /** Notifications received (every kind), for tests that wait on one. */
  received = 0;
  /** Times the LISTEN connection was re-established. */
  reconnects = 0;

  constructor(private readonly o: FarmWakeupsOptions) {}

  async start(): Promise<void> {
    await this.listen();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }

  /** Whether the LISTEN connection is up. */
  get listening(): boolean {
    return this.client !== undefined;
  }

  /** The backend pid of the LISTEN connection (tests terminate it), or undefined while disconnected. */
  get listenerPid(): number | undefined {
    return (this.client as unknown as { processID?: number } | undefined)?.processID;
  }

  /** Hear `kind` from every replica; returns the unsubscribe. `fn` must not throw nor block. */
  on(kind: WakeupKind, fn: (w: Wakeup) => void): () => void {
    let set = this.subscribers.get(kind);
    if (!set) this.subscribers.set(kind, (set = new Set()));
    set.add(fn);
    return () => set.delete(fn);
  }

  /**
   * Tell every replica (this one included). Best effort: a failure is logged, never thrown (the change itself is
   * committed; the others' periodic checks still find it).
   */
  async notify(kind: Exclude<WakeupKind, 'resync'>, data: Record<string, unknown> = {}): Promise<void> {
    if (this.closed || this.o.pool.ending) return;
    try {
      await this.o.pool.query('SELECT pg_notify($1, $2)', [WAKEUP_CHANNEL, JSON.stringify({ ...data, kind, from: this.id })]);
    } catch (err) {
      this.o.logger?.warn({ err, kind }, 'wake-ups: could not notify the other replicas; they find it at their next check');
    }
  }

  private deliver(w: Wakeup): void {
    for (const fn of [...(this.subscribers.get(w.kind) ?? [])]) {
      try {
        fn(w);
      } catch (err) {
        this.o.logger?.warn({ err, kind: w.kind }, 'wake-ups: a subscriber failed');
      }
    }
  }

  private async listen(): Promise<void> {
    const client = new pg.Client(this.o.pool.options);
    let lost = false;
    const onLost = (err?: unknown) => {
      if (lost) return;
      lost = true;
      if (this.client === client) this.client = undefined;
      client.end().catch(() => undefined);
      if (this.closed) return;
      this.o.logger?.warn({ err }, 'wake-ups: the LISTEN connection dropped; reconnecting');
      this.scheduleReconnect();
    };
    // A client with no 'error' listener would take the process down when the server goes.
    client.on('error', onLost);
    client.on('end', () => onLost());
    client.on('notification', (n) => {
      if (n.channel !== WAKEUP_CHANNEL || !n.payload) return;
      let w: unknown;
      try {
        w = JSON.parse(n.payload);
      } catch {
        return;
      }
      if (typeof w === 'object' && w !== null && typeof (w as Wakeup).kind === 'string' && (w as Wakeup).kind !== 'resync') {
        this.received++;
        this.deliver(w as Wakeup);
      }
    });
    try {
      await client.connect();
      await client.query(`LISTEN ${WAKEUP_CHANNEL}`);
    } catch (err) {
      lost = true;
      await client.end().catch(() => undefined);
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    this.failures = 0;
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const base = Math.min(this.o.retryMaxMs ?? 10_000, (this.o.retryInitialMs ?? 250) * 2 ** this.failures++);
    this.reconnectTimer = setTimeout(
      () => {
        this.reconnectTimer = undefined;
        this.listen().then(
          () => {
            if (this.closed) return;
            this.reconnects++;
            this.o.logger?.info({}, 'wake-ups: LISTEN connection back; every waiter looks again');
            this.deliver({ kind: 'resync' });
          },
          (err: unknown) => {
            this.o.logger?.warn({ err, attempt: this.failures }, 'wake-ups: reconnecting the LISTEN connection failed');
            this.scheduleReconnect();
          },
        );
      },
      Math.round(base / 2 + (Math.random() * base) / 2),
    );
    this.reconnectTimer.unref();
  }
}

/** What `whenJobExited` needs of the outbox listener (src/farm/events.ts OutboxListener). */
export interface OutboxFeed {
  subscribe(fn: (e: FarmEvent) => void): { close(): void };
}

/**
 * Resolves when the outbox delivers `job.exited` of `uid` (folded on any replica, after its commit); rejects when
 * `signal` aborts. Subscribes at once: read the job's row after calling it, and an end in between is not missed.
 */
export function whenJobExited(feed: OutboxFeed, uid: string, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(new Error('aborted'));
      return;
    }
    const sub = feed.subscribe((e) => {
      if (e.type !== 'job.exited' || (e.data as { job_uid?: unknown }).job_uid !== uid) return;
      done();
      resolve();
    });
    const onAbort = () => {
      done();
      reject(new Error('aborted'));
    };
    const done = () => {
      sub.close();
      signal.removeEventListener('abort', onAbort);
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
