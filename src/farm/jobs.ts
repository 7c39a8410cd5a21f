/**
 * The farm's jobs table, kept from the nodes' events (job.started, run.started,
 * run.finished, job.exited), and the fault rule (docs/farm.md, "The portal and
 * the hub"):
 *
 * - A node that goes offline with a running job: the portal ends the job with
 *   the reason, and the run in flight becomes an `error` result saying why
 *   ("node <id> went offline: <reason>"), recorded through `onRunLost`
 *   (FarmResults.put, idempotent on result_id).
 * - The portal never reopens a job it ended. When the node returns, the
 *   welcome lists the ended jobs (`reconcile`), the node stops them, and its own restart recovery records the same result_id
 *   (the put replaces, never duplicates). Later events of an ended job change
 *   nothing here.
 *
 * Each row keeps the last Job object (status, start_time, end_time,
 * result_counts), so GET /api/v2/jobs/<uid> (and v1's) is answered from
 * PostgreSQL while the node is offline; with the request and the end reason,
 * the portal's job page of an offline node (src/farm/portal/web.ts).
 */
import type pg from 'pg';
import type { EventPayloads, EventType, FarmEvent, JobStartedData, RunStartedData } from '../core/events.js';
import type { ResultCounts, ResultRecord } from '../core/model.js';
import type { Logger } from '../core/ports.js';
import type { HubJobs } from './hub/index.js';
import { nodeEventOrder } from './protocol.js';
import { inTransaction } from './db/pool.js';
import { holdNode, NodeMoved, type Tenure } from './replicas/ownership.js';

/** The Job fields kept per row (the v2 Job object without job_uid and job_url, which are derived). */
export interface StoredJob {
  status: 'running' | 'exited';
  start_time: string;
  end_time: string | null;
  result_counts: ResultCounts;
  /**
   * The runs the node's own events announced (one per run.finished folded, each once): the results the job has
   * once its job.exited is folded after them, which the portal's read-your-writes hold waits for (not
   * result_counts.total, the test cases asked for). Absent in rows of an older portal. Not part of the Job object.
   */
  runs_finished?: number;
}

export interface FarmJobRow {
  job_uid: string;
  node_id: string;
  username: string;
  state: 'running' | 'exited';
  job: StoredJob;
  /** Why the portal ended it; null when the node did. */
  end_reason: string | null;
  /** job.started's fields (test cases, test pack, category, soak, remote, tags): the job page shows some. */
  request: Partial<JobStartedData>;
  /** The run in flight, null between runs and once the job ended. */
  current_run: { result_id: string; test_case: string; start_time: string } | null;
}

export interface FarmJobsOptions {
  pool: pg.Pool;
  logger: Logger;
  /** Records the run lost with an offline node (FarmResults.put). */
  onRunLost: (record: ResultRecord) => Promise<void>;
  /** Events of the portal's own making (the lost run's run.finished, the job.exited); the hub's emitter. */
  emit?: <T extends EventType>(type: T, nodeId: string, data: EventPayloads[T]) => void;
  /** Ended jobs listed in a welcome, newest first. */
  maxEndedJobs?: number;
}

/** A pool or a client in a transaction. */
export type Queryable = Pick<pg.ClientBase, 'query'>;

const zeroCounts = (): ResultCounts => ({ pass: 0, fail: 0, error: 0, total: 0 });

/**
 * The row has not yet been changed by this node event or a later one (`p` holds the event's {boot, n}; null for an
 * id of another form, which is always applied).
 */
const newer = (p: string) => `(${p}::bigint[] IS NULL OR last_node_event IS NULL OR last_node_event < ${p}::bigint[])`;

/** Writes one node event into the jobs table: whether it changed a row, undefined when it is not ours to keep. */
type JobEventWriter = (data: unknown, nodeId: string, at: ReturnType<typeof nodeEventOrder>, q: Queryable) => Promise<boolean | undefined>;

const changedRow = (r: { rowCount: number | null }) => (r.rowCount ?? 0) > 0;

