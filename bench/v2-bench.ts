/**
 * v2 benchmark (issue 3): `node --import tsx bench/v2-bench.ts`.
 *
 * A whole daemon as a separate process with 100,000 generated results:
 *   - GET /api/v2/results.csv and results.xml of 2,000 results (median of 30) <= 100 ms;
 *   - 1,000 concurrent await_completion waiters on one job: all answered within
 *     100 ms of the job's end, and the daemon's resident memory grows by <= 50 MB
 *     while they wait.
 * Options: --count N (results), --waiters N, --runs N. Cleans up after itself.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TokenStore, tokensFile } from '../src/storage/tokens.js';
import { makeTestPack, type TestPackRepo } from '../test/fixtures/testPack.js';
import { startBenchDaemon, writeDaemonConfig, type BenchDaemon } from './lib/daemon.js';
import { procMemory } from './lib/processes.js';
import { generateResults } from './lib/results-data.js';
import { formatSummary, summarize, Targets } from './lib/stats.js';

const NODE = 'farmhand-bench';
const arg = (name: string, dflt: number) => (process.argv.includes(name) ? Number(process.argv[process.argv.indexOf(name) + 1]) : dflt);
const opts = { count: arg('--count', 100_000), waiters: arg('--waiters', 1000), runs: arg('--runs', 30) };
const targets = new Targets();

/** One request on its own connection; resolves with status, body and when it finished. */
function request(url: string, token: string, method = 'GET', json?: unknown): Promise<{ status: number; body: string; at: number; ms: number }> {
  const payload = json === undefined ? undefined : Buffer.from(JSON.stringify(json));
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, agent: false, headers: { Authorization: `token ${token}`, ...(payload && { 'Content-Length': payload.length }) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString(), at: Date.now(), ms: performance.now() - t0 }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(payload);
  });
}

async function main(): Promise<void> {
  const root = mkdtempSync(join(tmpdir(), 'farmhand-v2bench-'));
  let daemon: BenchDaemon | undefined;
  let pack: TestPackRepo | undefined;
  try {
    const dataDir = join(root, 'data');
    mkdirSync(join(dataDir, 'results'), { recursive: true });
    generateResults(join(dataDir, 'results'), opts.count, NODE);
    pack = await makeTestPack({ 'tests/slow.py': 'import time\n\ndef test_slow():\n    time.sleep(6)\n', 'config/stbt.conf': '[test_pack]\ndefault_remote_control = none\n', 'config/remote-control/none.lircd.conf': 'begin remote\n  name none\nend remote\n' });
    const { token } = await new TokenStore(tokensFile(dataDir)).create('bench');
    const configFile = await writeDaemonConfig(root, pack.dir, dataDir, { node_id: NODE, capture: { uri: 'none:' }, log_level: 'warn' } as never);
    daemon = await startBenchDaemon({ configFile, logFile: join(root, 'daemon.log'), probePath: '/api/v1/results?filter=job:/x/0000/1' });
    const url = daemon.url;

    for (const [name, path] of [
      ['results.csv', '/api/v2/results.csv'],
      ['results.xml', '/api/v2/results.xml?include_tz=true'],
    ] as const) {
      const times: number[] = [];
      let rows = 0;
      for (let i = 0; i < opts.runs; i++) {
        const res = await request(`${url}${path}`, token);
        if (res.status !== 200) throw new Error(`${path}: ${res.status} ${res.body.slice(0, 200)}`);
        rows = name === 'results.csv' ? res.body.trimEnd().split('\r\n').length - 1 : res.body.split('<testcase ').length - 1;
        times.push(res.ms);
      }
      const s = summarize(times);
      targets.check(`GET /api/v2/${name} (${rows} of ${opts.count})`, s.median, '<=', 100, 'ms', formatSummary(s, 'ms'));
    }

    // 1,000 waiters on one job.
    const run = await request(`${url}/api/v2/run_tests`, token, 'POST', { node_id: NODE, test_pack_revision: pack.sha, test_cases: ['tests/slow.py::test_slow'] });
    if (run.status !== 200) throw new Error(`run_tests: ${run.status} ${run.body}`);
    const uid = (JSON.parse(run.body) as { job_uid: string }).job_uid;
    await new Promise((r) => setTimeout(r, 500));
    const before = procMemory(daemon.pid).rssMb;
    const waiters = Array.from({ length: opts.waiters }, () => request(`${url}/api/v2/jobs${uid}/await_completion`, token));
    await new Promise((r) => setTimeout(r, 2500));
    const during = procMemory(daemon.pid).rssMb;
    const answers = await Promise.all(waiters);
    const job = JSON.parse((await request(`${url}/api/v2/jobs${uid}`, token)).body) as { end_time: string };
    const ended = Date.parse(job.end_time);
    const statuses = new Set(answers.map((a) => a.status));
    const lags = answers.map((a) => a.at - ended);
    const s = summarize(lags);
    console.log(`waiters answered with ${[...statuses].join(', ')}; lag after the job's end_time: ${formatSummary(s, 'ms')}`);
    targets.check(`${opts.waiters} await_completion waiters answered after the job ends`, Math.max(...lags), '<=', 100, 'ms', `slowest of ${answers.length}, all ${[...statuses].join('/')}`);
    targets.check(`resident memory growth with ${opts.waiters} waiters`, during - before, '<=', 50, 'MB', `${before.toFixed(1)} -> ${during.toFixed(1)} MB`);
  } finally {
    await daemon?.stop();
    await pack?.cleanup();
    rmSync(root, { recursive: true, force: true });
  }
  targets.printSummary();
  process.exitCode = targets.missed.length ? 1 : 0;
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 2;
});
