/**
 * The farm's results index in PostgreSQL: every node's result records, queried
 * with the same filter grammar, sort and limit as a single node's in-memory
 * index (src/storage/results/memory-index.ts). The filter is parsed and
 * compiled once by src/core/filter.ts; this file says how its tests read the
 * table, as parameterised SQL (values only ever travel as parameters).
 */
import { kindOfRecord } from '../core/infrastructure.js';
import pg from 'pg';
import type { FarmWakeups } from './wakeups.js';
import { lowerCode } from '../core/glob.js';
import { compileFilter, type FilterTarget, type FilterTerm } from '../core/filter.js';
import { jobNumber, type ResultQuery, type SortField } from '../core/query.js';
import type { ResultRecord, ResultSummaryFields } from '../core/model.js';

/** Rows per INSERT: one statement, one parameter per column (arrays through unnest). */
const BATCH = 5000;

/** Separator of the lower-cased fields in the `search` column. */
const SEP = '\u001f';

const COLUMNS = `result_id, job_uid, test_case, test_pack_sha, test_pack_branch, category, username, tags,
  start_time, end_time, duration, result, failure_reason, traceback, infrastructure_error`;

/**
 * What a list answer (the spec's Result summary) needs, in `querySummaries`: no tags, traceback or
 * other long column, and the times as PostgreSQL's text (made ISO by `isoFromPg`).
 */
const SUMMARY_COLUMNS = 'result_id, job_uid, start_time, end_time, test_case, test_pack_sha, result, failure_reason';

/** Every column as the server's text: no type parser runs (`querySummaries` converts the times itself). */
const RAW_TEXT: pg.CustomTypesConfig = { getTypeParser: () => (text: string) => text };

/** pg's own timestamptz parser: what `query` gives a record's times with (then `toISOString`). */
const parseTimestamptz = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (text: string) => Date;

/** A timestamptz as the server writes it in a UTC session (DateStyle ISO): `2026-11-23 09:19:15.123456+00`. */
const PG_UTC_TIME = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d)(?:\.(\d{1,6}))?\+00$/;

/**
 * A timestamptz's text to the record's ISO form, exactly as pg's parser and `Date.toISOString`
 * give it (milliseconds, the rest truncated): by string from the common form, else (another
 * session time zone, a year past 9999 or BC) through that parser and `toISOString` themselves.
 */
export function isoFromPg(text: string): string {
  const m = PG_UTC_TIME.exec(text);
  if (!m) return parseTimestamptz(text).toISOString();
  return `${m[1]}T${m[2]}.${((m[3] ?? '') + '000').slice(0, 3)}Z`;
}

/** The node id a result belongs to: the first segment of its job_uid (`/<node>/<hex>/<n>`). */
export function nodeIdOf(r: Pick<ResultRecord, 'job_uid'>): string {
  return r.job_uid.split('/')[1] ?? '';
}

/** Lower case exactly as the in-memory free-text search does (one UTF-16 unit at a time, glob.ts). */
export function lowerLikeMemory(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) out += String.fromCharCode(lowerCode(s.charCodeAt(i)));
  return out;
}

const searchText = (r: ResultRecord): string =>
  [r.test_case, r.failure_reason ?? '', r.category, r.result_id].map(lowerLikeMemory).join(SEP);

/** `*` glob to a LIKE pattern: `%`, `_` and `\` escaped with `\`, `*` becomes `%`. */
export function globToLike(glob: string): string {
  return glob.split('*').map(escapeLike).join('%');
}
export const escapeLike = (s: string): string => s.replace(/[\\%_]/g, (c) => '\\' + c);

export class FarmResults {
  private readonly putListeners = new Set<(jobUids: ReadonlySet<string>) => void>();

  constructor(
    private readonly pool: pg.Pool,
    /** Replicas: each put is told to the others (`result_stored` on the farmhand channel), whose listeners hear it too. */
    private readonly wakeups?: FarmWakeups,
  ) {
    wakeups?.on('result_stored', (w) => {
      if (w.from === wakeups.id || !Array.isArray(w.job_uids)) return;
      const jobs = new Set(w.job_uids.filter((u): u is string => typeof u === 'string'));
      for (const fn of [...this.putListeners]) fn(jobs);
    });
  }

  /**
   * Called after each `put` in this process, or on another replica (with `wakeups`), with the job uids it
   * wrote (the portal's read-your-writes hold wakes on it instead of polling). Returns the unsubscribe.
   */
  onPut(fn: (jobUids: ReadonlySet<string>) => void): () => void {
    this.putListeners.add(fn);
    return () => this.putListeners.delete(fn);
  }

  /**
   * Insert or replace records, in batches. Idempotent on result_id: uploading
   * a result again replaces it (as the node's own index does), never duplicates.
   */
  async put(records: readonly ResultRecord[]): Promise<void> {
    await this.putIn(this.pool, records);
    this.notePut(records);
  }

