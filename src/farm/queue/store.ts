/**
 * The job queue in PostgreSQL (table queue_jobs, migration 15; docs/queue.md): enqueue, read, list, cancel,
 * expire, and why each waiting job waits. Starting jobs is the dispatcher's (dispatcher.ts). Errors are FarmErrors
 * the HTTP layer maps to statuses: invalid_request 400 (bad labels, priority, a selector no node can match),
 * forbidden 403 (cancelling another user's job), not_found 404, conflict 409 (cancelling a job that started).
 */
import type pg from 'pg';
import type { Availability } from '../../core/availability.js';
import { FarmError } from '../../core/errors.js';
import { checkSatisfiable, explainWait, selectorText, type Labels, type QueueNode, type WaitingJob, type WaitReason } from '../../core/queue.js';
import type { RunRequest } from '../../core/runRequest.js';
import { allNodeLabels } from './labels.js';
import { parseQueuedJob } from './request.js';

export type QueueState = 'queued' | 'started' | 'cancelled' | 'expired' | 'failed';
export const QUEUE_STATES: readonly QueueState[] = ['queued', 'started', 'cancelled', 'expired', 'failed'];

/** A queued job as the API shows it. */
export interface QueuedJob {
  queue_id: number;
  state: QueueState;
  labels: Labels;
  /** The labels as one text, `device=roku-ultra,room=lab2`: the name of its queue (the queue page per label set). */
  selector: string;
  priority: number;
  username: string;
  queued_at: string;
  queue_timeout_secs: number | null;
  expires_at: string | null;
  /** The run_tests body it starts with. */
  request: RunRequest;
  /** Once started: where and which job. */
  node_id: string | null;
  job_uid: string | null;
  /** Starts tried that the node could not take (busy, gone): the job went back to the queue each time. */
  attempts: number;
  last_error: string | null;
  ended_at: string | null;
  /** started, cancelled, queue_timeout, or the node's refusal. */
  end_reason: string | null;
  ended_by: string | null;
  /** Why it waits (queued only, when asked with explain). */
  waiting?: WaitReason | null;
}

/** A queue_jobs row as pg gives it. */
export interface QueueRow {
  queue_id: string;
  state: QueueState;
  labels: Labels;
  selector: string;
  priority: number;
  username: string;
  queued_at: Date;
  queue_timeout_secs: number | null;
  expires_at: Date | null;
  request: RunRequest;
  node_id: string | null;
  job_uid: string | null;
  attempts: number;
  last_error: string | null;
  ended_at: Date | null;
  end_reason: string | null;
  ended_by: string | null;
  /** Set while the job is being started on node_id (migration 17): the Idempotency-Key sent, and since when. */
  start_key: string | null;
  start_at: Date | null;
}

/** A waiting job pinned to a node while it is being started (dispatcher.ts): the key its run_tests carries. */
export interface PinnedStart {
  job: QueuedJob;
  node_id: string;
  key: string;
  /** How long since the start began, by the database clock. */
  age_ms: number;
}

export const presentRow = (r: QueueRow): QueuedJob => ({
  queue_id: Number(r.queue_id),
  state: r.state,
  labels: r.labels,
  selector: r.selector,
  priority: r.priority,
  username: r.username,
  queued_at: r.queued_at.toISOString(),
  queue_timeout_secs: r.queue_timeout_secs,
  expires_at: r.expires_at?.toISOString() ?? null,
  request: r.request,
  node_id: r.node_id,
  job_uid: r.job_uid,
  attempts: r.attempts,
  last_error: r.last_error,
  ended_at: r.ended_at?.toISOString() ?? null,
  end_reason: r.end_reason,
  ended_by: r.ended_by,
});

export const waitingOf = (j: Pick<QueuedJob, 'queue_id' | 'priority' | 'queued_at' | 'labels'>): WaitingJob => ({
  queue_id: j.queue_id,
  priority: j.priority,
  queued_at: Date.parse(j.queued_at),
  labels: j.labels,
});

/** Who asks: cancelling is for the user who queued the job, or an admin. */
export interface QueueCaller {
  user: string;
  admin: boolean;
}

export interface ListQuery {
  /** Only jobs queued with exactly these labels (one queue page). */
  selector?: Labels;
  /** Only these states (default: all). */
  states?: readonly QueueState[];
  /** Newest ended jobs are kept in the list up to this many (default 100, at most 1000); every waiting job is listed. */
  limit?: number;
}

