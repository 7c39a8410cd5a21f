/**
 * The farm's results index in PostgreSQL against the single node's in-memory
 * index, in the same run. Loads N results (default 1,000,000: 10 nodes x
 * 100,000; `--results 10000000` is the 100 nodes x 100,000) into a
 * throwaway cluster (test/helpers/postgres.ts) through FarmResults.put
 * (multi-row INSERT ... SELECT FROM unnest, 5,000 rows a statement), then times
 *   filter=testcase:<x> result:fail   (date:desc, limit 2,000)
 *   no filter                          (date:desc, 2,000 rows)
 * through FarmResults.query and MemoryIndex.query on one node's 100,000, and
 * prints medians, p95 and the ratio. Times are the store's share of a request
 * (query, rows parsed into records), not HTTP.
 *   node --import tsx bench/farm-results-bench.ts [--results N] [--runs N]
 */
import pg from 'pg';
import { startPostgres } from '../test/helpers/postgres.js';
import { migrate } from '../src/farm/db/migrate.js';
import { FarmResults } from '../src/farm/results.js';
import { MemoryIndex } from '../src/storage/results/memory-index.js';
import { parseResultQuery, type ResultQuery } from '../src/core/query.js';
import { makeRecords, TEST_CASES } from './lib/results-data.js';
import { percentile } from './lib/stats.js';

const PER_NODE = 100_000;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

const total = arg('--results', 1_000_000);
const runs = arg('--runs', 50);
const nodes = Math.max(1, Math.ceil(total / PER_NODE));
const nodeId = (i: number): string => `farmhand-${String(i).padStart(12, '0')}`;

async function timeAll(fn: (i: number) => unknown): Promise<{ median: number; p95: number; rows: number }> {
  const ms: number[] = [];
  let rows = 0;
  await fn(0); // warm-up
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const out = await fn(i);
    ms.push(performance.now() - t0);
    rows = Array.isArray(out) ? out.length : 0;
  }
  return { median: percentile(ms, 50), p95: percentile(ms, 95), rows };
}

const cluster = await startPostgres();
const pool = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database, max: 4 });
try {
  await migrate(pool);
  const results = new FarmResults(pool);
  console.log(`farm-results-bench: loading ${total.toLocaleString('en')} results (${nodes} nodes x up to ${PER_NODE.toLocaleString('en')}) into a throwaway PostgreSQL cluster`);
  const t0 = performance.now();
  for (let n = 0; n < nodes; n++) {
    const count = Math.min(PER_NODE, total - n * PER_NODE);
    await results.put(makeRecords(count, nodeId(n)));
  }
  const loadS = (performance.now() - t0) / 1000;
  await pool.query('VACUUM ANALYZE results');
  const { rows: [size] } = await pool.query<{ s: string }>("SELECT pg_size_pretty(pg_total_relation_size('results')) AS s");
  console.log(`load: ${loadS.toFixed(1)} s (${Math.round(total / loadS).toLocaleString('en')} results/s), table + indexes ${size!.s}`);

  const memory = new MemoryIndex();
  for (const r of makeRecords(PER_NODE, nodeId(0))) memory.loadSet(r);
  memory.loadEnd();

  const failQ = (i: number): ResultQuery => parseResultQuery({ filter: `testcase:${TEST_CASES[i % TEST_CASES.length]} result:fail` });
  const allQ = parseResultQuery({});
  const cases: [string, (i: number) => ResultQuery][] = [
    ['filter=testcase:<x> result:fail', failQ],
    ['no filter (2,000 rows)', () => allQ],
  ];
  const r2 = (x: number): string => x.toFixed(2).padStart(8);
  console.log(`\nmedian / p95 in ms over ${runs} runs (PostgreSQL: ${total.toLocaleString('en')} results; memory: ${PER_NODE.toLocaleString('en')})`);
  for (const [name, q] of cases) {
    const sql = await timeAll((i) => results.query(q(i)));
    const mem = await timeAll((i) => memory.query(q(i)));
    console.log(`${name.padEnd(34)} postgres ${r2(sql.median)} /${r2(sql.p95)}  (${sql.rows} rows)   memory ${r2(mem.median)} /${r2(mem.p95)}  (${mem.rows} rows)   ratio pg/memory ${(sql.median / mem.median).toFixed(1)}x`);
  }
} finally {
  await pool.end();
  await cluster.stop();
}