  /** `put` in the caller's transaction (the node stream's fold); call `notePut` once it committed. */
  async putIn(q: Pick<pg.ClientBase, 'query'>, records: readonly ResultRecord[]): Promise<void> {
    for (let i = 0; i < records.length; i += BATCH) await this.putBatch(q, records.slice(i, i + BATCH));
  }

  /** Tell the put listeners of records now committed. */
  notePut(records: readonly ResultRecord[]): void {
    if (records.length === 0) return;
    const jobs = new Set(records.map((r) => r.job_uid));
    // The other replicas, after the commit: a few job uids per notification (a payload holds at most 8000 bytes).
    const uids = [...jobs];
    for (let i = 0; this.wakeups && i < uids.length; i += 20) void this.wakeups.notify('result_stored', { job_uids: uids.slice(i, i + 20) });
    for (const fn of [...this.putListeners]) fn(jobs);
  }

  private async putBatch(q: Pick<pg.ClientBase, 'query'>, batch: readonly ResultRecord[]): Promise<void> {
    // One statement may not touch a row twice: the last copy of an id in the batch wins.
    const unique = [...new Map(batch.map((r) => [r.result_id, r])).values()];
    const col = <T>(f: (r: ResultRecord) => T): T[] => unique.map(f);
    const num = (r: ResultRecord): number | null => {
      const n = jobNumber(r.job_uid);
      return Number.isFinite(n) ? n : null;
    };
    await q.query(
      `INSERT INTO results (${COLUMNS}, node_id, job_number, search)
       SELECT r.result_id, r.job_uid, r.test_case, r.test_pack_sha, r.test_pack_branch, r.category, r.username,
              r.tags::jsonb, r.start_time, r.end_time, r.duration, r.result::outcome, r.failure_reason,
              r.traceback, r.infrastructure_error, r.node_id, r.job_number, r.search
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                   $8::text[], $9::timestamptz[], $10::timestamptz[], $11::float8[], $12::text[], $13::text[],
                   $14::text[], $15::text[], $16::text[], $17::float8[], $18::text[])
         AS r(result_id, job_uid, test_case, test_pack_sha, test_pack_branch, category, username, tags,
              start_time, end_time, duration, result, failure_reason, traceback, infrastructure_error, node_id,
              job_number, search)
       ON CONFLICT (result_id) DO UPDATE SET
         job_uid = EXCLUDED.job_uid, test_case = EXCLUDED.test_case, test_pack_sha = EXCLUDED.test_pack_sha,
         test_pack_branch = EXCLUDED.test_pack_branch, category = EXCLUDED.category, username = EXCLUDED.username,
         tags = EXCLUDED.tags, start_time = EXCLUDED.start_time, end_time = EXCLUDED.end_time,
         duration = EXCLUDED.duration, result = EXCLUDED.result, failure_reason = EXCLUDED.failure_reason,
         traceback = EXCLUDED.traceback, infrastructure_error = EXCLUDED.infrastructure_error, node_id = EXCLUDED.node_id, job_number = EXCLUDED.job_number,
         search = EXCLUDED.search`,
      [
        col((r) => r.result_id), col((r) => r.job_uid), col((r) => r.test_case), col((r) => r.test_pack_sha),
        col((r) => r.test_pack_branch), col((r) => r.category), col((r) => r.username),
        col((r) => JSON.stringify(r.tags ?? {})), col((r) => r.start_time), col((r) => r.end_time),
        col((r) => r.duration), col((r) => r.result), col((r) => r.failure_reason), col((r) => r.traceback),
        col((r) => kindOfRecord(r)), col(nodeIdOf), col(num), col(searchText),
      ],
    );
  }

  /** Delete records by id (retention, or a node's deletion); returns how many went. */
  async delete(ids: readonly string[]): Promise<number> {
    const res = await this.pool.query('DELETE FROM results WHERE result_id = ANY($1::text[])', [ids]);
    return res.rowCount ?? 0;
  }

  /** Retention: delete the records that started before `cutoff` (of one node, if given). */
  async deleteStartedBefore(cutoff: Date, nodeId?: string): Promise<number> {
    const res = nodeId === undefined
      ? await this.pool.query('DELETE FROM results WHERE start_time < $1', [cutoff])
      : await this.pool.query('DELETE FROM results WHERE start_time < $1 AND node_id = $2', [cutoff, nodeId]);
    return res.rowCount ?? 0;
  }

  /** Retention: the ids of the `n` results that started first (walks `results_date`). */
  async oldest(n: number): Promise<string[]> {
    if (n <= 0) return [];
    const res = await this.pool.query<{ result_id: string }>('SELECT result_id FROM results ORDER BY start_time, result_id LIMIT $1', [n]);
    return res.rows.map((r) => r.result_id);
  }

