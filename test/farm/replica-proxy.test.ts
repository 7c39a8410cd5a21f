/**
 * Two portal replicas on one throwaway PostgreSQL cluster (mode "many"), a real node connected to replica A, and
 * every call made through replica B: B does not hold the node's connection, finds its owner in `nodes.owner_replica`
 * and `portal_replicas` (written here as ownership at hello writes them) and passes the request to A over HTTP,
 * signed with the replicas' secret (docs/farm.md, "Many portals: the proxy"). On the code before, B answered each of
 * these 503: the node is not connected to it.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { freePort } from '../helpers/processFarm.js';
import { waitFor } from '../helpers/wait.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { signReplicaRequest } from '../../src/farm/portal/replicaAuth.js';

const NODE = 'replica-node';
const HANG = 'tests/hang.py::test_hang';
const PASS = 'tests/basic.py::test_pass';

describe('farm: a node of another replica, proxied to it', function () {
  this.timeout(240_000);
  let cluster: TestPostgres;
  let a: TestFarm;
  let b: TestFarm;
  let pack: TestPackRepo;
  let dir: string;
  let secret: string;
  let alice: string;

  /**
   * The node's owner as the replica it connected to records it at hello, with that replica's lease (where branch
   * `replicas` already wrote them, nothing changes: the same owner, its epoch kept, its own lease row).
   */
  const own = async (owner: string, urlOfOwner: string) => {
    await a.db.query(`UPDATE nodes SET owner_replica = $1, owner_epoch = owner_epoch + 1 WHERE node_id = $2 AND owner_replica IS DISTINCT FROM $1`, [owner, NODE]);
    await a.db.query(`INSERT INTO portal_replicas (replica_id, url, lease_until) VALUES ($1, $2, now() + interval '1 hour') ON CONFLICT (replica_id) DO NOTHING`, [owner, urlOfOwner]);
    // B reads a node's owner again after OWNER_CACHE_MS (nodePlace.ts); the test does not wait for that.
    b.portal.places.forget(NODE);
  };
  /** A third replica, 'pc', that nobody runs: its row says what the test wants (a dead URL, a lapsed lease). */
  const ghost = async (url: string, leaseSecs: number) => {
    await a.db.query(
      `INSERT INTO portal_replicas (replica_id, url, lease_until) VALUES ('pc', $1, now() + make_interval(secs => $2))
       ON CONFLICT (replica_id) DO UPDATE SET url = EXCLUDED.url, lease_until = EXCLUDED.lease_until`,
      [url, leaseSecs],
    );
    await a.db.query(`UPDATE nodes SET owner_replica = 'pc', owner_epoch = owner_epoch + 1 WHERE node_id = $1`, [NODE]);
    b.portal.places.forget(NODE);
  };
  const atB = (p: string, init: RequestInit = {}) =>
    fetch(`${b.url}${p}`, { ...init, headers: { Authorization: `token ${alice}`, ...(init.body ? { 'Content-Type': 'application/json' } : {}), ...(init.headers as Record<string, string>) } });

  before(async function () {
    this.timeout(240_000);
    cluster = await startPostgres();
    pack = await makeTestPack({ ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF });
    dir = await mkdtemp(path.join(os.tmpdir(), 'replica-secret-'));
    secret = randomBytes(32).toString('hex');
    await writeFile(path.join(dir, 'secret'), `${secret}\n`, { mode: 0o600 });
    // Each replica listens where it advertises (a port picked free just before). No hold (hold_secs 0): this file
    // checks the answers themselves; a request held for a node between owners is replica-hold.test.ts's.
    const replica = async (id: string) => {
      const port = await freePort();
      return { listen: `127.0.0.1:${port}`, replicas: { mode: 'many' as const, replica_id: id, advertise_url: `http://127.0.0.1:${port}`, secret_file: path.join(dir, 'secret'), hold_secs: 0 } };
    };
    // Both replicas start before the node connects (each marks the farm's nodes offline at start: branch replicas
    // limits that to the replica's own nodes).
    a = await startTestFarm({ cluster, portal: await replica('pa') });
    b = await startTestFarm({ cluster, portal: await replica('pb') });
    await a.addNode(NODE, { pack, config: { runner: { stop_response_secs: 60 }, ir: { uri: 'virtual:' } } });
    await own('pa', a.url);
    alice = await b.tokenFor('alice');
  });
  after(async () => {
    await b?.stop();
    await a?.stop();
    await cluster?.stop();
    await pack?.cleanup();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('answers the node status, a screenshot and a v2 press through B, from the node on A, with URLs of B', async () => {
    expect(b.portal.hub.link(NODE), 'B holds no connection of the node').to.equal(undefined);
    const status = await atB(`/api/v2/nodes/${NODE}`);
    expect(status.status, await status.clone().text()).to.equal(200);
    const node = (await status.json()) as Record<string, unknown>;
    expect(node).to.include({ node_id: NODE, online: true, node_url: `${b.url}/api/v2/nodes/${NODE}` });
    const png = await atB(`/api/v2/nodes/${NODE}/screenshot.png`);
    expect(png.status).to.equal(200);
    expect(png.headers.get('content-type')).to.equal('image/png');
    expect(png.headers.get('x-content-type-options')).to.equal('nosniff');
    expect(Buffer.from(await png.arrayBuffer()).subarray(1, 4).toString()).to.equal('PNG');
    const press = await atB(`/api/v2/nodes/${NODE}/press`, { method: 'POST', body: JSON.stringify({ key: 'KEY_OK' }) });
    expect(press.status, await press.clone().text()).to.equal(204);
    expect(b.portal.proxy!.stats.total).to.be.at.least(3);
    const metrics = await (await atB('/metrics')).text();
    expect(Number(/^farmhand_portal_replica_proxied_total (\d+)$/m.exec(metrics)?.[1])).to.be.at.least(3);
  });

  it('runs a job through B: run_tests, await_completion and the job log, the job named as the caller', async () => {
    const run = await atB('/api/v2/run_tests', { method: 'POST', body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: [PASS], shuffle: false, tags: {} }) });
    expect(run.status, await run.clone().text()).to.equal(200);
    const job = (await run.json()) as { job_uid: string; job_url: string };
    expect(job.job_url.startsWith(`${b.url}/api/v2/jobs/`), job.job_url).to.equal(true);
    const done = await waitFor(
      async () => {
        const r = await atB(`/api/v2/jobs${job.job_uid}/await_completion`);
        return r.status === 200 ? ((await r.json()) as Record<string, unknown>) : (await r.body?.cancel(), undefined);
      },
      { what: 'the job to end, awaited through B', timeoutMs: 120_000 },
    );
    expect(done).to.include({ job_uid: job.job_uid, status: 'exited' });
    // The node ran it for the caller B authenticated, named to A in the signed request.
    expect((await a.db.query<{ username: string }>('SELECT username FROM jobs WHERE job_uid = $1', [job.job_uid])).rows[0]?.username).to.equal('alice');
    const log = await atB(`/api/v2/jobs${job.job_uid}/log`, { redirect: 'follow' });
    expect(log.status, await log.clone().text()).to.equal(200);
    expect(await log.text()).to.include('test_pass');
  });

  it('stops a job through B', async () => {
    const run = await atB('/api/v2/run_tests', { method: 'POST', body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: [HANG], shuffle: false, tags: {} }) });
    expect(run.status, await run.clone().text()).to.equal(200);
    const { job_uid: uid } = (await run.json()) as { job_uid: string };
    await waitFor(async () => (await a.db.query('SELECT 1 FROM jobs WHERE job_uid = $1 AND current_run IS NOT NULL', [uid])).rowCount === 1, {
      what: 'the hanging run in flight',
      timeoutMs: 60_000,
    });
    const stop = await atB(`/api/v2/jobs${uid}/stop`, { method: 'POST', body: '{}' });
    expect(stop.status, await stop.clone().text()).to.equal(200);
    expect(await stop.json()).to.include({ job_uid: uid, status: 'exited' });
  });

  it('answers test_case_names through B, which holds no node, from the node on A', async () => {
    expect(b.portal.hub.links().filter((l) => l.online), 'B holds no node').to.deep.equal([]);
    const r = await atB('/api/v2/test_pack/main/test_case_names');
    expect(r.status, await r.clone().text()).to.equal(200);
    expect(await r.json()).to.include(PASS);
  });

  it('records a job run and stopped through B once in the audit trail: the row of B, which the caller called', async () => {
    const run = await atB('/api/v2/run_tests', { method: 'POST', body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: [HANG], shuffle: false, tags: {} }) });
    expect(run.status, await run.clone().text()).to.equal(200);
    const { job_uid: uid } = (await run.json()) as { job_uid: string };
    const stop = await atB(`/api/v2/jobs${uid}/stop`, { method: 'POST', body: '{}' });
    expect(stop.status, await stop.clone().text()).to.equal(200);
    // Each replica queues its rows before it answers; reading the trail at each writes its queue first.
    const root = await b.tokenFor('root', 'admin');
    for (const url of [a.url, b.url]) expect((await fetch(`${url}/api/v2/audit?limit=1`, { headers: { Authorization: `token ${root}` } })).status).to.equal(200);
    const { rows } = await a.db.query<{ action: string; who: string; via: string }>(`SELECT action, who, via FROM audit WHERE target = $1 ORDER BY id`, [uid]);
    expect(rows).to.deep.equal([
      { action: 'job.run', who: 'alice', via: 'token' },
      { action: 'job.stop', who: 'alice', via: 'token' },
    ]);
  });

  it('streams the live MJPEG view through B, and a viewer that leaves ends the stream on A and at the node', async () => {
    const parts = await new Promise<{ n: number; close: () => void; type: string }>((resolve, reject) => {
      let n = 0;
      const req = http.get(`${b.url}/app/nodes/${NODE}/live/stream.mjpeg`, { headers: { Authorization: `token ${alice}` } }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
        res.on('data', (c: Buffer) => {
          n += c.toString('latin1').split('--farmhandframe').length - 1;
          if (n >= 3) resolve({ n, close: () => req.destroy(), type: String(res.headers['content-type']) });
        });
        res.on('error', () => undefined);
      });
      req.on('error', () => undefined);
    });
    expect(parts.type).to.match(/^multipart\/x-mixed-replace/);
    expect(b.portal.proxy!.stats.inFlight, 'the stream is passed on while it is read').to.equal(1);
    parts.close();
    await waitFor(() => b.portal.proxy!.stats.inFlight === 0, 'B to end its request to A');
    await waitFor(() => a.portal.hub.forwardsInFlight() === 0, 'A to cancel the forward at the node');
  });

  it('refuses replica headers a client sends itself, a stale or a wrongly signed request, on either replica', async () => {
    const press = `/api/v2/nodes/${NODE}/press`;
    const body = JSON.stringify({ key: 'KEY_OK' });
    const tries: { what: string; headers: Record<string, string> }[] = [
      { what: 'a bare user header', headers: { 'X-Farmhand-Replica-User': 'alice' } },
      { what: 'all three, unsigned', headers: { 'X-Farmhand-Replica': 'pb', 'X-Farmhand-Replica-User': 'alice', 'X-Farmhand-Replica-Signature': `t=${Date.now()};role=admin;v1=${'0'.repeat(64)}` } },
      { what: 'signed with another secret', headers: signReplicaRequest(randomBytes(32), 'POST', press, { replica: 'pb', user: 'alice', role: 'admin' }) },
      { what: 'signed a minute ago', headers: signReplicaRequest(Buffer.from(secret), 'POST', press, { replica: 'pb', user: 'alice', role: 'admin' }, Date.now() - 60_000) },
      { what: 'signed for another path', headers: signReplicaRequest(Buffer.from(secret), 'POST', `/api/v2/nodes/other/press`, { replica: 'pb', user: 'alice', role: 'admin' }) },
    ];
    for (const url of [a.url, b.url]) {
      for (const t of tries) {
        const r = await fetch(`${url}${press}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...t.headers }, body });
        expect(r.status, `${t.what} at ${url}`).to.equal(403);
        expect(await r.json(), t.what).to.include({ error: 'forbidden' });
      }
      // With a token of her own, a client still cannot name another user.
      const r = await fetch(`${url}${press}`, { method: 'POST', headers: { Authorization: `token ${alice}`, 'Content-Type': 'application/json', 'X-Farmhand-Replica-User': 'admin' }, body });
      expect(r.status, "token + forged user").to.equal(403);
    }
    // The same signature, right, is believed (the owner serves it as its own).
    const ok = await fetch(`${a.url}${press}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', ...signReplicaRequest(Buffer.from(secret), 'POST', press, { replica: 'pb', user: 'alice', role: 'run' }) },
      body,
    });
    expect(ok.status, await ok.clone().text()).to.equal(204);
  });

  it('answers 503 with Retry-After when the owner replica does not answer, or its lease lapsed', async () => {
    // The node's owner is a replica at a port nothing listens on: gone, its lease not yet lapsed.
    const dead = `http://127.0.0.1:${await freePort()}`;
    try {
      await ghost(dead, 3600);
      for (const p of [`/api/v2/nodes/${NODE}/screenshot.png`, `/api/v2/nodes/${NODE}/job`]) {
        const r = await atB(p);
        expect(r.status, p).to.equal(503);
        expect(r.headers.get('retry-after'), p).to.match(/^[1-9][0-9]*$/);
        expect(await r.json()).to.include({ error: 'device_unavailable' });
      }
      // Its lease lapsed: nobody holds the node; B answers as for a node away, 503 with Retry-After.
      await ghost(dead, -1);
      const r = await atB(`/api/v2/nodes/${NODE}/screenshot.png`);
      expect(r.status).to.equal(503);
      expect(r.headers.get('retry-after')).to.match(/^[1-9][0-9]*$/);
    } finally {
      await own('pa', a.url);
    }
    // The node's owner again (with branch replicas, A may have dropped and taken the node back meanwhile).
    await waitFor(
      async () => {
        const back = await atB(`/api/v2/nodes/${NODE}/screenshot.png`);
        await back.arrayBuffer();
        return back.status === 200;
      },
      'the node answering through B again',
    );
  });
});