const jobEventWriters: Partial<Record<EventType, JobEventWriter>> = {
  async 'job.started'(data, nodeId, at, q) {
    const d = data as JobStartedData & { node_id: string };
    if (!d.job_uid.startsWith(`/${nodeId}/`)) return undefined; // ids start with their node's id; anything else is not ours to keep
    const job: StoredJob = { status: 'running', start_time: d.start_time, end_time: null, result_counts: zeroCounts(), runs_finished: 0 };
    const { node_id: _n, ...request } = d;
    // DO NOTHING: a job the portal already knows (and maybe ended) is never reopened.
    const r = await q.query(
      `INSERT INTO jobs (job_uid, node_id, username, state, request, created_at, job, last_node_event)
       VALUES ($1, $2, $3, 'running', $4, $5, $6, $7) ON CONFLICT (job_uid) DO NOTHING`,
      [d.job_uid, nodeId, d.username, JSON.stringify(request), d.start_time, JSON.stringify(job), at],
    );
    return changedRow(r);
  },
  async 'run.started'(data, nodeId, at, q) {
    const d = data as RunStartedData;
    const r = await q.query(
      `UPDATE jobs SET current_run = $2, last_node_event = coalesce($4, last_node_event)
       WHERE job_uid = $1 AND node_id = $3 AND state = 'running' AND ${newer('$4')}`,
      [d.job_uid, JSON.stringify({ result_id: d.result_id, test_case: d.test_case, start_time: d.start_time }), nodeId, at],
    );
    return changedRow(r);
  },
  async 'run.finished'(data, nodeId, at, q) {
    const d = data as EventPayloads['run.finished'];
    const r = await q.query(
      `UPDATE jobs SET
         current_run = CASE WHEN current_run->>'result_id' = $2 THEN NULL ELSE current_run END,
         job = jsonb_set(
                 jsonb_set(jsonb_set(job, ARRAY['result_counts', $3], to_jsonb(coalesce((job->'result_counts'->>$3)::int, 0) + 1)),
                           '{result_counts,total}', to_jsonb(coalesce((job->'result_counts'->>'total')::int, 0) + 1)),
                 '{runs_finished}', to_jsonb(coalesce((job->>'runs_finished')::int, 0) + 1)),
         last_node_event = coalesce($5, last_node_event)
       WHERE job_uid = $1 AND node_id = $4 AND state = 'running' AND ${newer('$5')}`,
      [d.job_uid, d.result_id, d.result, nodeId, at],
    );
    return changedRow(r);
  },
  async 'job.exited'(data, nodeId, at, q) {
    const d = data as EventPayloads['job.exited'];
    const patch = { status: 'exited', end_time: d.end_time, result_counts: d.result_counts };
    // A job still running here, or one closed by the node's own word. One the portal ended (end_reason set)
    // keeps the portal's account, and the stale event is dropped (false).
    const r = await q.query(
      `UPDATE jobs SET state = 'exited', ended_at = coalesce($2::timestamptz, now()), current_run = NULL, job = coalesce(job, '{}') || $3::jsonb,
              last_node_event = coalesce($5, last_node_event)
       WHERE job_uid = $1 AND node_id = $4 AND (state = 'running' OR end_reason IS NULL) AND ${newer('$5')}`,
      [d.job_uid, d.end_time, JSON.stringify(patch), nodeId, at],
    );
    return changedRow(r);
  },
};

export class FarmJobs implements HubJobs {
  constructor(private readonly o: FarmJobsOptions) {}

  /**
   * Keep a node event, in the caller's transaction (the fold, fold.ts); false when it is about a job the portal
   * ended itself (the event is stale: dropped).
   */
  async record(e: FarmEvent, q: Queryable = this.o.pool): Promise<boolean> {
    const nodeId = e.data.node_id;
    const jobUid = (e.data as { job_uid?: unknown }).job_uid;
    const changed = await this.apply(e, nodeId, q);
    if (changed !== false || typeof jobUid !== 'string') return true;
    const { rowCount } = await q.query('SELECT 1 FROM jobs WHERE job_uid = $1 AND node_id = $2 AND end_reason IS NOT NULL', [jobUid, nodeId]);
    return (rowCount ?? 0) === 0;
  }

  /** Apply one event; false when it changed no row (an unknown or ended job), undefined when it is not a job event. */
  private async apply(e: FarmEvent, nodeId: string, q: Queryable): Promise<boolean | undefined> {
    const write = jobEventWriters[e.type];
    if (!write) return undefined;
    // The event's place among the node's events: a row already changed by it (or a later one) is left alone, so
    // an event the node sends again (at least once, docs/farm.md "The outbox") counts once.
    return write(e.data, nodeId, nodeEventOrder(e.id), q);
  }

  /**
   * The fault rule. With a tenure (replicas "many"), only while the node is still owned as it says: false, and
   * nothing written, when the node moved to another replica (src/farm/replicas/ownership.ts).
   */
  async nodeOffline(nodeId: string, reason: string, tenure?: Tenure): Promise<boolean> {
    // undefined: the node moved to another replica, and nothing was written.
    const ended = await inTransaction(this.o.pool, async (client) => {
      try {
        await holdNode(client, nodeId, tenure);
      } catch (e) {
        if (!(e instanceof NodeMoved)) throw e;
        return undefined;
      }
      return endRunningJobs(client, nodeId, reason);
    });
    if (!ended) {
      this.o.logger.info({ node: nodeId, reason }, 'the fault rule left a node alone: it moved to another portal replica');
      return false;
    }
    await this.announceEnded(nodeId, reason, ended);
    return true;
  }

  /** Records the runs lost with an offline node and tells the listeners of the runs and jobs it ended. */
  private async announceEnded(nodeId: string, reason: string, { lost, exited }: EndedJobs): Promise<void> {
    if (lost.length > 0) {
      try {
        for (const r of lost) await this.o.onRunLost(r);
      } catch (e) {
        // The node's own restart recovery records the same result_id when it returns.
        this.o.logger.error({ err: e, node: nodeId }, 'recording the run lost with an offline node failed');
      }
    }
    for (const r of lost) {
      this.o.emit?.('run.finished', nodeId, {
        job_uid: r.job_uid,
        result_id: r.result_id,
        test_case: r.test_case,
        result: 'error',
        failure_reason: r.failure_reason,
        infrastructure_error: null,
        start_time: r.start_time,
        end_time: r.end_time,
        duration: r.duration,
      });
    }
    for (const j of exited) this.o.emit?.('job.exited', nodeId, j);
    if (exited.length > 0) this.o.logger.warn({ node: nodeId, jobs: exited.map((j) => j.job_uid), lost_runs: lost.length, reason }, 'jobs ended: their node went offline');
  }