  async get(resultId: string): Promise<ResultRecord | undefined> {
    const res = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM results WHERE result_id = $1`, [resultId]);
    return res.rows[0] ? toRecord(res.rows[0]) : undefined;
  }

  async count(): Promise<number> {
    const res = await this.pool.query<{ n: string }>('SELECT count(*) AS n FROM results');
    return Number(res.rows[0]!.n);
  }

  /** Filter, sort and cap, as MemoryIndex.query answers the same ResultQuery. */
  async query(q: ResultQuery): Promise<ResultRecord[]> {
    if (!q.terms) throw new Error('FarmResults.query needs the parsed terms (parseResultQuery sets them)');
    const limit = Math.max(0, q.limit);
    if (limit === 0) return [];
    const { sql, params } = compileQuery(q.terms, q.sort, limit);
    const res = await this.pool.query<Row>(sql, params);
    return res.rows.map(toRecord);
  }

  /**
   * `query`'s rows with only the fields of the spec's Result summary (presentResultSummary), for
   * the list answers: the same SQL selecting 8 columns instead of 15, rows as arrays, no type
   * parsing (the times converted by `isoFromPg`). At 2,000 rows this is about half of `query`'s time
   * in Node (docs/farm.md, "The results index").
   */
  async querySummaries(q: ResultQuery): Promise<ResultSummaryFields[]> {
    if (!q.terms) throw new Error('FarmResults.querySummaries needs the parsed terms (parseResultQuery sets them)');
    const limit = Math.max(0, q.limit);
    if (limit === 0) return [];
    const { sql, params } = compileQuery(q.terms, q.sort, limit, SUMMARY_COLUMNS);
    const res = await this.pool.query<string[]>({ text: sql, values: params, rowMode: 'array', types: RAW_TEXT });
    return res.rows.map((r) => ({
      result_id: r[0]!, job_uid: r[1]!, start_time: isoFromPg(r[2]!), end_time: isoFromPg(r[3]!), test_case: r[4]!,
      test_pack_sha: r[5]!, result: r[6] as ResultRecord['result'], failure_reason: r[7] ?? null,
    }));
  }
}

/** The SQL of one query; exported for tests and EXPLAIN. */
export function compileQuery(terms: readonly FilterTerm[], sort: ResultQuery['sort'], limit: number, columns = COLUMNS): { sql: string; params: unknown[] } {
  const params: unknown[] = [];
  const p = (v: unknown): string => {
    params.push(v);
    return `$${params.length}`;
  };
  const where = compileFilter(terms, sqlTests(p))!;
  const dir = sort.dir === 'asc' ? 'ASC' : 'DESC';
  const order = [...(PRIMARY_SQL[sort.field] ? [`${PRIMARY_SQL[sort.field]} ${dir}`] : []), `start_time ${dir}`, `result_id ${dir}`];
  const sql = `SELECT ${columns} FROM results${where ? ` WHERE ${where}` : ''} ORDER BY ${order.join(', ')} LIMIT ${p(limit)}`;
  return { sql, params };
}

const PRIMARY_SQL: Record<SortField, string | undefined> = {
  date: undefined,
  duration: 'duration',
  job: 'job_number',
  testcase: 'test_case',
  category: 'category',
  result: 'result', // an enum declared pass, fail, error: its order is the rank
};

/** How the grammar's tests read the results table (core/filter.ts says which term tests which); '' tests nothing. */
function sqlTests(p: (v: unknown) => string): FilterTarget<string> {
  return {
    equals: (field, value) => `${field} = ${p(value)}`,
    glob: (field, pattern) => `${field} LIKE ${p(globToLike(pattern))} ESCAPE '\\'`,
    result: (value) => `result = ${p(value)}::outcome`,
    startedIn: (lo, hi) => {
      const parts = [...(lo !== undefined ? [`start_time >= ${p(lo)}::timestamptz`] : []), ...(hi !== undefined ? [`start_time < ${p(hi)}::timestamptz`] : [])];
      return parts.length ? `(${parts.join(' AND ')})` : 'true';
    },
    text: (value) => `search LIKE ${p('%' + escapeLike(lowerLikeMemory(value)) + '%')} ESCAPE '\\'`,
    // coalesce: a NULL (failure_reason) must count as "no match", also under NOT.
    not: (cond) => `NOT coalesce(${cond}, false)`,
    all: (conds) => conds.join(' AND '),
  };
}

interface Row {
  result_id: string; job_uid: string; test_case: string; test_pack_sha: string; test_pack_branch: string | null;
  category: string; username: string; tags: Record<string, string>; start_time: Date; end_time: Date;
  duration: number; result: ResultRecord['result']; failure_reason: string | null; traceback: string | null;
  infrastructure_error: ResultRecord['infrastructure_error'];
}

function toRecord(r: Row): ResultRecord {
  return {
    result_id: r.result_id, job_uid: r.job_uid, test_case: r.test_case, test_pack_sha: r.test_pack_sha,
    test_pack_branch: r.test_pack_branch, category: r.category, username: r.username, tags: r.tags,
    start_time: r.start_time.toISOString(), end_time: r.end_time.toISOString(), duration: Number(r.duration),
    result: r.result, failure_reason: r.failure_reason, traceback: r.traceback,
    // Stored as the kind (from the field, or an older record's reason prefix); given back only when there is one.
    ...(r.infrastructure_error != null && { infrastructure_error: r.infrastructure_error }),
  };
}
