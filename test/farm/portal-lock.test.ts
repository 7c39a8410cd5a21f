/**
 * One portal per farm database (issue 19; src/farm/db/portalLock.ts), with real processes: a
 * `farmhand portal` runs with a node joined and a job of it under way; a second `farmhand portal` on
 * the same database (another port, a fault-rule grace of 1 s) refuses to start with one line naming
 * the first and exit 78, before it touches anything: the node is not marked offline (in the database,
 * and as the first portal tells it) and its job runs to its end with its own counts, not ended by a
 * fault rule. Before the lock, the second portal started, marked every node offline at once and, its
 * grace later, ended the first one's running jobs. Once the first portal stops, a new one starts.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../src/farm/db/migrate.js';
import { PORTAL_LOCK_KEY } from '../../src/farm/db/portalLock.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { connectionString } from '../helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { freePort, killGroup } from '../helpers/processFarm.js';
import { startPortalProcess, type PortalProcess } from '../helpers/replicaFarm.js';
import { waitFor } from '../helpers/wait.js';
import { throughReplicas } from '../helpers/farm.js';

const NODE = 'farmhand-lock';
const WAIT = { timeoutMs: 90_000, maxIntervalMs: 200 };

describe('farm: one portal per database (the portal lock)', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): the advisory lock of one portal per database (mode "single"); replicas hold leases instead.
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(300_000);
  let cluster: TestPostgres;
  let db: pg.Pool;
  let work: string;
  let gate: string;
  let pack: TestPackRepo;
  let node: TestDaemon | undefined;
  let token: string;
  let first: PortalProcess;
  let firstUrl: string;
  const children: PortalProcess[] = [];

  const writeConfig = async (name: string, port: number, extra: Record<string, unknown> = {}) => {
    const file = path.join(work, `${name}.json`);
    await writeFile(
      file,
      JSON.stringify({
        listen: `127.0.0.1:${port}`,
        database: connectionString(cluster),
        storage_dir: path.join(work, 'storage'),
        heartbeat_secs: 1,
        flush_secs: 1,
        log_level: 'info',
        rate_limit: { requests_per_second: 1000, burst: 10000 },
        ...extra,
      }),
    );
    return file;
  };
  const get = async <T>(base: string, p: string): Promise<T> => {
    const r = await fetch(`${base}${p}`, { headers: { Authorization: `token ${token}` } });
    const text = await r.text();
    if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${text}`);
    return JSON.parse(text) as T;
  };
  const nodeRow = async () => (await db.query<{ online: boolean; offline_reason: string | null }>('SELECT online, offline_reason FROM nodes WHERE node_id = $1', [NODE])).rows[0];
  const jobRow = async (uid: string) =>
    (await db.query<{ state: string; end_reason: string | null; current_run: unknown }>('SELECT state, end_reason, current_run FROM jobs WHERE job_uid = $1', [uid])).rows[0];

  before(async function () {
    this.timeout(180_000);
    cluster = await startPostgres();
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
    await migrate(db);
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-portal-lock-'));
    gate = path.join(work, 'gate');
    pack = await makeTestPack({
      ...STANDARD_FILES,
      'tests/gated.py': [
        'import os, time',
        '',
        'def test_gate():',
        `    gate = ${JSON.stringify(gate)}`,
        '    while not os.path.exists(gate):',
        '        time.sleep(0.05)',
        '',
      ].join('\n'),
    });
    await new PgUsers(db).add('erin');
    token = (await new PgTokens(db).createToken('erin')).token;
    const credFile = path.join(work, 'credential');
    await writeFile(credFile, `${await registerNode(db, NODE)}\n`, { mode: 0o600 });
    const port = await freePort();
    firstUrl = `http://127.0.0.1:${port}`;
    first = startPortalProcess('first', port, await writeConfig('first', port));
    children.push(first);
    await first.listening(WAIT);
    node = await startTestDaemon({ pack, config: { node_id: NODE, portal: { url: firstUrl, node_credential_file: credFile } } });
    await waitFor(async () => node!.daemon.portalLink?.connected && (await nodeRow())?.online, { what: 'the node joined to the first portal', ...WAIT });
  });
  after(async () => {
    for (const c of children) killGroup(c.child);
    await node?.stop();
    await pack?.cleanup();
    await db?.end();
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('a second portal refuses to start with one line (exit 78); the first one`s node stays online and its job runs to its end', async () => {
    const r = await fetch(`${firstUrl}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/gated.py::test_gate', 'tests/basic.py::test_pass'], shuffle: false, tags: {} }),
    });
    const started = (await r.json()) as { job_uid: string };
    expect(r.status, JSON.stringify(started)).to.equal(200);
    const uid = started.job_uid;
    await waitFor(async () => (await jobRow(uid))?.current_run, { what: 'the first run under way on the portal', ...WAIT });
    // The node's snapshot saying so follows its answer (src/farm/link/snapshots.ts): waited for, as read.
    const scrape = await waitFor(async () => {
      const t = await (await fetch(`${firstUrl}/metrics`)).text();
      return /^farmhand_portal_jobs_running 1$/m.test(t) ? t : undefined;
    }, { what: 'the running job in the first portal`s metrics', ...WAIT });
    expect(scrape).to.match(/^farmhand_portal_lock_held 1$/m);

    // The second portal: same database, another port; its fault rule would end the job 1 s after its start.
    const secondPort = await freePort();
    const second = startPortalProcess('second', secondPort, await writeConfig('second', secondPort, { restart_grace_secs: 1 }));
    children.push(second);
    let code: number | null | undefined;
    void second.exited.then((c) => (code = c));
    // Either it refuses (exits), or (before the lock) it starts: listening is printed after its start-up wrote the nodes.
    await waitFor(() => code !== undefined || second.out().includes('portal listening on'), { what: 'the second portal to refuse or start', ...WAIT });

    // Nothing of the first portal's farm was touched: the node online in the database and through the first portal.
    expect(await nodeRow(), 'the node row after the second portal').to.deep.include({ online: true, offline_reason: null });
    const seen = await get<{ online: boolean; not_available_reason: string | null }>(firstUrl, `/api/v2/nodes/${NODE}`);
    expect(seen.online, JSON.stringify(seen)).to.equal(true);
    expect(seen.not_available_reason ?? '').to.match(/^running a test job/);

    // The refusal: exit 78 (a configuration that cannot work: systemd does not restart it), one line naming the holder.
    expect(await second.exited, second.err()).to.equal(78);
    const lines = second.err().trimEnd().split('\n');
    expect(lines, second.err()).to.have.length(1);
    expect(lines[0]).to.match(/^farmhand: another farmhand portal already runs on this database \(it holds the portal lock: "farmhand-portal [0-9a-f]{8} pid (\d+) on /);
    expect(lines[0]).to.include(`pid ${first.child.pid}`);
    expect(lines[0]).to.match(/stop that one first/);
    const holder = (await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1`, [`farmhand-portal % pid ${first.child.pid} %`])).rows;
    expect(holder, 'the first portal`s lock connection').to.have.length(1);
    expect(lines[0]).to.include(`backend pid ${holder[0]!.pid}`).and.include(`pg_terminate_backend(${holder[0]!.pid})`);
    expect(second.out()).to.equal('');

    // The job, running all along, ends by itself with its own counts: no fault rule ended it.
    await writeFile(gate, 'open\n');
    const done = await waitFor(async () => {
      const j = await get<{ status: string; result_counts: Record<string, number> }>(firstUrl, `/api/v2/jobs${uid}`);
      return j.status === 'exited' ? j : undefined;
    }, { what: 'the job to end through the first portal', ...WAIT });
    expect(done.result_counts).to.deep.equal({ pass: 2, fail: 0, error: 0, total: 2 });
    const row = await waitFor(async () => {
      const j = await jobRow(uid);
      return j?.state === 'exited' ? j : undefined;
    }, { what: 'the job exited in the jobs table', ...WAIT });
    expect(row).to.deep.include({ end_reason: null });
    const offline = await db.query(`SELECT 1 FROM events_outbox WHERE node_id = $1 AND type = 'node.offline'`, [NODE]);
    expect(offline.rows, 'node.offline events').to.deep.equal([]);
    expect(await nodeRow()).to.deep.include({ online: true });
  });

  it('once the first portal stops, a new one starts on the database (the lock went with it)', async () => {
    first.child.kill('SIGTERM');
    expect(await first.exited, first.err()).to.equal(0);
    const port = await freePort();
    const next = startPortalProcess('next', port, await writeConfig('next', port));
    children.push(next);
    let code: number | null | undefined;
    void next.exited.then((c) => (code = c));
    await waitFor(() => code !== undefined || next.out().includes('portal listening on'), { what: 'the next portal to start', ...WAIT });
    expect(code, next.err()).to.equal(undefined);
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status, await ready.text()).to.equal(200);
    next.child.kill('SIGTERM');
    expect(await next.exited, next.err()).to.equal(0);
  });

  it('a portal whose lock connection is cut while another session takes the lock exits 1 with one line', async () => {
    const port = await freePort();
    const p = startPortalProcess('cut', port, await writeConfig('cut', port));
    children.push(p);
    await p.listening(WAIT);
    const other = new pg.Client({ connectionString: connectionString(cluster), application_name: 'the other portal' });
    other.on('error', () => undefined);
    await other.connect();
    try {
      const otherPid = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      // Queued for the lock: PostgreSQL grants it the moment the portal's backend ends, before the portal can retry.
      const granted = other.query('SELECT pg_advisory_lock($1::bigint)', [PORTAL_LOCK_KEY]);
      await waitFor(async () => (await db.query(`SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted`, [otherPid])).rowCount === 1, {
        what: 'the other session waiting for the lock',
        ...WAIT,
      });
      const lockPid = (await db.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name LIKE $1`, [`farmhand-portal % pid ${p.child.pid} %`])).rows;
      expect(lockPid, 'the portal`s lock connection').to.have.length(1);
      await db.query('SELECT pg_terminate_backend($1)', [lockPid[0]!.pid]);
      await granted;
      expect(await p.exited, p.err()).to.equal(1);
      const lines = p.err().trimEnd().split('\n');
      expect(lines, p.err()).to.have.length(1);
      expect(lines[0]).to.match(/^farmhand: another farmhand portal took this database's portal lock while this one's connection was down \("the other portal", backend pid \d+/);
    } finally {
      await other.end().catch(() => undefined);
    }
  });
});
