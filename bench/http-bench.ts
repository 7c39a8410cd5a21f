/**
 * HTTP benchmark of a whole daemon (issue 2): `node --import tsx bench/http-bench.ts`.
 *
 * Generates 100,000 results in a temporary data directory, starts the daemon
 * as a separate process (`node --import tsx src/main.ts serve --config ...`,
 * capture `none:`, a real git test pack), and measures over real HTTP on
 * loopback, each request on a new connection:
 *   - start-up (spawn -> first 200) with that history, and VmRSS after the queries;
 *   - GET /api/v1/results: no filter, `testcase:<x> result:fail`, `sort=duration:desc`;
 *   - POST /api/v1/run_tests of a trivial passing test at a full SHA (the POST only);
 *   - a 200 MB artifact against nginx serving the same file (ratio of throughputs).
 * Each target is printed with PASS or MISS. Options: --count N (results),
 * --runs N (per query), --jobs N, --downloads N (per server), --starts N,
 * --artifact-mb N, --verbose (each download), --built (compile src/ into
 * the temporary folder and run `node dist/main.js`, as the appliance does,
 * instead of tsx), --profile DIR (the last daemon runs under `node
 * --cpu-prof`; prints where its time went in each phase). bench/README.md
 * has the targets, the choices made and the numbers.
 * Exit code 0 when every target is met, 1 when one is missed, 2 on failure.
 * Everything runs in one temporary folder, removed at the end; bounded to 5 min.
 */
import { randomBytes } from 'node:crypto';
import { closeSync, existsSync, mkdirSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { makeTestPack, type TestPackRepo } from '../test/fixtures/testPack.js';
import { buildInto, PROJECT_ROOT, startBenchDaemon, writeDaemonConfig, type BenchDaemon } from './lib/daemon.js';
import { compareDownloads, type DownloadResult } from './lib/downloads.js';
import { getJson, timedRequest } from './lib/http.js';
import { startNginx, type Nginx } from './lib/nginx.js';
import { procMemory } from './lib/processes.js';
import { mainThreadProfile, monotonicUs, topSelfTime, type Window } from './lib/profile.js';
import { generateResults, recordDir, TEST_CASES } from './lib/results-data.js';
import { formatSummary, summarize, Targets } from './lib/stats.js';

const NODE = 'farmhand-bench';
const TRIVIAL_TEST = 'tests/trivial.py::test_pass';
const ARTIFACT = 'artifact.bin';
function arg0(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}
/** 5 min, and 3 min more per 100,000 results past the first (a million results takes long to generate). */
const TIME_LIMIT_MS = (5 + 3 * Math.max(0, arg0('--count', 100_000) / 100_000 - 1)) * 60_000;
const PROBE = `/api/v1/results?filter=${encodeURIComponent('testcase:tests/none.py::test_none')}`;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}
const strArg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? process.argv[i + 1] : undefined;
};

const opts = {
  count: arg('--count', 100_000),
  runs: arg('--runs', 30),
  jobs: arg('--jobs', 30),
  downloads: arg('--downloads', 20),
  starts: arg('--starts', 3),
  artifactMb: arg('--artifact-mb', 200),
  profileDir: strArg('--profile'),
  built: process.argv.includes('--built'),
  verbose: process.argv.includes('--verbose'),
};

const targets = new Targets();
const log = (line: string) => console.log(line);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const mib = (bytes: number) => (bytes / 2 ** 20).toFixed(1);

/** When each phase ran, to split the daemon's CPU profile. */
const phases: Array<{ name: string } & Window> = [];
async function phase<T>(name: string, fn: () => Promise<T>): Promise<T> {
  const fromUs = monotonicUs();
  try {
    return await fn();
  } finally {
    phases.push({ name, fromUs, toUs: monotonicUs() });
  }
}

/** Everything the benchmark starts, so cleanup can end it whatever happened. */
const live: { daemon?: BenchDaemon; nginx?: Nginx; pack?: TestPackRepo; root?: string } = {};

async function cleanup(): Promise<void> {
  await live.daemon?.stop().catch(() => undefined);
  await live.nginx?.stop().catch(() => undefined);
  await live.pack?.cleanup().catch(() => undefined);
  if (live.root) rmSync(live.root, { recursive: true, force: true });
  live.daemon = live.nginx = live.pack = live.root = undefined;
}

/** A file of random bytes, written in 4 MiB chunks. */
function writeRandomFile(file: string, mb: number): void {
  const fd = openSync(file, 'w');
  try {
    for (let left = mb * 2 ** 20; left > 0; left -= 4 * 2 ** 20) writeSync(fd, randomBytes(Math.min(left, 4 * 2 ** 20)));
  } finally {
    closeSync(fd);
  }
}

