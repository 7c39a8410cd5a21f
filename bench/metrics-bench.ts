/**
 * Scrape cost of /metrics (issue 8): `node --import tsx bench/metrics-bench.ts [--count N] [--runs N]`.
 *
 * Generates 100,000 results in a temporary data directory, starts the daemon
 * as a separate process (real testsrc capture at 320x240, so the capture
 * series are live; a real git test pack), sends a spread of requests so the
 * HTTP series exist, then times over loopback, each request on a new
 * connection: GET /metrics, GET /healthz (the HTTP floor), GET /readyz (a
 * file write and a statfs). Prints medians and p90s, the exposition's size
 * and series count, and the daemon's CPU time per scrape; the target is a
 * /metrics median of at most 20 ms. Exit code 0 when met, 1 when missed, 2 on failure.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeTestPack, type TestPackRepo } from '../test/fixtures/testPack.js';
import { startBenchDaemon, writeDaemonConfig, type BenchDaemon } from './lib/daemon.js';
import { timedRequest } from './lib/http.js';
import { generateResults } from './lib/results-data.js';
import { formatSummary, summarize, Targets } from './lib/stats.js';

const NODE = 'farmhand-bench';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}
const opts = { count: arg('--count', 100_000), runs: arg('--runs', 200) };
const targets = new Targets();
const log = (line: string) => console.log(line);
const live: { daemon?: BenchDaemon; pack?: TestPackRepo; root?: string } = {};

/** CPU time (user + system, ms) of one process so far, from /proc/<pid>/stat (100 ticks a second). */
function cpuTimeMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) / 100) * 1000;
}

async function timeGets(url: string, runs: number, status = 200): Promise<number[]> {
  const ms: number[] = [];
  for (let i = 0; i < runs; i++) {
    const r = await timedRequest(url);
    if (r.status !== status) throw new Error(`GET ${url} answered ${r.status}: ${r.body.toString('utf8', 0, 300)}`);
    ms.push(r.ms);
  }
  return ms;
}

async function main(): Promise<void> {
  const root = (live.root = mkdtempSync(join(tmpdir(), 'farmhand-metrics-bench-')));
  const dataDir = join(root, 'data');
  mkdirSync(join(dataDir, 'results'), { recursive: true });
  let t0 = performance.now();
  generateResults(join(dataDir, 'results'), opts.count, NODE);
  log(`generated ${opts.count} results in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  live.pack = await makeTestPack({ 'tests/trivial.py': 'def test_pass():\n    pass\n' });
  const configFile = await writeDaemonConfig(root, live.pack.dir, dataDir, {
    node_id: NODE,
    retention: { max_results: opts.count + 1000, min_free_mb: 0 },
    // One client sends every request: the per-client limit would measure 429s.
    rate_limit: { requests_per_second: 100_000, burst: 100_000 },
  });
  t0 = performance.now();
  const d = (live.daemon = await startBenchDaemon({ configFile, logFile: join(root, 'daemon.log'), probePath: '/readyz', timeoutMs: 120_000 }));
  log(`daemon ready in ${((performance.now() - t0) / 1000).toFixed(1)} s (pid ${d.pid})`);

  // HTTP series for a realistic scrape: a few routes, statuses and methods.
  const warm = ['/api/v1/results?limit=10', '/api/v1/jobs', '/api/v1/test_pack/main/test_case_names', '/api/v1/no/such/path', '/api/v2/user', '/healthz'];
  for (let i = 0; i < 60; i++) await timedRequest(`${d.url}${warm[i % warm.length]!}`);

  const first = await timedRequest(`${d.url}/metrics`);
  const text = first.body.toString('utf8');
  const series = text.split('\n').filter((l) => l && !l.startsWith('#')).length;
  log(`exposition: ${first.body.length} bytes, ${series} series`);
  if (!/^farmhand_results_stored (\d+)$/m.test(text)) throw new Error('no farmhand_results_stored in the exposition');
  log(`farmhand_results_stored ${/^farmhand_results_stored (\d+)$/m.exec(text)![1]}`);

  // The daemon's CPU per request, /healthz's taken off /metrics's: what the scrape itself costs beyond HTTP
  // (both include the background capture work of the same wall time, roughly).
  let cpu0 = cpuTimeMs(d.pid);
  const metrics = summarize(await timeGets(`${d.url}/metrics`, opts.runs));
  const cpuPerScrape = (cpuTimeMs(d.pid) - cpu0) / opts.runs;
  cpu0 = cpuTimeMs(d.pid);
  const health = summarize(await timeGets(`${d.url}/healthz`, opts.runs));
  const cpuPerHealth = (cpuTimeMs(d.pid) - cpu0) / opts.runs;
  const ready = summarize(await timeGets(`${d.url}/readyz`, opts.runs));
  log(`GET /healthz  ${formatSummary(health, 'ms', 2)}`);
  log(`GET /readyz   ${formatSummary(ready, 'ms', 2)}`);
  log(`GET /metrics  ${formatSummary(metrics, 'ms', 2)}`);
  log(`daemon CPU per request (user+system): /metrics ${cpuPerScrape.toFixed(2)} ms, /healthz ${cpuPerHealth.toFixed(2)} ms`);
  targets.check(`/metrics with ${opts.count} results`, metrics.median, '<=', 20, 'ms', `median over ${opts.runs} scrapes on new connections`);
}

main()
  .then(
    () => (process.exitCode = targets.missed.length ? 1 : 0),
    (e: unknown) => {
      console.error(`metrics-bench failed: ${e instanceof Error ? e.message : String(e)}`);
      process.exitCode = 2;
    },
  )
  .finally(async () => {
    await live.daemon?.stop().catch(() => undefined);
    await live.pack?.cleanup().catch(() => undefined);
    if (live.root) rmSync(live.root, { recursive: true, force: true });
  });