  /**
   * The node is back: the jobs of it the portal has ended (the welcome's ended_jobs). A job the node finished
   * while the portal could not hear it is closed by its job.exited, which the node's stream replays from its
   * journal after the welcome (docs/farm.md, "The node stream"), not by the hello.
   */
  async reconcile(nodeId: string): Promise<string[]> {
    const { rows } = await this.o.pool.query<{ job_uid: string }>(
      `SELECT job_uid FROM jobs WHERE node_id = $1 AND end_reason IS NOT NULL ORDER BY ended_at DESC LIMIT $2`,
      [nodeId, this.o.maxEndedJobs ?? 20],
    );
    return rows.map((r) => r.job_uid);
  }

  async nodesWithRunningJobs(): Promise<string[]> {
    const { rows } = await this.o.pool.query<{ node_id: string }>(`SELECT DISTINCT node_id FROM jobs WHERE state = 'running'`);
    return rows.map((r) => r.node_id);
  }

  async get(jobUid: string): Promise<FarmJobRow | undefined> {
    const { rows } = await this.o.pool.query<FarmJobRow>(`SELECT job_uid, node_id, username, state, job, end_reason, request, current_run FROM jobs WHERE job_uid = $1`, [jobUid]);
    return rows[0];
  }
}

/** What the fault rule ended: the runs in flight (now `error` results) and the jobs. */
interface EndedJobs {
  lost: ResultRecord[];
  exited: { job_uid: string; end_time: string; result_counts: ResultCounts }[];
}

type RunningJobRow = Pick<FarmJobRow, 'job_uid' | 'username' | 'request' | 'current_run'> & { job: StoredJob | null; now: Date };

/** Ends, in the caller's transaction, every job of the node still running; its run in flight becomes an `error`. */
async function endRunningJobs(client: Queryable, nodeId: string, reason: string): Promise<EndedJobs> {
  const ended: EndedJobs = { lost: [], exited: [] };
  const { rows } = await client.query<RunningJobRow>(
    `SELECT job_uid, username, request, current_run, job, now() AS now FROM jobs WHERE node_id = $1 AND state = 'running' FOR UPDATE`,
    [nodeId],
  );
  for (const row of rows) {
    const end = row.now.toISOString();
    const counts = { ...zeroCounts(), ...row.job?.result_counts };
    const run = row.current_run;
    if (run) {
      ended.lost.push(lostRun(row, run, end, `node ${nodeId} went offline: ${reason}`));
      counts.error += 1;
      counts.total += 1;
    }
    // The lost run is a result too (put by the caller, as the node's recovery puts it again).
    const runs = typeof row.job?.runs_finished === 'number' ? { runs_finished: row.job.runs_finished + (run ? 1 : 0) } : {};
    const job: StoredJob = { status: 'exited', start_time: row.job?.start_time ?? end, end_time: end, result_counts: counts, ...runs };
    await client.query(`UPDATE jobs SET state = 'exited', ended_at = $2, end_reason = $3, current_run = NULL, job = $4 WHERE job_uid = $1`, [
      row.job_uid,
      end,
      reason,
      JSON.stringify(job),
    ]);
    ended.exited.push({ job_uid: row.job_uid, end_time: end, result_counts: counts });
  }
  return ended;
}

/** The `error` result of a run in flight when its node went offline. */
function lostRun(row: RunningJobRow, run: NonNullable<FarmJobRow['current_run']>, end: string, why: string): ResultRecord {
  const r = row.request;
  return {
    result_id: run.result_id,
    job_uid: row.job_uid,
    test_case: run.test_case,
    test_pack_sha: r.test_pack_sha ?? '',
    test_pack_branch: r.test_pack_branch ?? null,
    category: r.category ?? '',
    username: row.username,
    tags: r.tags ?? {},
    start_time: run.start_time,
    end_time: end,
    duration: Math.max(0, (Date.parse(end) - Date.parse(run.start_time)) / 1000),
    result: 'error',
    failure_reason: why,
    traceback: null,
    infrastructure_error: null,
  };
}

/** The Job object of a row (v2, or v1 for `GET /api/v1/jobs/<uid>`: only job_url differs), with URLs on the portal. */
export function presentFarmJob(row: Pick<FarmJobRow, 'job_uid' | 'state' | 'job'>, base: string, v: 'v1' | 'v2' = 'v2') {
  const j = row.job;
  return {
    job_uid: row.job_uid,
    job_url: `${base}/api/${v}/jobs${row.job_uid}`,
    status: row.state,
    start_time: j.start_time,
    end_time: j.end_time,
    result_counts: { ...zeroCounts(), ...j.result_counts },
  };
}
