/**
 * The queue at scale, read back and judged (test/farm/queue-scale.test.ts, bench/queue-bench.ts): each queued job's
 * row (queue_jobs) beside the job it became (the portal's `jobs` row: the node's own start_time and end_time), and
 * what the queue's rule (docs/queue.md, "The order, and who goes where") says of them, from the order of events only.
 *
 * Times: `queued_at` and `claimed_at` are the database's (claimed_at is the queue row's start_at, `now()` of the
 * transaction that claimed it and pinned it to its node, before the node was asked); `start` and `end` are the node's
 * (its Job's start_time and end_time). Portal, database and nodes share one clock here (one machine).
 */
import type pg from 'pg';
import { waitFor } from './wait.js';

export interface QueueRun {
  queue_id: number;
  /** The queue it waited in (its labels as one text): here, its pool. */
  selector: string;
  priority: number;
  state: string;
  queued_at: number;
  /** When the dispatcher claimed it (ms since the epoch, with microseconds); null while waiting or if it never started. */
  claimed_at: number | null;
  attempts: number;
  node_id: string | null;
  job_uid: string | null;
  /** The node's start_time and end_time of its job (ms), null until known. */
  start: number | null;
  end: number | null;
}

/** Every queued job with its job's times. */
export async function readQueueRuns(db: pg.Pool): Promise<QueueRun[]> {
  const { rows } = await db.query<{
    queue_id: string;
    selector: string;
    priority: number;
    state: string;
    queued_ms: number;
    claimed_ms: number | null;
    attempts: number;
    node_id: string | null;
    job_uid: string | null;
    start_time: string | null;
    end_time: string | null;
  }>(
    `SELECT q.queue_id, q.selector, q.priority, q.state, q.attempts, q.node_id, q.job_uid,
            extract(epoch FROM q.queued_at)::float8 * 1000 AS queued_ms,
            CASE WHEN q.state = 'started' THEN extract(epoch FROM q.start_at)::float8 * 1000 END AS claimed_ms,
            j.job->>'start_time' AS start_time, j.job->>'end_time' AS end_time
       FROM queue_jobs q LEFT JOIN jobs j ON j.job_uid = q.job_uid ORDER BY q.queue_id`,
  );
  const ms = (t: string | null) => (t ? Date.parse(t) : null);
  return rows.map((r) => ({
    queue_id: Number(r.queue_id),
    selector: r.selector,
    priority: r.priority,
    state: r.state,
    queued_at: r.queued_ms,
    claimed_at: r.claimed_ms,
    attempts: r.attempts,
    node_id: r.node_id,
    job_uid: r.job_uid,
    start: ms(r.start_time),
    end: ms(r.end_time),
  }));
}

/** How many jobs the portal knows of on these nodes (a job run twice would be two). */
export async function jobsOnNodes(db: pg.Pool, nodes: readonly string[]): Promise<number> {
  const { rows } = await db.query<{ n: string }>('SELECT count(*) AS n FROM jobs WHERE node_id = ANY($1::text[])', [nodes]);
  return Number(rows[0]!.n);
}

/** The queue's order: highest priority first, then oldest, then the smaller id. Negative when `a` goes first. */
export const queueOrder = (a: QueueRun, b: QueueRun): number => b.priority - a.priority || a.queued_at - b.queued_at || a.queue_id - b.queue_id;

/** A job that started, ran and ended, with every time known. */
export type DoneRun = QueueRun & { claimed_at: number; node_id: string; job_uid: string; start: number; end: number };
export const isDone = (r: QueueRun): r is DoneRun => r.state === 'started' && r.claimed_at !== null && r.node_id !== null && r.start !== null && r.end !== null;

const byPool = <T extends QueueRun>(runs: readonly T[]): Map<string, T[]> => {
  const out = new Map<string, T[]>();
  for (const r of runs) out.set(r.selector, [...(out.get(r.selector) ?? []), r]);
  return out;
};

/** One job that went before another the rule puts ahead of it. */
export interface OutOfOrder {
  pool: string;
  /** The job ahead in the order, and the one that went first. */
  ahead: number;
  behind: number;
  /** The job ahead started only after the one behind had ended: it waited a whole run (not two starts of one pass). */
  waitedWholeRun: boolean;
}