const ORDER = 'priority DESC, queued_at, queue_id';

export class PgJobQueue {
  constructor(private readonly pool: pg.Pool) {}

  /** Queue a job (its body as POST /api/v2/jobs takes it) for `username`; refused at once if no node can ever take it. */
  async enqueue(body: unknown, username: string): Promise<QueuedJob> {
    const p = parseQueuedJob(body);
    checkSatisfiable(p.labels, await allNodeLabels(this.pool));
    const { rows } = await this.pool.query<QueueRow>(
      `INSERT INTO queue_jobs (username, labels, selector, priority, request, queue_timeout_secs, expires_at)
       VALUES ($1, $2, $3, $4, $5, $6, CASE WHEN $6::integer IS NULL THEN NULL ELSE now() + make_interval(secs => $6::integer) END)
       RETURNING *`,
      [username, JSON.stringify(p.labels), selectorText(p.labels), p.priority, JSON.stringify(p.run), p.queue_timeout_secs],
    );
    return presentRow(rows[0]!);
  }

  /** One job; not_found when there is none. */
  async get(queueId: number): Promise<QueuedJob> {
    const { rows } = await this.pool.query<QueueRow>('SELECT * FROM queue_jobs WHERE queue_id = $1', [checkId(queueId)]);
    if (!rows[0]) throw new FarmError('not_found', `no queued job ${queueId}; GET /api/v2/queue lists them`);
    return presentRow(rows[0]);
  }

  /** The waiting jobs (queue order), then the ended ones (newest first, up to `limit`). */
  async list(q: ListQuery = {}): Promise<QueuedJob[]> {
    const limit = Math.min(Math.max(q.limit ?? 100, 1), 1000);
    const states = q.states ?? QUEUE_STATES;
    const sel = q.selector ? selectorText(q.selector) : null;
    const where = `($1::text IS NULL OR selector = $1) AND state = ANY($2::text[])`;
    const waiting = states.includes('queued') ? (await this.pool.query<QueueRow>(`SELECT * FROM queue_jobs WHERE ${where} AND state = 'queued' ORDER BY ${ORDER}`, [sel, states])).rows : [];
    const rest = states.some((s) => s !== 'queued')
      ? (await this.pool.query<QueueRow>(`SELECT * FROM queue_jobs WHERE ${where} AND state <> 'queued' ORDER BY queue_id DESC LIMIT $3`, [sel, states, limit])).rows
      : [];
    return [...waiting, ...rest].map(presentRow);
  }

  /**
   * Every waiting job in queue order (the dispatcher's and explain's read). `skipLocked` (the dispatcher's): leave out
   * the jobs another dispatcher is starting right now (their rows locked FOR UPDATE), by taking the weakest row lock,
   * FOR KEY SHARE, released at once, with SKIP LOCKED; so a plan does not pick a job it cannot claim.
   */
  async waiting(o: { limit?: number; skipLocked?: boolean } = {}): Promise<QueuedJob[]> {
    const lock = o.skipLocked ? ' FOR KEY SHARE SKIP LOCKED' : '';
    const { rows } = await this.pool.query<QueueRow>(`SELECT * FROM queue_jobs WHERE state = 'queued' AND start_key IS NULL ORDER BY ${ORDER} LIMIT $1${lock}`, [
      o.limit ?? 10_000,
    ]);
    return rows.map(presentRow);
  }

  /** The waiting jobs being started on a node (pinned to it with a key; dispatcher.ts), oldest start first. */
  async pinned(): Promise<PinnedStart[]> {
    const { rows } = await this.pool.query<QueueRow & { age_ms: number }>(
      `SELECT *, (extract(epoch FROM now() - start_at) * 1000)::float8 AS age_ms FROM queue_jobs WHERE state = 'queued' AND start_key IS NOT NULL ORDER BY start_at`,
    );
    return rows.map((r) => ({ job: presentRow(r), node_id: r.node_id!, key: r.start_key!, age_ms: r.age_ms }));
  }

