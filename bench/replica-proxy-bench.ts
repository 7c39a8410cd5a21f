/**
 * What a request for a node costs through a replica that does not hold it (docs/farm.md, "Many portals: the
 * proxy"): two portal replicas (mode "many") on one throwaway PostgreSQL, a real node connected to replica A, and
 * the same v2 calls made at A (which forwards them to the node) and at B (which proxies them to A over HTTP, signed).
 * Sequential requests, A and B alternating, one process (loopback, the same CPU): prints the median and p95 of each,
 * the median added by B and the ratio B/A of the same run. Target: <= 3 ms median added.
 *   node --import tsx bench/replica-proxy-bench.ts [--n 400]
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { startTestDaemon, waitOnline } from '../test/helpers/daemon.js';
import { connectionString, startTestPortal } from '../test/helpers/farmPortal.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { waitFor } from '../test/helpers/wait.js';
import { freePort } from './lib/processes.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const N = arg('n', 400);
const NODE = 'bench-node';
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

async function once(url: string, token: string): Promise<number> {
  const t0 = process.hrtime.bigint();
  const r = await get(url, token);
  if (r.status !== 200) throw new Error(`${url} answered ${r.status}`);
  return Number(process.hrtime.bigint() - t0) / 1e6;
}

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))]!;

async function main(): Promise<void> {
  const cluster = await startPostgres();
  const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-bench-replicas-'));
  await writeFile(path.join(dir, 'secret'), randomBytes(32).toString('hex'));
  // Each replica listens where it advertises (its lease row says so: B proxies there), on a port picked free just before.
  const replica = async (id: string) => {
    const port = await freePort();
    return { heartbeat_secs: 5, listen: `127.0.0.1:${port}`, replicas: { mode: 'many' as const, replica_id: id, advertise_url: `http://127.0.0.1:${port}`, secret_file: path.join(dir, 'secret') } };
  };
  const a = await startTestPortal(cluster, await replica('pa'));
  const b = await startTestPortal(cluster, await replica('pb'));
  await writeFile(path.join(dir, 'credential'), await a.registerNode(NODE));
  const d = await startTestDaemon({
    config: { node_id: NODE, portal: { url: a.portal.url, node_credential_file: path.join(dir, 'credential') }, rate_limit: { requests_per_second: 100_000, burst: 100_000 } },
  });
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 1 });
  try {
    await waitOnline(d);
    await waitFor(() => a.portal.hub.link(NODE)?.online, { what: 'the node on replica A', timeoutMs: 30_000 });
    // Ownership as replica A records it at hello (each replica's lease row is its own, with its URL).
    await db.query(`UPDATE nodes SET owner_replica = 'pa', owner_epoch = owner_epoch + 1 WHERE node_id = $1 AND owner_replica IS DISTINCT FROM 'pa'`, [NODE]);
    const ta = a.tokenFor('bench');
    const tb = b.tokenFor('bench');
    // One job, so the node has a job to answer with.
    const run = await fetch(`${a.portal.url}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${ta}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass'], shuffle: false, tags: {} }),
    });
    const { job_uid } = (await run.json()) as { job_uid: string };
    await fetch(`${a.portal.url}/api/v2/jobs${job_uid}/await_completion`, { headers: { Authorization: `token ${ta}` } });
    const cases: Array<[string, string, number]> = [
      ['GET /api/v2/nodes/<id>/job (small JSON)', `/api/v2/nodes/${NODE}/job`, N],
      ['GET /api/v2/nodes/<id>/screenshot.png', `/api/v2/nodes/${NODE}/screenshot.png`, Math.max(40, Math.floor(N / 4))],
    ];
    console.log(`replica proxy bench: ${N} sequential requests per case (screenshots: fewer), A and B alternating, one process, Node ${process.version}`);
    for (const [name, p, n] of cases) {
      for (let i = 0; i < 10; i++) {
        await once(`${a.portal.url}${p}`, ta);
        await once(`${b.portal.url}${p}`, tb);
      }
      const atA: number[] = [];
      const atB: number[] = [];
      const added: number[] = [];
      for (let i = 0; i < n; i++) {
        const x = await once(`${a.portal.url}${p}`, ta);
        const y = await once(`${b.portal.url}${p}`, tb);
        atA.push(x);
        atB.push(y);
        added.push(y - x);
      }
      for (const s of [atA, atB, added]) s.sort((u, v) => u - v);
      const ma = pct(atA, 0.5);
      const mb = pct(atB, 0.5);
      console.log(
        `${name}: at A (owner) median ${ma.toFixed(2)} ms p95 ${pct(atA, 0.95).toFixed(2)} ms; through B median ${mb.toFixed(2)} ms p95 ${pct(atB, 0.95).toFixed(2)} ms; ` +
          `added: median of medians ${(mb - ma).toFixed(2)} ms, median of pairs ${pct(added, 0.5).toFixed(2)} ms; ratio ${(mb / ma).toFixed(2)}x`,
      );
    }
  } finally {
    agent.destroy();
    await db.end();
    await d.stop();
    await b.stop();
    await a.stop();
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 1;
});
