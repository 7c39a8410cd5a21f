/**
 * Fill the farm's `results` table with a large history in set-based SQL
 * (`INSERT ... SELECT` over `generate_series`), for benchmarks: about 30
 * times faster than `FarmResults.put` (which parses and sends every record
 * from Node), so 10,000,000 results load in minutes instead of 20.
 *
 * The rows are what `put` writes for records shaped like a busy node's
 * (bench/lib/results-data.ts): the 50 test cases, 80 % pass / 12 % fail /
 * 8 % error, jobs of 10 to 30 runs, five categories, two users, tags,
 * durations of 5 s to 5 min, failure reasons and tracebacks for the failures,
 * a few infrastructure errors, and the derived `node_id`, `job_number` and
 * `search` columns computed as `put` computes them (ASCII data: SQL's
 * lower() is the in-memory lower case). Each node's runs follow each other
 * every 90 s (jittered) from 2026-01-01, all nodes at the same time, and
 * rows go in in time order across the farm, as uploads would.
 *
 * Indexes other than the primary key are dropped during the load and built
 * again after it (then ANALYZE): building a b-tree once is much cheaper than
 * keeping six up to date row by row.
 */
import type pg from 'pg';
import { TEST_CASES } from './results-data.js';

/** The node id of node `i` of the benchmark farm. */
export const simNodeId = (i: number): string => `farmhand-${String(i).padStart(12, '0')}`;

const CATEGORIES = ['default', 'nightly', 'smoke', 'refs/snapshots/alice', 'release-27.4'];

/** The secondary indexes of migration 1 (name, definition), rebuilt after the load. */
export async function resultIndexes(pool: pg.Pool): Promise<{ name: string; def: string }[]> {
  const { rows } = await pool.query<{ indexname: string; indexdef: string }>(
    "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'results' AND indexname <> 'results_pkey' ORDER BY indexname",
  );
  return rows.map((r) => ({ name: r.indexname, def: r.indexdef }));
}

export interface LoadOptions {
  nodes: number;
  perNode: number;
  /** Runs of every node per statement (the load is cut in slices of time). */
  slice?: number;
  progress?: (done: number, total: number) => void;
}

/** One slice: runs k in [k0, k1) of every node. Parameters: $1 k0, $2 k1, $3 nodes. */
const SLICE_SQL = `
INSERT INTO results (result_id, job_uid, test_case, test_pack_sha, test_pack_branch, category, username, tags,
  start_time, end_time, duration, result, failure_reason, traceback, infrastructure_error, node_id, job_number, search)
SELECT x.result_id, x.job_uid, x.test_case, x.sha, 'main', x.category, x.username, x.tags,
       x.start_time, x.start_time + make_interval(secs => x.duration), x.duration, x.result::outcome, x.failure_reason,
       x.traceback, x.infra, x.node_id, x.job, 
       lower(x.test_case) || chr(31) || lower(coalesce(x.failure_reason, '')) || chr(31) || lower(x.category) || chr(31) || lower(x.result_id)
FROM (
  SELECT w.*, w.job_uid || '/' || to_char(w.start_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"_"HH24.MI.SS') AS result_id,
         CASE WHEN w.result = 'pass' THEN NULL
              WHEN w.infra IS NOT NULL THEN 'Infrastructure error (' || w.infra || '): capture lost during the run: ffmpeg exited with status 1'
              ELSE (CASE w.result WHEN 'fail' THEN 'UITestFailure' ELSE 'RuntimeError' END) || ': ' || w.fn || ' step ' || w.variant || ' did not match'
         END AS failure_reason,
         CASE WHEN w.result = 'pass' THEN NULL
              ELSE E'Traceback (most recent call last):\\n  File "' || w.file || '", line ' || (40 + w.variant) || ', in ' || w.fn
                   || E'\\n    wait_for_match("images/' || w.variant || E'.png")\\n  File "farmhand/api.py", line 212, in wait_for_match\\n    raise UITestFailure("did not match")\\n'
         END AS traceback
  FROM (
    SELECT v.*, split_part(v.test_case, '::', 1) AS file, split_part(v.test_case, '::', 2) AS fn,
           '/' || v.node_id || '/ab12/' || v.job AS job_uid,
           ($4::text[])[1 + v.job % 5] AS category,
           CASE WHEN v.job % 3 = 0 THEN 'alice' ELSE 'jenkins' END AS username,
           rpad('c0ffee', 40, (v.job % 10)::text) AS sha,
           jsonb_build_object('jenkins/BUILD_ID', v.job::text, 'jenkins/JOB_NAME', 'stb-nightly') AS tags,
           CASE WHEN v.result = 'error' AND v.r_infra < 0.1 THEN 'capture' END AS infra
    FROM (
      SELECT 'farmhand-' || lpad(n::text, 12, '0') AS node_id,
             1 + k / (10 + n % 21) AS job,
             ($5::text[])[1 + floor(random() * 50)::int] AS test_case,
             round((5 + random() * random() * 300)::numeric, 3)::float8 AS duration,
             CASE WHEN rr < 0.8 THEN 'pass' WHEN rr < 0.92 THEN 'fail' ELSE 'error' END AS result,
             floor(random() * 10)::int AS variant,
             random() AS r_infra,
             timestamptz '2026-01-01 00:00:00+00' + make_interval(secs => k * 90 + (n * 7919 % 30000) / 1000.0 + floor(random() * 55000) / 1000.0) AS start_time
      FROM generate_series($1::int, $2::int - 1) AS k, generate_series(0, $3::int - 1) AS n, LATERAL (SELECT random() + 0 * k * n AS rr) r
    ) v
  ) w
) x`;

/** Load `nodes x perNode` results; returns the seconds spent inserting and building indexes. */
export async function loadResultsSql(pool: pg.Pool, o: LoadOptions): Promise<{ insertS: number; indexS: number }> {
  const slice = o.slice ?? 2000;
  const indexes = await resultIndexes(pool);
  for (const ix of indexes) await pool.query(`DROP INDEX ${ix.name}`);
  const t0 = performance.now();
  await pool.query('SELECT setseed(0.42)');
  for (let k0 = 0; k0 < o.perNode; k0 += slice) {
    const k1 = Math.min(o.perNode, k0 + slice);
    await pool.query(SLICE_SQL, [k0, k1, o.nodes, CATEGORIES, TEST_CASES]);
    o.progress?.(k1 * o.nodes, o.perNode * o.nodes);
  }
  const t1 = performance.now();
  const c = await pool.connect();
  try {
    await c.query("SET maintenance_work_mem = '1GB'");
    await c.query('SET max_parallel_maintenance_workers = 2');
    for (const ix of indexes) await c.query(ix.def);
    await c.query('VACUUM ANALYZE results');
  } finally {
    c.release();
  }
  return { insertS: (t1 - t0) / 1000, indexS: (performance.now() - t1) / 1000 };
}
