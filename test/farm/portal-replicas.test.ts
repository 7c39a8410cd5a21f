/**
 * Portals that can be many (issue 19 step 3; docs/farm.md, "Many portals"), with real parts: two `farmhand
 * portal` processes in replicas "many" on one throwaway PostgreSQL, a real Debian haproxy in front of them checking
 * /readyz, a real node connected through it, running a real job held open by a gate file.
 *
 * (a) Replica b starts beside replica a, whose node runs a job: past b's restart grace the node is still online
 *     and its job running (before ownership, b's start-up marked every node offline and its fault rule ended
 *     the job). A portal configured as the only one ("single") refuses to start beside them.
 * (b) A stale replica: a is stopped (SIGSTOP) with its lease still valid; the node gives it up and reconnects
 *     through HAProxy to b, which takes it at a new epoch. a resumes: its pending writes (the offline state, the
 *     fault rule) match no row and change nothing.
 * (c) b SIGKILLed: the node reconnects to a; the job is not ended, every event of it is recorded once, and the
 *     time until the node answers through HAProxy again is printed. b's lapsed row is swept.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../src/farm/db/migrate.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { connectionString } from '../helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { freePort } from '../helpers/processFarm.js';
import { startHaproxy, startPortalProcess, writePortalConfig, type Haproxy, type PortalProcess } from '../helpers/replicaFarm.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'farmhand-replicas';
const WAIT = { timeoutMs: 120_000, maxIntervalMs: 200 };

describe('farm: portal replicas ("many") on one database, behind a real HAProxy', function () {
  this.timeout(600_000);
  let cluster: TestPostgres;
  let db: pg.Pool;
  let work: string;
  let gate: string;
  let pack: TestPackRepo;
  let node: TestDaemon | undefined;
  let token: string;
  let haproxy: Haproxy;
  let a: PortalProcess;
  let b: PortalProcess;
  let uid: string;
  const ports = { a: 0, b: 0 };
  const children: PortalProcess[] = [];

  const config = (name: string, port: number, replicas: Record<string, unknown> | undefined, extra: Record<string, unknown> = {}) =>
    writePortalConfig(work, name, port, connectionString(cluster), {
      ...(replicas && { replicas: { mode: 'many', advertise_url: `http://127.0.0.1:${port}`, secret_file: path.join(work, 'replica.secret'), ...replicas } }),
      ...extra,
    });
  const start = async (name: string, port: number, file: string) => {
    const p = startPortalProcess(name, port, file);
    children.push(p);
    await p.listening(WAIT);
    return p;
  };
  const nodeRow = async () =>
    (await db.query<{ online: boolean; offline_reason: string | null; owner_replica: string | null; owner_epoch: string }>(
      'SELECT online, offline_reason, owner_replica, owner_epoch FROM nodes WHERE node_id = $1',
      [NODE],
    )).rows[0];
  const jobRow = async () =>
    (await db.query<{ state: string; end_reason: string | null; current_run: unknown }>('SELECT state, end_reason, current_run FROM jobs WHERE job_uid = $1', [uid])).rows[0];
  const metric = async (p: PortalProcess, name: string) => {
    const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`${p.url}/metrics`)).text());
    return m ? Number(m[1]) : undefined;
  };
  const viaFront = (p: string) => fetch(`${haproxy.url}${p}`, { headers: { Authorization: `token ${token}` } });

  before(async function () {
    this.timeout(180_000);
    cluster = await startPostgres();
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
    await migrate(db);
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-replicas-'));
    await writeFile(path.join(work, 'replica.secret'), 'a secret every replica of the test shares\n', { mode: 0o600 });
    gate = path.join(work, 'gate');
    pack = await makeTestPack({
      ...STANDARD_FILES,
      'tests/gated.py': ['import os, time', '', 'def test_gate():', `    while not os.path.exists(${JSON.stringify(gate)}):`, '        time.sleep(0.05)', ''].join('\n'),
    });
    await new PgUsers(db).add('erin');
    token = (await new PgTokens(db).createToken('erin')).token;
    const credFile = path.join(work, 'credential');
    await writeFile(credFile, `${await registerNode(db, NODE)}\n`, { mode: 0o600 });
    ports.a = await freePort();
    ports.b = await freePort();
    haproxy = await startHaproxy(work, ports);
    // a: a lease of 60 s, so that it outlives the stop of (b); b: 4 s, its sweeper runs every 4 s (short, so that its row is
    // swept soon after its SIGKILL in (c); not shorter: a loaded machine holding b's event loop past a renewal would lose it).
    a = await start('a', ports.a, await config('a', ports.a, { replica_id: 'a', lease_secs: 60 }, { restart_grace_secs: 1 }));
    await waitFor(async () => (await haproxy.state('a')) === 2, { what: `HAProxy to see replica a up (${haproxy.log()})`, ...WAIT });
    node = await startTestDaemon({ pack, config: { node_id: NODE, portal: { url: haproxy.url, node_credential_file: credFile } } });
    await waitFor(async () => (await nodeRow())?.owner_replica === 'a' && (await nodeRow())?.online, { what: 'the node joined to replica a through HAProxy', ...WAIT });
  });
  after(async () => {
    for (const c of children) c.signal('SIGKILL');
    haproxy?.stop();
    await node?.stop();
    await pack?.cleanup();
    await db?.end();
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('(a) a second replica starts beside the first: past its restart grace the first one`s node is online and its job runs; a "single" portal refuses', async () => {
    const r = await fetch(`${haproxy.url}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/gated.py::test_gate', 'tests/basic.py::test_pass'], shuffle: false, tags: {} }),
    });
    const started = (await r.json()) as { job_uid: string };
    expect(r.status, JSON.stringify(started)).to.equal(200);
    uid = started.job_uid;
    await waitFor(async () => (await jobRow())?.current_run, { what: 'the first run under way', ...WAIT });

    b = await start('b', ports.b, await config('b', ports.b, { replica_id: 'b', lease_secs: 4 }, { restart_grace_secs: 1 }));
    // b's sweeper has looked at the farm for longer than its restart grace (1 s) and a lease: 4 sweeps, 4 s apart.
    await waitFor(async () => ((await metric(b, 'farmhand_portal_replica_sweeps_total')) ?? 0) >= 4, { what: 'four sweeps of replica b', ...WAIT });
    expect(await nodeRow(), 'the node row past b`s grace').to.deep.include({ online: true, offline_reason: null, owner_replica: 'a' });
    expect(await jobRow(), 'the job past b`s grace').to.deep.include({ state: 'running', end_reason: null });
    const offline = await db.query(`SELECT 1 FROM events_outbox WHERE node_id = $1 AND type = 'node.offline'`, [NODE]);
    expect(offline.rows, 'node.offline events').to.deep.equal([]);
    for (const p of [a, b]) {
      const ready = await fetch(`${p.url}/readyz`);
      expect(ready.status, await ready.text()).to.equal(200);
      expect(await metric(p, 'farmhand_portal_replica_lease_held')).to.equal(1);
      expect(await metric(p, 'farmhand_portal_replicas')).to.equal(2);
    }
    expect((await db.query('SELECT replica_id, url FROM portal_replicas ORDER BY replica_id')).rows).to.deep.equal([
      { replica_id: 'a', url: a.url },
      { replica_id: 'b', url: b.url },
    ]);

    // The old configuration beside them: refused with one line, exit 78, nothing touched.
    const port = await freePort();
    const single = startPortalProcess('single', port, await config('single', port, undefined, { restart_grace_secs: 1 }));
    children.push(single);
    expect(await single.exited, single.err()).to.equal(78);
    expect(single.err().trimEnd().split('\n')).to.have.length(1);
    expect(single.err()).to.match(/^farmhand: another farmhand portal already runs on this database \(it holds the portal lock: "farmhand-portal /);
    expect(await nodeRow()).to.deep.include({ online: true, owner_replica: 'a' });
  });

  it('(b) a stale replica: the node moved to b while a was stopped; a resumes and its pending writes change nothing', async () => {
    const before = Number((await nodeRow())!.owner_epoch);
    a.signal('SIGSTOP');
    try {
      // The node gives a silent portal up (15 s at least) and reconnects through HAProxy, which found a down.
      await waitFor(async () => (await nodeRow())?.owner_replica === 'b' && (await nodeRow())?.online, { what: 'the node taken by replica b', ...WAIT });
    } finally {
      a.signal('SIGCONT');
    }
    expect(Number((await nodeRow())!.owner_epoch), 'a new epoch').to.be.greaterThan(before);
    // a, resumed with its lease still valid, finds the node's socket closed: offline and the fault rule, under its old epoch.
    const LEFT = 'the fault rule left a node alone: it moved to another portal replica';
    const ENDED = 'jobs ended: their node went offline';
    await waitFor(() => a.out().includes(LEFT) || a.out().includes(ENDED), { what: `a's fault rule to run (${a.out().slice(-2000)})`, ...WAIT });
    expect(await nodeRow(), 'the node row after a`s writes').to.deep.include({ online: true, offline_reason: null, owner_replica: 'b' });
    expect(await jobRow(), 'the job after a`s writes').to.deep.include({ state: 'running', end_reason: null });
    expect(a.out()).to.include(LEFT);
    await waitFor(async () => (await haproxy.state('a')) === 2, { what: 'HAProxy to see replica a up again', ...WAIT });
    expect(await metric(a, 'farmhand_portal_replica_lease_held')).to.equal(1);
  });

  it('(c) b SIGKILLed: the node reconnects to a, usable again through HAProxy; the job is not ended, no event lost; b`s row swept', async () => {
    b.signal('SIGKILL');
    await b.exited;
    // Usable: a forwarded call to the node through HAProxy answers (the survivor holds its connection).
    await waitFor(async () => (await viaFront(`/api/v2/nodes/${NODE}/job`).catch(() => undefined))?.status === 200, { what: 'the node usable through a', ...WAIT });
    // How long that takes is a figure of bench/replicas-failover-bench.ts, not of this test.
    expect(await nodeRow()).to.deep.include({ online: true, owner_replica: 'a' });
    expect(await jobRow(), 'the job through the failover').to.deep.include({ state: 'running', end_reason: null });

    await writeFile(gate, 'open\n');
    const done = await waitFor(async () => {
      const j = (await (await viaFront(`/api/v2/jobs${uid}`)).json()) as { status: string; result_counts: Record<string, number> };
      return j.status === 'exited' ? j : undefined;
    }, { what: 'the job to end', ...WAIT });
    expect(done.result_counts).to.deep.equal({ pass: 2, fail: 0, error: 0, total: 2 });
    await waitFor(async () => (await jobRow())?.state === 'exited', { what: 'the job exited in the jobs table', ...WAIT });
    expect(await jobRow()).to.deep.include({ end_reason: null });
    // Every event of the job, each once, in the node's order.
    const { rows } = await db.query<{ type: string; node_event_id: string }>(
      `SELECT type, node_event_id FROM events_outbox WHERE data->>'job_uid' = $1 AND node_event_id IS NOT NULL ORDER BY seq`,
      [uid],
    );
    expect(rows.map((r) => r.type)).to.deep.equal(['job.started', 'run.started', 'run.finished', 'run.started', 'run.finished', 'job.exited']);
    expect(new Set(rows.map((r) => r.node_event_id)).size).to.equal(rows.length);

    // b's lease lapsed: a's sweeper deletes its row.
    await waitFor(async () => (await db.query('SELECT 1 FROM portal_replicas')).rowCount === 1, { what: "b's row swept", ...WAIT });
    expect(await metric(a, 'farmhand_portal_replicas')).to.equal(1);
  });

  it('a replica stopped cleanly deletes its row and leaves its nodes to no one (the others` sweepers give the grace)', async () => {
    a.signal('SIGTERM');
    expect(await a.exited, a.err()).to.equal(0);
    expect((await db.query('SELECT 1 FROM portal_replicas')).rowCount).to.equal(0);
    expect(await nodeRow()).to.deep.include({ online: false, offline_reason: 'the portal stopped', owner_replica: null });
  });
});
