/**
 * Results across the farm through HTTP (issue 10): the portal's real v2
 * result routes (`src/farm/resultRoutes.ts`, in a `farmhand portal` process)
 * over N results in PostgreSQL (default 100 nodes x 100,000 = 10,000,000),
 * against one node's in-memory index of 100,000 (a `farmhand serve` process)
 * in the same run, both over loopback HTTP with a real v2 token, a new
 * connection per request:
 *   GET /api/v2/results?filter=testcase:<x> result:fail   median <= 50 ms
 *   GET /api/v2/results (no filter, 2,000 rows)           median <= 100 ms
 *   GET /api/v2/results.csv (2,000 rows)                  median <= 150 ms
 * The results are loaded with set-based SQL (bench/lib/farm-results-sql.ts),
 * not FarmResults.put (~8,700/s); one loaded row is written again through
 * `put` and must come back identical, so the load writes what `put` writes.
 * Prints EXPLAIN ANALYZE of the filtered query and the ratios portal/node. The
 * filtered query is warmed with one request per test case first (the first,
 * cold, times are printed beside).
 *
 *   node --import tsx bench/farm-results-http-bench.ts [--nodes 100] [--per-node 100000] [--runs 30]
 *        [--node-results 100000] [--database <url>]   an already loaded database (kept; nothing is loaded unless it is empty)
 *
 * Exit status: 0 every target met, 1 a target missed, 2 the benchmark failed.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { parseResultQuery } from '../src/core/query.js';
import { migrate } from '../src/farm/db/migrate.js';
import { compileQuery, FarmResults } from '../src/farm/results.js';
import { PgTokens, PgUsers } from '../src/farm/users.js';
import { TokenStore, tokensFile } from '../src/storage/tokens.js';
import { makeTestPack, type TestPackRepo } from '../test/fixtures/testPack.js';
import { connectionString } from '../test/helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../test/helpers/postgres.js';
import { PROJECT_ROOT, startBenchDaemon, writeDaemonConfig, type BenchDaemon } from './lib/daemon.js';
import { loadResultsSql, simNodeId } from './lib/farm-results-sql.js';
import { freePort, spawnLogged, tail, type Spawned } from './lib/processes.js';
import { generateResults, TEST_CASES } from './lib/results-data.js';
import { percentile, Targets } from './lib/stats.js';

const argv = process.argv;
const arg = (name: string, dflt: number): number => (argv.includes(name) ? Number(argv[argv.indexOf(name) + 1]) : dflt);
const strArg = (name: string): string | undefined => (argv.includes(name) ? argv[argv.indexOf(name) + 1] : undefined);
const opts = { nodes: arg('--nodes', 100), perNode: arg('--per-node', 100_000), runs: arg('--runs', 30), database: strArg('--database') };
const NODE_PER = arg('--node-results', 100_000);
const targets = new Targets();

/** One request on its own connection with a v2 token; the time is to the body's last byte. */
function get(url: string, token: string): Promise<{ status: number; body: string; ms: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(url, { agent: false, headers: { Authorization: `token ${token}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), ms: performance.now() - t0 }));
      res.on('error', reject);
    });
    req.setTimeout(60_000, () => req.destroy(new Error(`GET ${url}: no answer in 60 s`)));
    req.on('error', reject);
    req.end();
  });
}

async function waitUp(url: string, proc: Spawned, logFile: string): Promise<void> {
  let alive = true;
  void proc.exited.then(() => (alive = false));
  const deadline = Date.now() + 120_000;
  while (Date.now() < deadline && alive) {
    const ok = await get(`${url}/healthz`, 'x').then((r) => r.status === 200, () => false);
    if (ok) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`the portal did not start\n--- its log:\n${tail(logFile)}`);
}

interface Case {
  name: string;
  path: (i: number) => string;
  limit: number;
  /** Checks an answer, returns its row count. */
  check: (body: string, i: number) => number;
}

const failCase = (i: number): string => TEST_CASES[i % TEST_CASES.length]!;
const CASES: Case[] = [
  {
    name: 'results?filter=testcase:<x> result:fail',
    path: (i) => `/api/v2/results?filter=${encodeURIComponent(`testcase:${failCase(i)} result:fail`)}`,
    limit: 50,
    check: (body, i) => {
      const rows = JSON.parse(body) as { test_case: string; result: string }[];
      if (rows.some((r) => r.test_case !== failCase(i) || r.result !== 'fail')) throw new Error('a filtered row does not match the filter');
      return rows.length;
    },
  },
  {
    name: 'results (no filter)',
    path: () => '/api/v2/results',
    limit: 100,
    check: (body) => (JSON.parse(body) as unknown[]).length,
  },
  {
    name: 'results.csv (no filter)',
    path: () => '/api/v2/results.csv',
    limit: 150,
    check: (body) => body.trimEnd().split('\r\n').length - 1,
  },
];

/**
 * Warm-up first: one request for each of the 50 test cases (at least 3), so the cache holds what a
 * portal in use would; their times are returned as `cold` (the first request of each query).
 */
async function measure(url: string, token: string, c: Case): Promise<{ median: number; p95: number; rows: number; cold: number[] }> {
  const cold: number[] = [];
  for (let i = 0; i < (c.name.includes('testcase') ? TEST_CASES.length : 3); i++) cold.push((await get(`${url}${c.path(i)}`, token)).ms);
  const ms: number[] = [];
  let rows = 0;
  for (let i = 0; i < opts.runs; i++) {
    const res = await get(`${url}${c.path(i)}`, token);
    if (res.status !== 200) throw new Error(`${c.path(i)}: ${res.status} ${res.body.slice(0, 300)}`);
    rows = c.check(res.body, i);
    ms.push(res.ms);
  }
  return { median: percentile(ms, 50), p95: percentile(ms, 95), rows, cold };
}

async function main(): Promise<number> {
  const root = mkdtempSync(join(tmpdir(), 'farmhand-frhttp-'));
  let cluster: TestPostgres | undefined;
  let pool: pg.Pool | undefined;
  let portal: Spawned | undefined;
  let daemon: BenchDaemon | undefined;
  let pack: TestPackRepo | undefined;
  try {
    let db = opts.database;
    if (!db) {
      cluster = await startPostgres();
      db = connectionString(cluster);
    }
    pool = new pg.Pool({ connectionString: db, max: 2 });
    await migrate(pool);
    const index = new FarmResults(pool);
    const have = await index.count();
    const total = opts.nodes * opts.perNode;
    if (have === 0) {
      console.log(`loading ${total.toLocaleString('en')} results (${opts.nodes} nodes x ${opts.perNode.toLocaleString('en')}) with INSERT ... SELECT`);
      let last = 0;
      const t = await loadResultsSql(pool, {
        nodes: opts.nodes,
        perNode: opts.perNode,
        progress: (done, all) => {
          if (done - last >= all / 10 || done === all) console.log(`  ${done.toLocaleString('en')} of ${all.toLocaleString('en')}`);
          if (done - last >= all / 10) last = done;
        },
      });
      console.log(`load: insert ${t.insertS.toFixed(0)} s (${Math.round(total / t.insertS).toLocaleString('en')} results/s), indexes + VACUUM ANALYZE ${t.indexS.toFixed(0)} s`);
    } else {
      console.log(`using the ${have.toLocaleString('en')} results already in the database`);
    }
    const { rows: [size] } = await pool.query<{ s: string; n: string }>("SELECT pg_size_pretty(pg_total_relation_size('results')) AS s, (SELECT count(*) FROM results) AS n");
    console.log(`results: ${Number(size!.n).toLocaleString('en')} rows, table + indexes ${size!.s}`);

    // The load writes what put writes: a loaded failure, put again, must leave its row unchanged.
    const { rows: [sample] } = await pool.query<{ result_id: string }>(
      "SELECT result_id FROM results WHERE result = 'fail' AND node_id = $1 ORDER BY start_time DESC LIMIT 1",
      [simNodeId(0)],
    );
    const rowOf = async (id: string): Promise<string> => JSON.stringify((await pool!.query('SELECT * FROM results WHERE result_id = $1', [id])).rows[0]);
    const before = await rowOf(sample!.result_id);
    const record = await index.get(sample!.result_id);
    await index.put([record!]);
    if ((await rowOf(sample!.result_id)) !== before) throw new Error(`put rewrote a loaded row differently:\n${before}\n${await rowOf(sample!.result_id)}`);
    console.log('check: a loaded row written again through FarmResults.put is unchanged');

    const q = parseResultQuery({ filter: `testcase:${failCase(0)} result:fail` });
    const { sql, params } = compileQuery(q.terms!, q.sort, q.limit);
    const plan = await pool.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`, params);
    console.log(`\nEXPLAIN ANALYZE filter=testcase:${failCase(0)} result:fail\n${plan.rows.map((r) => '  ' + r['QUERY PLAN']).join('\n')}\n`);

    // A real v2 token of a real user, checked by the portal's PgTokenVerifier.
    await new PgUsers(pool).add('bench').catch(() => undefined);
    const { token: portalToken } = await new PgTokens(pool).createToken('bench');

    const port = await freePort();
    const cfgFile = join(root, 'portal.json');
    writeFileSync(cfgFile, JSON.stringify({
      listen: `127.0.0.1:${port}`, database: db, storage_dir: join(root, 'storage'), log_level: 'warn',
      rate_limit: { requests_per_second: 100000, burst: 100000 },
    }));
    const portalLog = join(root, 'portal.log');
    portal = spawnLogged(process.execPath, ['--import', 'tsx', join(PROJECT_ROOT, 'src/main.ts'), 'portal', '--config', cfgFile], portalLog, { cwd: PROJECT_ROOT, env: process.env });
    const portalUrl = `http://127.0.0.1:${port}`;
    await waitUp(portalUrl, portal, portalLog);

    // One node with its 100,000 in memory, as a real farmhand serve process.
    const dataDir = join(root, 'node-data');
    mkdirSync(join(dataDir, 'results'), { recursive: true });
    console.log(`writing ${NODE_PER.toLocaleString('en')} results for the single node...`);
    generateResults(join(dataDir, 'results'), NODE_PER, simNodeId(0));
    pack = await makeTestPack({ 'tests/t.py': 'def test_pass():\n    pass\n' });
    const { token: nodeToken } = await new TokenStore(tokensFile(dataDir)).create('bench');
    const configFile = await writeDaemonConfig(root, pack.dir, dataDir, {
      node_id: simNodeId(0), capture: { uri: 'none:' }, log_level: 'warn',
      rate_limit: { requests_per_second: 100000, burst: 100000 },
    } as never);
    daemon = await startBenchDaemon({ configFile, logFile: join(root, 'daemon.log'), probePath: '/api/v1/results?filter=job:/x/0000/1', timeoutMs: 120_000 });

    const loaded = Number(size!.n);
    console.log(`\nmedian / p95 over ${opts.runs} requests each (new connection per request, real v2 tokens)`);
    console.log(`portal: ${loaded.toLocaleString('en')} results in PostgreSQL; node: ${NODE_PER.toLocaleString('en')} in memory\n`);
    const f = (x: number): string => x.toFixed(1).padStart(7);
    for (const c of CASES) {
      // Alternate portal and node per case so machine load hits both alike.
      const p = await measure(portalUrl, portalToken, c);
      const n = await measure(daemon.url, nodeToken, c);
      console.log(`${c.name.padEnd(42)} portal ${f(p.median)} /${f(p.p95)} ms (${p.rows} rows)   node ${f(n.median)} /${f(n.p95)} ms (${n.rows} rows)   ratio ${(p.median / n.median).toFixed(1)}x`);
      if (c.name.includes('testcase')) {
        console.log(`${''.padEnd(42)} first request of each of the 50 test cases (cold): portal median ${f(percentile(p.cold, 50))}, max ${f(Math.max(...p.cold))} ms; node median ${f(percentile(n.cold, 50))} ms`);
      }
      targets.check(`portal GET /api/v2/${c.name}`, p.median, '<=', c.limit, 'ms', `median ${p.median.toFixed(1)} ms, p95 ${p.p95.toFixed(1)} ms, ${p.rows} rows`);
    }
    targets.printSummary();
    return targets.missed.length ? 1 : 0;
  } finally {
    await daemon?.stop().catch(() => undefined);
    await portal?.stop(15_000).catch(() => undefined);
    await pool?.end().catch(() => undefined);
    await cluster?.stop().catch(() => undefined);
    await pack?.cleanup().catch(() => undefined);
    rmSync(root, { recursive: true, force: true });
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(e);
    process.exit(2);
  },
);