/**
 * The pairs of one pool where a job behind in the order started (node start_time) before one ahead of it that was
 * already queued then. Starts planned in one pass begin together and may answer in either order: those are the
 * pairs whose job ahead started while the one behind was still running (`waitedWholeRun` false); a job ahead that
 * started only after the one behind had ended waited while a node took a job behind it: against the rule.
 */
export function outOfOrder(runs: readonly QueueRun[]): OutOfOrder[] {
  const out: OutOfOrder[] = [];
  for (const [pool, list] of byPool(runs.filter(isDone))) {
    for (const ahead of list) {
      for (const behind of list) {
        if (queueOrder(ahead, behind) >= 0 || ahead.queued_at >= behind.claimed_at || behind.start >= ahead.start) continue;
        out.push({ pool, ahead: ahead.queue_id, behind: behind.queue_id, waitedWholeRun: ahead.start >= behind.end });
      }
    }
  }
  return out;
}

/** A node left without a job while its pool's jobs waited, long enough for another node to run one whole. */
export interface IdleNode {
  pool: string;
  node_id: string;
  /** The end of the node's job (node clock) and its next claim (null: it never got another). */
  freedAt: number;
  nextClaim: number | null;
  /** The whole job another node of the pool ran meanwhile, and a job of the pool that waited through it. */
  meanwhile: number;
  waiting: number;
}

/**
 * Exact, not timed: a node n of a pool freed at T (its job's end) and next claimed at C. If another node of the pool
 * was given a job after T that ran to its end before C, while a job of the pool queued before T was still unclaimed
 * at that end, then n sat free while a job it matched waited for as long as a whole run elsewhere.
 */
export function idleNodes(runs: readonly QueueRun[]): IdleNode[] {
  const out: IdleNode[] = [];
  for (const [pool, list] of byPool(runs.filter(isDone))) {
    for (const [node, mine] of nodesOf(list)) {
      mine.forEach((job, i) => {
        const next = mine[i + 1]?.claimed_at ?? null;
        const x = list.find((o) => o.node_id !== node && o.claimed_at > job.end && o.end < (next ?? Infinity));
        const y = x && list.find((o) => o.queued_at < job.end && o.claimed_at > x.end);
        if (x && y) out.push({ pool, node_id: node, freedAt: job.end, nextClaim: next, meanwhile: x.queue_id, waiting: y.queue_id });
      });
    }
  }
  return out;
}

/** Each node's jobs in the order it ran them. */
function nodesOf(list: readonly DoneRun[]): Map<string, DoneRun[]> {
  const out = new Map<string, DoneRun[]>();
  for (const r of list) out.set(r.node_id, [...(out.get(r.node_id) ?? []), r]);
  for (const l of out.values()) l.sort((a, b) => a.start - b.start);
  return out;
}

/** A node freed while a job of its pool waited, and how long until its next job. */
export interface FreedGap {
  node_id: string;
  /** The node's job end, and its next job's start (or, never given another, the last claim of a job then waiting). */
  from: number;
  to: number;
  /** Its job's end to its next job's start, both the node's (ms); the whole gap. */
  gapMs: number;
  /** The portal's part: the end to the dispatcher's claim of the next job. */
  claimMs: number;
  /** The node's part: the claim to the next job's start_time (the run_tests forwarded, the test pack resolved, the job saved). */
  answerMs: number;
  /** The node got no other job: the gap runs to the last claim of a job that was waiting when it freed. */
  neverAgain: boolean;
}