  /**
   * Cancel a waiting job. A job being started at this moment (its row locked by a dispatcher) is a conflict to retry;
   * a started job is a conflict naming the job to stop instead; an ended one is answered as it is (idempotent).
   */
  async cancel(queueId: number, by: QueueCaller): Promise<QueuedJob> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN');
      const { rows } = await client.query<QueueRow>('SELECT * FROM queue_jobs WHERE queue_id = $1 FOR UPDATE NOWAIT', [checkId(queueId)]).catch((e: unknown) => {
        if ((e as { code?: string }).code === '55P03') throw new FarmError('conflict', `queued job ${queueId} is being started on a node right now; look at it again in a moment`);
        throw e;
      });
      const row = rows[0];
      if (!row) throw new FarmError('not_found', `no queued job ${queueId}; GET /api/v2/queue lists them`);
      if (row.username !== by.user && !by.admin) throw new FarmError('forbidden', `queued job ${queueId} is ${row.username}'s: only they or an admin can cancel it`);
      if (row.state === 'started') throw new FarmError('conflict', `queued job ${queueId} has already started as job ${row.job_uid} on node ${row.node_id}: stop that job instead`);
      if (row.state === 'queued' && row.start_key !== null) {
        throw new FarmError('conflict', `queued job ${queueId} is being started on node ${row.node_id} right now; look at it again in a moment (stop the job if it started)`);
      }
      if (row.state !== 'queued') {
        await client.query('COMMIT');
        return presentRow(row);
      }
      const done = await client.query<QueueRow>(
        `UPDATE queue_jobs SET state = 'cancelled', ended_at = now(), end_reason = 'cancelled', ended_by = $2 WHERE queue_id = $1 RETURNING *`,
        [queueId, by.user],
      );
      await client.query('COMMIT');
      return presentRow(done.rows[0]!);
    } catch (e) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw e;
    } finally {
      client.release();
    }
  }

  /** End every waiting job whose queue_timeout_secs has passed (by the database clock; skipping one being started); returns them. */
  async expire(): Promise<QueuedJob[]> {
    const { rows } = await this.pool.query<QueueRow>(
      `UPDATE queue_jobs SET state = 'expired', ended_at = now(), end_reason = 'queue_timeout'
       WHERE queue_id IN (SELECT queue_id FROM queue_jobs WHERE state = 'queued' AND start_key IS NULL AND expires_at <= now() FOR UPDATE SKIP LOCKED)
       RETURNING *`,
    );
    return rows.map(presentRow);
  }

  /** Seconds until the next waiting job expires (by the database clock), or null when none has a timeout. */
  async nextExpiryInSecs(): Promise<number | null> {
    const { rows } = await this.pool.query<{ secs: number | null }>(
      `SELECT extract(epoch FROM min(expires_at) - now())::float8 AS secs FROM queue_jobs WHERE state = 'queued' AND start_key IS NULL AND expires_at IS NOT NULL`,
    );
    return rows[0]?.secs ?? null;
  }

  /**
   * The jobs with `waiting` filled in for the queued ones: why each waits, from every node's labels and
   * `availability` (NodeStates.availability(): what the portal decides of each node) and the other waiting jobs.
   */
  async explain(jobs: QueuedJob[], availability: ReadonlyMap<string, Availability>): Promise<QueuedJob[]> {
    if (!jobs.some((j) => j.state === 'queued')) return jobs.map((j) => ({ ...j, waiting: null }));
    const labels = await allNodeLabels(this.pool);
    const nodes: QueueNode[] = [...labels].map(([node_id, l]) => ({ node_id, labels: l, availability: availability.get(node_id) ?? { kind: 'offline', detail: 'not connected to the portal' } }));
    const waiting = (await this.waiting()).map(waitingOf);
    const why = (j: QueuedJob): WaitReason => {
      const base = explainWait(waitingOf(j), waiting, nodes);
      // Pinned to a node (its node_id set while queued): the start is under way, or its answer is asked for again.
      return j.node_id === null ? base : { ...base, kind: 'starting', position: 1, message: `being started on node ${j.node_id}` };
    };
    return jobs.map((j) => ({ ...j, waiting: j.state === 'queued' ? why(j) : null }));
  }
}

function checkId(id: number): number {
  if (!Number.isSafeInteger(id) || id < 1) throw new FarmError('not_found', `no queued job ${String(id)}: queue ids are whole numbers from 1`);
  return id;
}
