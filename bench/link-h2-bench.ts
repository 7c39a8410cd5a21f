/**
 * Forwarded requests over the node's link, HTTP/2 streams in the WebSocket (protocol 3; docs/farm.md, "Forwarded
 * requests: HTTP/2 over the WebSocket"): a real portal (startPortal, throwaway PostgreSQL) and a real node.
 * - the same sequential v2 calls through the portal (median, p95);
 * - a slow client: the node's live MJPEG stream forwarded and not read for 2 s: the bytes then held on the portal
 *   for that one request (at most the stream's window), and whether dropping it ends the request at the node.
 * The link's former multiplexer (protocol 2) is measured by this file as it was before protocol 3 (git show
 * c31a645:bench/link-h2-bench.ts, run in a checkout of that commit: it runs both transports of that time); docs/farm.md
 * has both runs' numbers, made one after the other.
 *   node --import tsx bench/link-h2-bench.ts [--n 300]
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { startTestDaemon, waitOnline, type TestDaemon } from '../test/helpers/daemon.js';
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

function get(url: string, token: string): Promise<number> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { agent, headers: { Authorization: `token ${token}` } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      })
      .on('error', reject);
  });
}

async function timeIt(n: number, url: string, token: string): Promise<{ median: number; p95: number }> {
  const ms: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = process.hrtime.bigint();
    const status = await get(url, token);
    ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
    if (status !== 200) throw new Error(`${url} answered ${status}`);
  }
  ms.sort((a, b) => a - b);
  return { median: ms[Math.floor(n / 2)]!, p95: ms[Math.floor(n * 0.95)]! };
}

async function main(): Promise<void> {
  const cluster = await startPostgres();
  const t = await startTestPortal(cluster, { heartbeat_secs: 5 });
  const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-bench-h2-'));
  await writeFile(path.join(dir, 'credential'), await t.registerNode(NODE));
  const token = t.tokenFor('bench');
  let d: TestDaemon | undefined;
  console.log(`link bench (HTTP/2 over the WebSocket): ${N} sequential requests per case, node and portal in one process, Node ${process.version}`);
  try {
    d = await startTestDaemon({
      config: { node_id: NODE, portal: { url: t.portal.url, node_credential_file: path.join(dir, 'credential') }, rate_limit: { requests_per_second: 100_000, burst: 100_000 } },
    });
    await waitOnline(d);
    await waitFor(() => t.portal.hub.link(NODE)?.online, { what: 'the node on the portal', timeoutMs: 30_000 });
    const name = 'HTTP/2 over the WebSocket';
    for (const [what, p, n] of [
      ['GET /api/v2/nodes/<id>/thumbnail.jpg', `/api/v2/nodes/${NODE}/thumbnail.jpg`, N],
      ['GET /api/v2/nodes/<id>/screenshot.png', `/api/v2/nodes/${NODE}/screenshot.png`, Math.max(20, Math.floor(N / 4))],
    ] as const) {
      await timeIt(10, `${t.portal.url}${p}`, token);
      const r = await timeIt(n, `${t.portal.url}${p}`, token);
      console.log(`${name}: ${what}: median ${r.median.toFixed(2)} ms p95 ${r.p95.toFixed(2)} ms`);
    }
    const res = await t.portal.hub.forward(NODE, { method: 'GET', path: '/app/live/stream.mjpeg', headers: {}, user: 'bench', baseUrl: t.portal.url });
    res.body.pause();
    await delay(2000); // a client that reads nothing for 2 s
    const held = res.body.readableLength;
    // Meanwhile the link is not held up: a call made while the stream waits unread.
    const during = await timeIt(20, `${t.portal.url}/api/v2/nodes/${NODE}/thumbnail.jpg`, token);
    res.body.destroy();
    await waitFor(() => t.portal.hub.forwardsInFlight() === 0, { what: 'the forward to end', timeoutMs: 10_000 });
    console.log(`${name}: live MJPEG stream not read for 2 s: ${(held / 1024).toFixed(0)} KiB held on the portal for it; thumbnail meanwhile: median ${during.median.toFixed(2)} ms; dropped: the forward ended (in flight 0)`);
  } finally {
    agent.destroy();
    await d?.stop();
    await t.stop();
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
