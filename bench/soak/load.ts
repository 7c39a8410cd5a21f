/**
 * Load soak: the CLI daemon in its own process (testsrc capture at 320x240),
 * 20,000 mixed requests, 128 in flight, from 8 token clients and anonymous
 * v1 callers, while a well-behaved client polls one request at a time.
 * Prints every status count and the well-behaved client's median and p99
 * latency without and with the load. Exits 1 on any 5xx or network error.
 *
 *   node --import tsx bench/soak/load.ts [requests=20000] [concurrency=128]
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { kill, startCli } from '../../test/integration/crash-lib.js';
import { percentile, quietClient, runLoad } from '../../test/integration/load-lib.js';
import { makeTestPack } from '../../test/fixtures/testPack.js';

const total = Number(process.argv[2] ?? 20_000);
const concurrency = Number(process.argv[3] ?? 128);
const pack = await makeTestPack({ 'tests/t.py': 'def test_pass():\n    print("ok")\n\ndef test_fail():\n    assert False, "no"\n' });
const root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-load-'));
const dataDir = path.join(root, 'data');
const configFile = path.join(root, 'farmhand.json');
await writeFile(configFile, JSON.stringify({ node_id: 'load-node', listen: '127.0.0.1:0', data_dir: dataDir, test_pack: { url: pack.dir }, capture: { uri: 'testsrc:', width: 320, height: 240, record_video: false }, log_level: 'warn' }));
const cli = await startCli(configFile);
try {
  // The node is offline until capture delivers frames: retry until run_tests is accepted.
  let run: { job_uid: string } | undefined;
  for (let i = 0; i < 300 && !run; i++) {
    const res = await fetch(`${cli.url}/api/v1/run_tests`, { method: 'POST', body: JSON.stringify({ test_pack_revision: 'main', test_cases: ['tests/t.py::test_pass', 'tests/t.py::test_fail'] }) });
    if (res.status === 200) run = (await res.json()) as { job_uid: string };
    else await new Promise((r) => setTimeout(r, 100));
  }
  if (!run) throw new Error('run_tests never accepted');
  for (;;) {
    const j = (await (await fetch(`${cli.url}/api/v1/jobs${run.job_uid}`)).json()) as { status: string };
    if (j.status === 'exited') break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const results = (await (await fetch(`${cli.url}/api/v1/results`)).json()) as Array<{ result_id: string }>;
  const store = new TokenStore(tokensFile(dataDir));
  const tokens: string[] = [];
  for (let i = 0; i < 8; i++) tokens.push((await store.create(`ci-${i}`)).token);
  const quietToken = (await store.create('quiet')).token;
  const target = { url: cli.url, tokens, quietToken, nodeId: 'load-node', jobUid: run.job_uid, resultIds: results.map((r) => r.result_id) };

  const idle = await quietClient(target, 200, 20);
  const t0 = Date.now();
  const loaded = await runLoad(target, total, concurrency, { count: 200, pauseMs: 20 });
  const secs = (Date.now() - t0) / 1000;
  const fmt = (xs: number[]) => `median ${percentile(xs, 50).toFixed(1)} ms, p99 ${percentile(xs, 99).toFixed(1)} ms`;
  console.log(`requests: ${loaded.sent} in ${secs.toFixed(1)} s (${(loaded.sent / secs).toFixed(0)}/s), ${concurrency} in flight; statuses ${JSON.stringify(loaded.statuses)}; network errors ${loaded.networkErrors}`);
  console.log(`well-behaved client, idle daemon: ${fmt(idle.latenciesMs)}; statuses ${JSON.stringify(idle.statuses)}`);
  console.log(`well-behaved client, under load:  ${fmt(loaded.quiet.latenciesMs)}; statuses ${JSON.stringify(loaded.quiet.statuses)}`);
  const alive = (await fetch(`${cli.url}/api/v2/user`, { headers: { Authorization: `token ${quietToken}` } })).status;
  console.log(`daemon alive afterwards: ${alive === 200 ? 'yes' : `no (${alive})`}`);
  const bad = Object.keys(loaded.statuses).map(Number).filter((s) => s >= 500).length + loaded.networkErrors + (alive === 200 ? 0 : 1) + (loaded.quiet.statuses[429] ?? 0);
  process.exitCode = bad ? 1 : 0;
} finally {
  await kill(cli);
  await rm(root, { recursive: true, force: true });
  await pack.cleanup();
}
