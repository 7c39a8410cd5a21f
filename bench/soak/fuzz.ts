/**
 * Fuzz soak (issue 11): the daemon runs in this process (startDaemon), so
 * `perf_hooks.monitorEventLoopDelay` measures its own event loop, while a
 * seeded generator (test/helpers/fuzzRequests.ts) in a child process (so
 * that its own work, compressing bodies, is not counted) sends hostile
 * requests to every route: every method, content encodings, odd headers, paths and query
 * strings. Prints requests sent, counts by status, answers of 500 (must be 0)
 * and event-loop stalls over 100 ms (must be 0). Exits 1 otherwise.
 *
 *   node --import tsx bench/soak/fuzz.ts [--requests 20000] [--seed 1] [--concurrency 16]
 */
import { fork } from 'node:child_process';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { startDaemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/logger.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack } from '../../test/fixtures/testPack.js';
import { testConfig } from '../../test/helpers/daemon.js';
import { fuzz, type FuzzTargets } from '../../test/helpers/fuzzRequests.js';

type FuzzResult = Awaited<ReturnType<typeof fuzz>>;

const { values } = parseArgs({
  options: { requests: { type: 'string', default: '20000' }, seed: { type: 'string', default: '1' }, concurrency: { type: 'string', default: '16' }, client: { type: 'string' } },
});
const count = Number(values.requests);
const seed = Number(values.seed);
const concurrency = Number(values.concurrency);

if (values.client) {
  // The child: send the requests, report to the parent.
  const { url, targets } = JSON.parse(values.client) as { url: string; targets: FuzzTargets };
  const out = await fuzz(new URL(url), targets, { count, seed, concurrency, onProgress: (n) => n % 5000 === 0 && console.error(`  ... ${n} requests`) });
  process.send!(out, () => process.exit(0));
} else {
  await main();
}

async function main(): Promise<void> {

  const pack = await makeTestPack({
    'tests/t.py': 'def test_pass():\n    open("note.txt", "w").write("hi")\n',
    'config/stbt.conf': '[test_pack]\ndefault_remote_control = vstb\n',
    'config/remote-control/vstb.lircd.conf': 'begin remote\n  name vstb\n  begin codes\n    KEY_OK 0x1\n  end codes\nend remote\n',
  });
  const parent = await mkdtemp(path.join(os.tmpdir(), 'farmhand-fuzz-soak-'));
  const dataDir = path.join(parent, 'data');
  await mkdir(dataDir);
  // No rate limit: the handlers are under test, not the limiter.
  const daemon = await startDaemon(testConfig(pack.dir, dataDir, { capture: { uri: 'none:' }, rate_limit: { requests_per_second: 1e6, burst: 1e6, artifact_burst: 1e6 } }), silentLogger);
  const token = (await new TokenStore(tokensFile(dataDir)).create('fuzzer')).token;
  const run = await fetch(`${daemon.url}/api/v1/run_tests`, { method: 'POST', body: JSON.stringify({ test_pack_revision: 'main', test_cases: ['tests/t.py::test_pass'] }) });
  const jobUid = ((await run.json()) as { job_uid: string }).job_uid;
  await new Promise<void>((resolve) => {
    const poll = async () => {
      const j = (await (await fetch(`${daemon.url}/api/v1/jobs${jobUid}`)).json()) as { status: string };
      if (j.status === 'exited') resolve();
      else setTimeout(() => void poll(), 50);
    };
    void poll();
  });
  const resultId = (((await (await fetch(`${daemon.url}/api/v1/results`)).json()) as Array<{ result_id: string }>)[0]!).result_id;

  // Stalls: the histogram's max, and the 10 ms ticks that came more than 100 ms late. A late tick
  // during which this process was on a CPU most of the time is blocking (the loop was busy); one
  // during which it mostly was not is the machine not running us (a loaded box), counted apart.
  const histogram = monitorEventLoopDelay({ resolution: 10 });
  histogram.enable();
  const stalls = { blocking: 0, starved: 0, worstBlocking: 0, worstStarved: 0 };
  let last = performance.now();
  let lastCpu = process.cpuUsage();
  const ticker = setInterval(() => {
    const now = performance.now();
    const cpu = process.cpuUsage();
    const late = now - last - 10;
    if (late > 100) {
      const onCpuMs = (cpu.user - lastCpu.user + cpu.system - lastCpu.system) / 1000;
      if (onCpuMs >= 0.8 * (now - last)) {
        stalls.blocking++;
        stalls.worstBlocking = Math.max(stalls.worstBlocking, late);
      } else {
        stalls.starved++;
        stalls.worstStarved = Math.max(stalls.worstStarved, late);
      }
    }
    last = now;
    lastCpu = cpu;
  }, 10);

  const t0 = performance.now();
  const targets: FuzzTargets = { node: daemon.services.nodeId, jobUid, resultId, token };
  const client = fork(new URL(import.meta.url).pathname, ['--requests', String(count), '--seed', String(seed), '--concurrency', String(concurrency), '--client', JSON.stringify({ url: daemon.url, targets })], {
    execArgv: ['--import', 'tsx'],
  });
  const out = await new Promise<FuzzResult>((resolve, reject) => {
    client.once('message', (m) => resolve(m as FuzzResult));
    client.once('exit', (code) => reject(new Error(`the fuzz client exited ${code} without a report`)));
  });
  const secs = (performance.now() - t0) / 1000;
  clearInterval(ticker);
  histogram.disable();

  const fiveHundreds = out.counts[500] ?? 0;
  const byStatus = Object.entries(out.counts).sort(([a], [b]) => Number(a) - Number(b)).map(([s, n]) => `${s === '-1' ? 'closed' : s}: ${n}`).join(', ');
  console.log(`fuzz soak: seed ${seed}, concurrency ${concurrency}, ${secs.toFixed(1)} s`);
  console.log(`requests sent: ${out.sent} (${out.refused} more generated that Node would not send)`);
  console.log(`counts by status: ${byStatus}`);
  console.log(`answers of 500: ${fiveHundreds}`);
  console.log(`other problems (5xx besides 503/507, non-JSON errors): ${out.problems.length - fiveHundreds}`);
  console.log(`event-loop stalls over 100 ms: ${stalls.blocking} with the daemon busy on the CPU${stalls.blocking ? ` (worst ${stalls.worstBlocking.toFixed(0)} ms)` : ''}; ${stalls.starved} more while the machine did not run the daemon${stalls.starved ? ` (worst ${stalls.worstStarved.toFixed(0)} ms)` : ''}`);
  console.log(`event-loop delay (monitorEventLoopDelay, all causes): max ${(histogram.max / 1e6).toFixed(1)} ms, p99 ${(histogram.percentile(99) / 1e6).toFixed(1)} ms, mean ${(histogram.mean / 1e6).toFixed(2)} ms; machine load average ${os.loadavg()[0]!.toFixed(1)} on ${os.cpus().length} CPUs`);
  for (const p of out.problems.slice(0, 20)) console.log(`  problem: ${p}`);

  await daemon.stop();
  await rm(parent, { recursive: true, force: true });
  await pack.cleanup();
  process.exitCode = out.problems.length === 0 && stalls.blocking === 0 ? 0 : 1;
}
