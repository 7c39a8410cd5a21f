/**
 * What the portal's forwarding costs a caller: the same v2 calls asked of a
 * real node directly and through a real portal (startPortal over a throwaway
 * PostgreSQL) that forwards them over the node's PortalLink. Sequential
 * requests, one process for both (loopback, the same CPU): prints the median
 * and p95 of each and the ratio portal/direct.
 *   node --import tsx bench/farm-link-bench.ts [--n 300]
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { TokenStore, tokensFile } from '../src/storage/tokens.js';
import { startTestDaemon, waitOnline } from '../test/helpers/daemon.js';
import { startTestPortal } from '../test/helpers/farmPortal.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { waitFor } from '../test/helpers/wait.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const N = arg('n', 300);
const NODE = 'farmhand-test';
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function get(url: string, token: string): Promise<{ status: number; bytes: number }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent, headers: { Authorization: `token ${token}` } }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

async function timeIt(n: number, url: string, token: string): Promise<{ median: number; p95: number; bytes: number }> {
  const ms: number[] = [];
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const r = await get(url, token);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (r.status !== 200) throw new Error(`${url} answered ${r.status}`);
    bytes = r.bytes;
  }
  ms.sort((a, b) => a - b);
  return { median: ms[Math.floor(n / 2)]!, p95: ms[Math.floor(n * 0.95)]!, bytes };
}

async function main(): Promise<void> {
  const cluster = await startPostgres();
  // The node's own rate limit would throttle a sequential loop; the bench measures forwarding, not the limiter.
  const t = await startTestPortal(cluster, { heartbeat_secs: 5 });
  const credential = await t.registerNode(NODE);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-bench-cred-'));
  await writeFile(path.join(dir, 'credential'), credential);
  const d = await startTestDaemon({
    config: { portal: { url: t.portal.url, node_credential_file: path.join(dir, 'credential') }, rate_limit: { requests_per_second: 100_000, burst: 100_000 } },
  });
  try {
    await waitOnline(d);
    await waitFor(() => t.portal.hub.link(NODE)?.online, { what: 'the node on the portal', timeoutMs: 30_000 });
    const nodeToken = (await new TokenStore(tokensFile(d.dataDir)).create('bench')).token;
    const portalToken = t.tokenFor('bench');
    // One job, so the node has a job to answer with.
    const run = await fetch(`${d.url}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${nodeToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass'], shuffle: false, tags: {} }),
    });
    const { job_uid } = (await run.json()) as { job_uid: string };
    await fetch(`${d.url}/api/v2/jobs${job_uid}/await_completion`, { headers: { Authorization: `token ${nodeToken}` } });
    const cases: Array<[string, string, number]> = [
      ['GET /api/v2/nodes/<id>/job (small JSON)', `/api/v2/nodes/${NODE}/job`, N],
      ['GET /api/v2/nodes/<id>/screenshot.png', `/api/v2/nodes/${NODE}/screenshot.png`, Math.max(20, Math.floor(N / 5))],
    ];
    console.log(`farm link bench: ${N} sequential requests per case (screenshots: fewer), node and portal in one process, Node ${process.version}`);
    for (const [name, p, n] of cases) {
      await timeIt(5, `${d.url}${p}`, nodeToken); // warm-up
      await timeIt(5, `${t.portal.url}${p}`, portalToken);
      const direct = await timeIt(n, `${d.url}${p}`, nodeToken);
      const viaPortal = await timeIt(n, `${t.portal.url}${p}`, portalToken);
      console.log(
        `${name}: direct median ${direct.median.toFixed(2)} ms p95 ${direct.p95.toFixed(2)} ms; through the portal median ${viaPortal.median.toFixed(2)} ms p95 ${viaPortal.p95.toFixed(2)} ms; ratio ${(viaPortal.median / direct.median).toFixed(2)}x (${viaPortal.bytes} bytes)`,
      );
    }
  } finally {
    agent.destroy();
    await d.stop();
    await t.stop();
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