/** The gaps "node freed -> its next queued job started", counted only when a job of its pool was waiting at the end. */
export function freedGaps(runs: readonly QueueRun[]): FreedGap[] {
  const out: FreedGap[] = [];
  for (const list of byPool(runs.filter(isDone)).values()) {
    for (const [node, mine] of nodesOf(list)) {
      mine.forEach((job, i) => {
        const waiting = list.filter((o) => o.queued_at <= job.end && o.claimed_at > job.end);
        if (waiting.length === 0) return;
        const next = mine[i + 1];
        if (next) {
          out.push({ node_id: node, from: job.end, to: next.start, gapMs: next.start - job.end, claimMs: next.claimed_at - job.end, answerMs: next.start - next.claimed_at, neverAgain: false });
        } else {
          const to = Math.max(...waiting.map((o) => o.claimed_at));
          out.push({ node_id: node, from: job.end, to, gapMs: to - job.end, claimMs: to - job.end, answerMs: 0, neverAgain: true });
        }
      });
    }
  }
  return out;
}

/** How jobs are queued: `POST /api/v2/jobs` at the portal, or (a portal without that endpoint) PgJobQueue on its database. */
export interface Enqueuer {
  via: 'http' | 'store';
  enqueue(body: Record<string, unknown>): Promise<number>;
}

/**
 * POST /api/v2/jobs when the portal has it (an empty body is answered 400, not 404), else PgJobQueue.enqueue on the
 * portal's database for `user` (the same checks; the dispatcher must then be wired by the caller).
 */
export async function enqueuer(o: { url: string; token: string; db: pg.Pool; user: string }): Promise<Enqueuer> {
  const post = (body: unknown) =>
    fetch(`${o.url}/api/v2/jobs`, { method: 'POST', headers: { authorization: `token ${o.token}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const probe = await post({});
  await probe.arrayBuffer();
  if (probe.status !== 404) {
    return {
      via: 'http',
      async enqueue(body) {
        let res = await post(body);
        // A client over the portal's rate limit waits as told (Retry-After, seconds) and sends it again, as CI does.
        while (res.status === 429) {
          await res.arrayBuffer();
          await new Promise((r) => setTimeout(r, Number(res.headers.get('retry-after') ?? 1) * 1000));
          res = await post(body);
        }
        const text = await res.text();
        if (res.status < 200 || res.status > 299) throw new Error(`POST /api/v2/jobs answered ${res.status}: ${text.slice(0, 300)}`);
        return (JSON.parse(text) as { queue_id: number }).queue_id;
      },
    };
  }
  const { PgJobQueue } = await import('../../src/farm/queue/store.js');
  const queue = new PgJobQueue(o.db);
  return { via: 'store', enqueue: async (body) => (await queue.enqueue(body, o.user)).queue_id };
}

/**
 * Put nodes in maintenance (or take them out) through the portal, as an administrator. A node the portal cannot reach
 * at that moment (503: offline for a missed heartbeat on a loaded machine) is asked again until it answers.
 */
export async function setMaintenance(url: string, adminToken: string, nodes: readonly string[], on: boolean): Promise<void> {
  for (const id of nodes) {
    const ask = async () => {
      const res = await fetch(`${url}/api/v2/nodes/${id}/maintenance`, {
        method: 'POST',
        headers: { authorization: `token ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify(on ? { on: true, message: 'holding the pool while its jobs are queued' } : { on: false }),
      });
      const text = await res.text();
      if (res.status === 503) return false;
      if (res.status !== 200) throw new Error(`maintenance ${on ? 'on' : 'off'} for ${id} answered ${res.status}: ${text.slice(0, 300)}`);
      return true;
    };
    if (!(await ask())) await waitFor(ask, { what: `node ${id} to answer its maintenance ${on ? 'on' : 'off'}`, timeoutMs: 120_000, maxIntervalMs: 1000 });
  }
}

/** The portal's node list says every one of `nodes` is in maintenance (GET /api/v2/nodes). */
export async function allInMaintenance(url: string, token: string, nodes: readonly string[]): Promise<boolean> {
  const res = await fetch(`${url}/api/v2/nodes`, { headers: { authorization: `token ${token}` } });
  if (res.status !== 200) return false;
  const list = (await res.json()) as { node_id: string; maintenance?: unknown }[];
  return nodes.every((id) => list.find((n) => n.node_id === id)?.maintenance);
}

/** A deterministic mix of priorities (0-100) for job `i`: mostly the default, some urgent, some background. */
export const mixedPriority = (i: number): number => [50, 90, 10, 50, 70, 30, 100, 0, 50, 20][i % 10]!;