/** The data set, the artifact and the test pack. */
async function prepare(root: string): Promise<{ dataDir: string; sha: string; artifactDir: string; artifactUrlPath: string }> {
  const dataDir = join(root, 'data');
  const resultsDir = join(dataDir, 'results');
  mkdirSync(resultsDir, { recursive: true });
  let t0 = performance.now();
  const records = generateResults(resultsDir, opts.count, NODE);
  log(`generated ${opts.count} results in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const holder = records[records.length - 1]!;
  const artifactDir = recordDir(resultsDir, holder);
  t0 = performance.now();
  writeRandomFile(join(artifactDir, ARTIFACT), opts.artifactMb);
  log(`wrote a ${opts.artifactMb} MiB artifact of random bytes in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  live.pack = await makeTestPack({ 'tests/trivial.py': 'def test_pass():\n    pass\n' });
  return { dataDir, sha: live.pack.sha, artifactDir, artifactUrlPath: `/api/v1/result${holder.result_id}/artifacts/${ARTIFACT}` };
}

/** Start the daemon `opts.starts` times (stopping all but the last); the target is on the median. */
async function benchStartup(configFile: string, root: string, builtMain: string | undefined): Promise<BenchDaemon> {
  const times: number[] = [];
  const cpus: number[] = [];
  // Whether each start found a snapshot of the results index (the first start of a generated history reads index.jsonl whole).
  const snapshot = join(root, 'data', 'results', 'index.snapshot');
  const found: boolean[] = [];
  for (let i = 0; i < opts.starts; i++) {
    found.push(existsSync(snapshot));
    const last = i === opts.starts - 1;
    const cpuProfDir = last && opts.profileDir ? opts.profileDir : undefined;
    live.daemon = await startBenchDaemon({ configFile, logFile: join(root, 'daemon.log'), probePath: PROBE, builtMain, cpuProfDir });
    times.push(live.daemon.startMs);
    cpus.push(live.daemon.startCpuMs);
    if (last) break;
    await live.daemon.stop();
  }
  const s = summarize(times);
  const each = times.map((t) => (t / 1000).toFixed(2)).join(' s, ');
  // Issue 23: built, 1 s with 100,000 results and 3 s with 1,000,000 (tsx adds its loader's start: 1 s more).
  const limit = (opts.count > 100_000 ? 3 : 1) + (builtMain ? 0 : 1);
  targets.check(`start-up with ${opts.count} results`, s.median / 1000, '<=', limit, 's', `spawn -> first 200: ${each} s (the first also mirrors the test pack)`);
  // CPU used by then (the daemon's process group): the figure to compare on a loaded machine.
  const cpuMedian = summarize(cpus).median;
  log(`      CPU at the first 200: ${cpus.map((c) => (c / 1000).toFixed(2)).join(' s, ')} s (median ${(cpuMedian / 1000).toFixed(2)} s, ${(cpuMedian / 1000 / limit).toFixed(2)}x the ${limit} s target)`);
  log(`      results/index.snapshot at each start: ${found.map((f) => (f ? 'present' : 'absent (index.jsonl read whole)')).join(', ')}`);
  return live.daemon!;
}

interface Row { test_case: string; result: string; start_time: string; end_time: string }

/** Time `runs` GETs of one results query after 3 warm-ups; `verify` checks the last answer. */
async function timeQuery(url: string, verify: (rows: Row[]) => string | undefined): Promise<{ ms: number[]; rows: number }> {
  for (let i = 0; i < 3; i++) await getJson(url);
  const ms: number[] = [];
  let rows: Row[] = [];
  for (let i = 0; i < opts.runs; i++) {
    const r = await getJson<Row[]>(url);
    ms.push(r.ms);
    rows = r.value;
  }
  const problem = verify(rows);
  if (problem) throw new Error(`${url}: ${problem}`);
  return { ms, rows: rows.length };
}

async function benchQueries(d: BenchDaemon): Promise<void> {
  const x = TEST_CASES[7]!;
  const q = (params: Record<string, string>) => `${d.url}/api/v1/results?${new URLSearchParams(params).toString()}`;
  const lengthIs = (n: number) => (rows: Row[]) => (rows.length === n ? undefined : `${rows.length} rows, expected ${n}`);
  const cases: Array<[string, string, number, (rows: Row[]) => string | undefined]> = [
    ['GET /api/v1/results (no filter)', q({}), 50, lengthIs(2000)],
    ['GET /api/v1/results filter=testcase:<x> result:fail', q({ filter: `testcase:${x} result:fail` }), 30, (rows) =>
      rows.length > 0 && rows.every((r) => r.test_case === x && r.result === 'fail') ? undefined : 'rows that do not match the filter, or none'],
    ['GET /api/v1/results sort=duration:desc', q({ sort: 'duration:desc' }), 60, (rows) => {
      const dur = rows.map((r) => Date.parse(r.end_time) - Date.parse(r.start_time));
      // end_time is start + duration truncated to whole ms: allow 1 ms.
      return rows.length === 2000 && dur.every((v, i) => i === 0 || v <= dur[i - 1]! + 1) ? undefined : 'not 2000 rows by duration, longest first';
    }],
  ];
  for (const [label, url, limit, verify] of cases) {
    const r = await timeQuery(url, verify);
    const s = summarize(r.ms);
    targets.check(label, s.median, '<=', limit, 'ms', `${formatSummary(s, 'ms')}, ${r.rows} rows`);
  }
}

async function benchMemory(d: BenchDaemon): Promise<void> {
  const m = procMemory(d.pid);
  const h = await d.heap();
  const how = opts.built ? 'node dist/main.js' : 'under tsx, whose loader thread adds ~25 MiB; --built measures node dist/main.js';
  // Issue 23: 150 MB built; tsx's loader thread adds ~25 MiB.
  targets.check('daemon resident memory after the queries', Math.round(m.rssMb), '<=', opts.built ? 150 : 175, 'MB',
    `VmRSS ${m.rssMb.toFixed(1)} MiB (peak VmHWM ${m.hwmMb.toFixed(1)} MiB; ${how})`);
  const big = h.spaces.large_object_space ?? 0;
  log(`      heap used ${mib(h.heapUsed)} MiB (old space ${mib(h.spaces.old_space ?? 0)}, large objects ${mib(big)}), heap total ${mib(h.heapTotal)} MiB, external ${mib(h.external)} MiB`);
}

/** run_tests answered 409 although the previous job already read `exited`. */
let conflictsAfterExit = 0;

/**
 * POST run_tests, then poll the job until it has exited (as a v1 client
 * does); returns the POST's time. A 409 right after the previous job read
 * `exited` is counted and retried 20 ms later (the timed POST is the one
 * that was accepted).
 */
async function oneJob(d: BenchDaemon, sha: string): Promise<number> {
  const body = { test_pack_revision: sha, test_cases: [TRIVIAL_TEST], category: 'bench' };
  let post = await timedRequest(`${d.url}/api/v1/run_tests`, { method: 'POST', json: body });
  for (let retry = 0; post.status === 409 && retry < 50; retry++) {
    if (retry === 0) conflictsAfterExit++;
    await sleep(20);
    post = await timedRequest(`${d.url}/api/v1/run_tests`, { method: 'POST', json: body });
  }
  if (post.status !== 200) throw new Error(`run_tests answered ${post.status}: ${post.body.toString()}`);
  const job = JSON.parse(post.body.toString()) as { job_url: string };
  const end = performance.now() + 30_000;
  for (;;) {
    const { value } = await getJson<{ status: string; result_counts: { pass: number } }>(job.job_url);
    if (value.status === 'exited') {
      if (value.result_counts.pass !== 1) throw new Error(`job ${job.job_url} did not pass: ${JSON.stringify(value)}`);
      return post.ms;
    }
    if (performance.now() > end) throw new Error(`job ${job.job_url} still ${value.status} after 30 s`);
    await sleep(50);
  }
}

async function benchRunTests(d: BenchDaemon, sha: string): Promise<void> {
  const first = await oneJob(d, sha);
  log(`first run_tests (makes the checkout; not counted): ${first.toFixed(1)} ms`);
  const t0 = performance.now();
  const ms: number[] = [];
  for (let i = 0; i < opts.jobs; i++) ms.push(await oneJob(d, sha));
  const s = summarize(ms);
  const perJob = (performance.now() - t0) / opts.jobs;
  targets.check('POST /api/v1/run_tests (revision mirrored)', s.median, '<=', 100, 'ms', `${formatSummary(s, 'ms')}; a whole job took ${perJob.toFixed(0)} ms`);
  if (conflictsAfterExit) {
    log(`      NOTE: ${conflictsAfterExit} of ${opts.jobs + 1} run_tests answered 409 although the previous job already read "exited" (retried)`);
  }
}

async function benchDownload(d: BenchDaemon, root: string, artifactDir: string, artifactUrlPath: string): Promise<void> {
  live.nginx = await startNginx(artifactDir, join(root, 'nginx'), 'result.json');
  const { results, client } = await compareDownloads(
    [
      { server: 'nginx', url: `${live.nginx.url}/${ARTIFACT}`, pgid: live.nginx.proc.pid },
      { server: 'farmhand', url: `${d.url}${artifactUrlPath}`, pgid: d.pid },
    ],
    { bytes: opts.artifactMb * 2 ** 20, rounds: opts.downloads, verbose: opts.verbose, log },
  );
  const [ng, fh] = results as [DownloadResult, DownloadResult];
  const paired = summarize(fh.mibps.map((v, i) => v / ng.mibps[i]!)).median;
  log(`      median of the ${opts.downloads} paired ratios (farmhand / the nginx download just before it): ${paired.toFixed(2)}`);
  const ratio = fh.summary.median / ng.summary.median;
  targets.check(`${opts.artifactMb} MiB artifact, throughput vs nginx`, ratio, '>=', 0.5, 'x',
    `median ${fh.summary.median.toFixed(0)} vs ${ng.summary.median.toFixed(0)} MiB/s with ${client}`);
  await live.nginx.stop();
  live.nginx = undefined;
}

/** The daemon's top functions by self time in each phase of the run. */
function printProfile(dir: string, codeRoot: string): void {
  const file = mainThreadProfile(dir);
  if (!file) return log(`no main-thread .cpuprofile in ${dir} (the daemon did not exit cleanly?)`);
  log(`\ndaemon CPU profile: ${file}`);
  for (const ph of phases) {
    const p = topSelfTime(file, codeRoot, 12, ph);
    log(`\n${ph.name}: ${p.totalMs.toFixed(0)} ms sampled, ${p.idleMs.toFixed(0)} ms idle; top self time:`);
    for (const h of p.top) log(`  ${h.selfMs.toFixed(0).padStart(7)} ms ${h.percent.toFixed(1).padStart(5)} %  ${h.where}`);
  }
}

async function main(): Promise<void> {
  const root = (live.root = mkdtempSync(join(tmpdir(), 'farmhand-http-bench-')));
  const { dataDir, sha, artifactDir, artifactUrlPath } = await prepare(root);
  const configFile = await writeDaemonConfig(root, live.pack!.dir, dataDir, {
    node_id: NODE,
    log_level: 'warn',
    capture: { uri: 'none:' },
    // The generated history is the point: nothing may be deleted while measuring.
    retention: { max_results: 10 * opts.count, min_free_mb: 0 },
    // One client sending back to back, faster than a real one would.
    rate_limit: { requests_per_second: 100_000, burst: 100_000, artifact_burst: 100_000 },
  });
  const builtMain = opts.built ? await buildInto(join(root, 'app')) : undefined;
  log(`daemon: ${builtMain ? 'node dist/main.js (built into the temporary folder)' : 'node --import tsx src/main.ts'}, capture none:`);
  const d = await phase('start-up (the profiled, last start)', () => benchStartup(configFile, root, builtMain));
  await phase('queries', () => benchQueries(d));
  await benchMemory(d);
  await phase('run_tests jobs', () => benchRunTests(d, sha));
  if (opts.downloads > 0) await phase('downloads (nginx and farmhand alternating)', () => benchDownload(d, root, artifactDir, artifactUrlPath));
  else log('downloads: skipped (--downloads 0)');
  const m = procMemory(d.pid);
  log(`daemon memory at the end: VmRSS ${m.rssMb.toFixed(1)} MiB, peak VmHWM ${m.hwmMb.toFixed(1)} MiB`);
  const code = await d.stop();
  live.daemon = undefined;
  if (code !== 0) log(`the daemon exited with ${code} on SIGTERM`);
  if (opts.profileDir) printProfile(opts.profileDir, builtMain ? dirname(dirname(builtMain)) : PROJECT_ROOT);
  targets.printSummary();
}

const watchdog = setTimeout(() => {
  console.error(`http-bench: over the ${TIME_LIMIT_MS / 1000} s limit; stopping`);
  void cleanup().finally(() => process.exit(2));
}, TIME_LIMIT_MS);
process.once('SIGINT', () => void cleanup().finally(() => process.exit(130)));

try {
  await main();
  process.exitCode = targets.missed.length ? 1 : 0;
} catch (e) {
  console.error(`http-bench failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  process.exitCode = 2;
} finally {
  await cleanup();
  clearTimeout(watchdog);
}
