/**
 * The second fault, with real processes: the portal (`farmhand portal
 * --config <file>`, its own process) is SIGKILLed while a node runs a job of
 * several test cases. The node runs the job to its end on its own; a new
 * portal process on the same database and port takes the node back, and the
 * job is exited with the node's counts, every result of it is in the farm
 * index once with its files in the portal's storage, the outbox has its runs
 * once, and nothing of it is marked as a node fault (the node never went away:
 * the portal did). Then a job started on the node itself while the portal is
 * down shows up on the portal, with its results, once the portal is back.
 * And a node event in flight when the portal dies (its bytes unread in the
 * frozen portal's socket at the SIGKILL) is in the outbox once after the
 * restart; one recorded whose acknowledgement was lost is stored once.
 */
import { nodeEventOrder } from '../../src/farm/protocol.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import pg from 'pg';
import type { FarmEvent } from '../../src/core/events.js';
import { migrate } from '../../src/farm/db/migrate.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { connectionString } from '../helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';
import { throughReplicas } from '../helpers/farm.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NODE = 'farmhand-pk';
const WAIT = { timeoutMs: 60_000, maxIntervalMs: 200 };

interface JobBody {
  job_uid: string;
  status: string;
  end_time: string | null;
  result_counts: { pass: number; fail: number; error: number; total: number };
}
interface ResultBody {
  result_id: string;
  job_uid: string;
  test_case: string;
  result: string;
  failure_reason: string | null;
}

/** A free loopback port: the restarted portal must listen where the node looks for it. */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('farm fault: the portal SIGKILLed mid-job', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): kills and restarts the one portal process and reads its stdout (replicas killed: replicas-rolling, the soak).
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(300_000);
  let cluster: TestPostgres;
  let db: pg.Pool;
  let work: string;
  let gate: string;
  let pack: TestPackRepo;
  let node: TestDaemon | undefined;
  let portalUrl: string;
  let portalConfig: string;
  let portalLog: string;
  let token: string;
  let nodeToken: string;
  const storage = () => path.join(work, 'storage');
  const portals: ChildProcess[] = [];

  const startPortalProcess = async (): Promise<ChildProcess> => {
    const fd = openSync(portalLog, 'a');
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'portal', '--config', portalConfig], {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
    portals.push(child);
    await waitFor(async () => (await fetch(`${portalUrl}/api/v2/user`, { headers: { Authorization: `token ${token}` } })).status === 200, {
      what: 'the portal process to answer',
      ...WAIT,
    }).catch((e: Error) => {
      throw new Error(`${e.message}\n${readFileSync(portalLog, 'utf8').slice(-3000)}`);
    });
    return child;
  };
  const killGroup = (c: ChildProcess) => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  const exitOf = (c: ChildProcess) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));
  const call = async (base: string, p: string, body?: unknown) =>
    fetch(`${base}${p}`, {
      method: body === undefined ? 'GET' : 'POST',
      // The node has tokens of its own (its tokens file): the portal's are in PostgreSQL.
      headers: { Authorization: `token ${base === portalUrl ? token : nodeToken}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const json = async <T>(base: string, p: string): Promise<T> => {
    const r = await call(base, p);
    const text = await r.text();
    if (r.status !== 200) throw new Error(`GET ${p}: ${r.status} ${text}`);
    return JSON.parse(text) as T;
  };
  const nodeJob = (uid: string) => json<JobBody>(node!.url, `/api/v2/jobs${uid}`);
  /** The portal's own account of a job (what it answers while the node is away), from PostgreSQL. */
  const jobRow = async (uid: string) =>
    (
      await db.query<{ state: string; end_reason: string | null; current_run: unknown; job: JobBody }>(
        'SELECT state, end_reason, current_run, job FROM jobs WHERE job_uid = $1',
        [uid],
      )
    ).rows[0];
  const nodeRow = async () => (await db.query<{ online: boolean; offline_reason: string | null }>('SELECT online, offline_reason FROM nodes WHERE node_id = $1', [NODE])).rows[0];
  /** The node's events of a job in the outbox: [type, result_id or ''] per row. */
  const outboxOf = async (uid: string) =>
    (
      await db.query<{ type: string; result_id: string | null }>(
        `SELECT type, data->>'result_id' AS result_id FROM events_outbox WHERE data->>'job_uid' = $1 ORDER BY seq`,
        [uid],
      )
    ).rows.map((r) => `${r.type} ${r.result_id ?? ''}`.trim());

  /** Every result of a job on the portal (index and storage) matches the node's own, once each. */
  const checkDelivered = async (uid: string, total: number) => {
    const mine = await json<ResultBody[]>(node!.url, `/api/v2/results?filter=job:${encodeURIComponent(uid)}`);
    expect(mine).to.have.length(total);
    // The node uploads in its own loop: wait until the last result has reached the index.
    const farm = await waitFor(
      async () => {
        const r = await json<ResultBody[]>(portalUrl, `/api/v2/results?filter=job:${encodeURIComponent(uid)}`);
        return r.length >= total ? r : undefined;
      },
      { what: `the ${total} results of ${uid} in the farm index`, ...WAIT },
    );
    expect(farm.map((r) => r.result_id).sort()).to.deep.equal(mine.map((r) => r.result_id).sort());
    for (const r of farm) {
      const own = mine.find((m) => m.result_id === r.result_id)!;
      expect({ result: r.result, test_case: r.test_case, job_uid: r.job_uid }).to.deep.equal({ result: own.result, test_case: own.test_case, job_uid: uid });
      // Uploaded whole: the record is in the portal's storage (farmhand.log beside it).
      await waitFor(() => existsSync(path.join(storage(), ...r.result_id.split('/').filter(Boolean), 'result.json')), {
        what: `${r.result_id} in the portal's storage`,
        ...WAIT,
      });
    }
    const counts = (await db.query<{ c: string }>('SELECT count(*) AS c FROM results WHERE job_uid = $1', [uid])).rows[0]!.c;
    expect(Number(counts), 'rows of the job in the results index').to.equal(total);
    return farm;
  };

  before(async function () {
    this.timeout(180_000);
    cluster = await startPostgres();
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
    await migrate(db);
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-portal-kill-'));
    gate = path.join(work, 'gate');
    pack = await makeTestPack({
      ...STANDARD_FILES,
      // The first run of the job waits for the test to open the gate: the portal dies while it runs.
      'tests/gated.py': [
        'import os, time',
        '',
        'def test_gate():',
        `    gate = ${JSON.stringify(gate)}`,
        '    print("waiting at the gate")',
        '    while not os.path.exists(gate):',
        '        time.sleep(0.05)',
        '    with open("through-the-gate.txt", "w") as f:',
        '        f.write("the portal was away")',
        '',
      ].join('\n'),
    });
    await new PgUsers(db).add('erin');
    token = (await new PgTokens(db).createToken('erin')).token;
    const credFile = path.join(work, 'credential');
    await writeFile(credFile, `${await registerNode(db, NODE)}\n`, { mode: 0o600 });
    const port = await freePort();
    portalUrl = `http://127.0.0.1:${port}`;
    portalConfig = path.join(work, 'portal.json');
    portalLog = path.join(work, 'portal.log');
    await writeFile(
      portalConfig,
      JSON.stringify({
        listen: `127.0.0.1:${port}`,
        database: connectionString(cluster),
        storage_dir: storage(),
        heartbeat_secs: 1,
        flush_secs: 1,
        log_level: 'info',
        rate_limit: { requests_per_second: 1000, burst: 10000 },
      }),
    );
    await startPortalProcess();
    // The node's reconnect back-off capped at 1 s (portal.reconnect_max_secs; 30 s by default): each test kills the
    // portal under it and waits for it to come back, which is what is checked, not the length of the back-off.
    node = await startTestDaemon({ pack, config: { node_id: NODE, portal: { url: portalUrl, node_credential_file: credFile, reconnect_max_secs: 1 } } });
    nodeToken = (await new TokenStore(tokensFile(node.dataDir)).create('erin')).token;
    await waitFor(async () => node!.daemon.portalLink?.connected && (await nodeRow())?.online, { what: 'the node joined to the portal', ...WAIT });
  });
  after(async () => {
    for (const c of portals) killGroup(c);
    await node?.stop();
    await pack?.cleanup();
    await db?.end();
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('the node finishes the job while the portal is down; the new portal has every result once, the job exited with its counts, no node fault', async () => {
    const cases = ['tests/gated.py::test_gate', 'tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/basic.py::test_error'];
    const r = await call(portalUrl, '/api/v2/run_tests', { node_id: NODE, test_pack_revision: 'main', test_cases: cases, shuffle: false, tags: { fault: 'portal-kill' } });
    const started = (await r.json()) as { job_uid: string };
    expect(r.status, JSON.stringify(started)).to.equal(200);
    const uid = started.job_uid;
    // The portal has recorded the first run as under way (its run.started is in the database).
    await waitFor(async () => (await jobRow(uid))?.current_run, { what: 'the first run under way on the portal', ...WAIT });

    const first = portals.at(-1)!;
    killGroup(first);
    await exitOf(first);
    await waitFor(() => !node!.daemon.portalLink!.connected, { what: 'the node to see the portal gone', ...WAIT });

    // While the portal is down, the node goes on: the gated run ends, the rest of the job runs.
    await writeFile(gate, 'open\n');
    const done = await waitFor(async () => {
      const j = await nodeJob(uid);
      return j.status === 'exited' ? j : undefined;
    }, { what: 'the job to end on the node', ...WAIT });
    expect(done.result_counts).to.deep.equal({ pass: 2, fail: 1, error: 1, total: 4 });
    expect(node!.daemon.portalLink!.connected, 'the portal still down').to.equal(false);
    expect(node!.daemon.uploader!.pending.length, 'results waiting for the portal').to.be.greaterThan(0);

    // A new portal process, same database and port.
    const before = node!.daemon.portalLink!.connections;
    await startPortalProcess();
    await waitFor(async () => node!.daemon.portalLink!.connections > before && (await nodeRow())?.online, { what: 'the node back on the new portal', ...WAIT });

    // The job, through the portal (forwarded to the node, which is back): exited with its counts.
    const onPortal = await waitFor(async () => {
      const j = await json<JobBody>(portalUrl, `/api/v2/jobs${uid}`);
      return j.status === 'exited' ? j : undefined;
    }, { what: 'the job exited through the portal', ...WAIT });
    expect(onPortal.result_counts).to.deep.equal({ pass: 2, fail: 1, error: 1, total: 4 });
    // The portal's own account, kept from the node's events replayed after the restart: the same counts,
    // ended by the node (no end_reason: not a node fault).
    // (Waited for, then checked: a wrong account fails on the values, not on a timeout.)
    // The replayed events update the row one by one: the last run.finished counts, job.exited (the next UPDATE) ends it.
    await waitFor(async () => {
      const j = await jobRow(uid);
      return j?.state === 'exited' && j.job.result_counts.total === 4;
    }, { what: 'the job counted and exited in the jobs table', ...WAIT }).catch(() => undefined);
    const row = (await jobRow(uid))!;
    expect(row).to.deep.include({ state: 'exited', end_reason: null, current_run: null });
    expect(row.job).to.deep.include({ status: 'exited', end_time: (await nodeJob(uid)).end_time });
    expect(row.job.result_counts).to.deep.equal({ pass: 2, fail: 1, error: 1, total: 4 });

    const results = await checkDelivered(uid, 4);
    for (const res of results) expect(res.failure_reason ?? '', res.result_id).not.to.match(/went offline|not connected/);
    const gated = results.find((x) => x.test_case === 'tests/gated.py::test_gate')!;
    expect(gated.result).to.equal('pass');
    await waitFor(() => node!.daemon.uploader!.pending.length === 0, { what: 'the upload queue empty', ...WAIT });

    // The node was never offline from its side, and the portal says so: nothing marked as a node fault.
    const stored = await db.query<{ type: string; reason: string | null }>(
      `SELECT type, data->>'reason' AS reason FROM events_outbox WHERE node_id = $1 AND type = 'node.offline'`,
      [NODE],
    );
    expect(stored.rows, 'node.offline events').to.deep.equal([]);
    expect(await nodeRow()).to.deep.include({ online: true, offline_reason: null });

    // The outbox has the job's events once each, in the node's order (the replay after the restart duplicated nothing).
    const ids = results.map((x) => x.result_id);
    const events = await waitFor(async () => {
      const e = await outboxOf(uid);
      return e.includes('job.exited') ? e : undefined;
    }, { what: 'the job.exited in the outbox', ...WAIT });
    expect(events.filter((e) => e.startsWith('run.finished')).map((e) => e.split(' ')[1]).sort()).to.deep.equal([...ids].sort());
    expect(events.filter((e) => e.startsWith('run.started')).map((e) => e.split(' ')[1]).sort()).to.deep.equal([...ids].sort());
    expect(new Set(events).size, events.join('\n')).to.equal(events.length);
    expect(events[0]).to.equal('job.started');
    expect(events.at(-1)).to.equal('job.exited');
  });

  it('a job started on the node while the portal is down is on the portal, with its results, once it is back', async () => {
    const current = portals.at(-1)!;
    killGroup(current);
    await exitOf(current);
    await waitFor(() => !node!.daemon.portalLink!.connected, { what: 'the node to see the portal gone', ...WAIT });

    // Straight to the node: the portal is not there to forward it.
    const r = await call(node!.url, '/api/v2/run_tests', {
      node_id: NODE,
      test_pack_revision: 'main',
      test_cases: ['tests/basic.py::test_pass', 'tests/basic.py::test_fail'],
      shuffle: false,
      tags: {},
    });
    const started = (await r.json()) as { job_uid: string };
    expect(r.status, JSON.stringify(started)).to.equal(200);
    const uid = started.job_uid;
    await waitFor(async () => (await nodeJob(uid)).status === 'exited', { what: 'the job to end on the node', ...WAIT });
    expect(await jobRow(uid), 'the portal has not heard of it yet').to.equal(undefined);

    const before = node!.daemon.portalLink!.connections;
    await startPortalProcess();
    await waitFor(() => node!.daemon.portalLink!.connections > before, { what: 'the node back on the new portal', ...WAIT });

    const onPortal = await waitFor(async () => {
      const j = await json<JobBody>(portalUrl, `/api/v2/jobs${uid}`);
      return j.status === 'exited' && j.result_counts.total === 2 ? j : undefined;
    }, { what: 'the job on the portal, exited with its 2 runs', ...WAIT });
    expect(onPortal.result_counts).to.deep.equal({ pass: 1, fail: 1, error: 0, total: 2 });
    // The replayed events update the row one by one: the last run.finished counts, job.exited (the next UPDATE) ends it.
    await waitFor(async () => {
      const j = await jobRow(uid);
      return j?.state === 'exited' && j.job.result_counts.total === 2;
    }, { what: 'the job counted and exited in the jobs table', ...WAIT }).catch(() => undefined);
    const row = (await jobRow(uid))!;
    expect(row).to.deep.include({ state: 'exited', end_reason: null, current_run: null });
    expect(row.job.result_counts).to.deep.equal({ pass: 1, fail: 1, error: 0, total: 2 });
    await checkDelivered(uid, 2);
    const events = await waitFor(async () => {
      const e = await outboxOf(uid);
      return e.includes('job.exited') ? e : undefined;
    }, { what: 'the job.exited in the outbox', ...WAIT });
    expect(events.filter((e) => e.startsWith('run.finished'))).to.have.length(2);
    expect(new Set(events).size, events.join('\n')).to.equal(events.length);
  });

  // A node event in flight when the portal dies: delivered at least once, stored once (docs/farm.md, "The outbox").
  const nodeHub = () => node!.daemon.services.events!.hub;
  const press = (username: string) => {
    nodeHub().publish('key.pressed', { key: 'KEY_OK', remote: 'vstb', hold_ms: 0, source: 'api', username, result_id: null });
    return nodeHub().buffered().at(-1)!;
  };
  const cursor = async () => (await db.query<{ event_id: string }>('SELECT event_id FROM node_event_cursors WHERE node_id = $1', [NODE])).rows[0]?.event_id;
  /**
   * The portal's cursor at or past `id` in the node's stream (ids `<boot>-<n>`, base 36): the node's internal
   * node.state events share the stream and may follow any event, so the cursor can pass the event waited for.
   */
  const order = (id: string) => nodeEventOrder(id)!;
  const recordedUpTo = async (id: string) => {
    const c = await cursor();
    if (c === undefined) return false;
    const [cb, cn] = order(c);
    const [b, n] = order(id);
    return cb > b || (cb === b && cn >= n);
  };
  const stored = async (id: string) =>
    Number((await db.query<{ c: string }>('SELECT count(*) AS c FROM events_outbox WHERE node_id = $1 AND node_event_id = $2', [NODE, id])).rows[0]!.c);
  /** Bytes received and not yet read on the portal's sockets (its listening port), from /proc/net/tcp. */
  const unread = () => {
    const port = Number(new URL(portalUrl).port);
    let bytes = 0;
    for (const line of readFileSync('/proc/net/tcp', 'utf8').split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f.length < 5 || parseInt(f[1]!.split(':')[1]!, 16) !== port) continue;
      bytes += parseInt(f[4]!.split(':')[1]!, 16);
    }
    return bytes;
  };
  const settled = async () => {
    // Connected, and every event the node published so far recorded: the next one is the only one in question.
    await waitFor(() => node!.daemon.portalLink!.connected, { what: 'the node connected', ...WAIT });
    // The cursor counts every event of the stream, the internal node.state too (docs/farm.md, "The node's state").
    const last = nodeHub().buffered({ internal: true }).at(-1)!.id;
    await waitFor(() => recordedUpTo(last), { what: `the portal to have recorded ${last}`, ...WAIT });
  };
  /** The portal frozen (SIGSTOP) with the event in its socket, unread, then SIGKILLed; a new one started. */
  const dieWith = async (make: () => FarmEvent): Promise<FarmEvent> => {
    const current = portals.at(-1)!;
    process.kill(-current.pid!, 'SIGSTOP');
    await waitFor(() => readFileSync(`/proc/${current.pid}/stat`, 'utf8').split(') ')[1]!.startsWith('T'), { what: 'the portal stopped', ...WAIT });
    const before = unread();
    expect(node!.daemon.portalLink!.connected, 'the link still up: the event goes to the socket').to.equal(true);
    const e = make();
    const size = JSON.stringify({ t: 'event', event: e }).length;
    await waitFor(() => unread() - before >= size, { what: "the event's bytes in the stopped portal's socket", ...WAIT });
    killGroup(current);
    await exitOf(current);
    expect(await stored(e.id), 'not recorded by the portal that died').to.equal(0);
    const connections = node!.daemon.portalLink!.connections;
    await startPortalProcess();
    await waitFor(() => node!.daemon.portalLink!.connections > connections, { what: 'the node back on the new portal', ...WAIT });
    return e;
  };

  it('a node event in flight: handed to the socket in the instant of a SIGKILL of the portal is in the outbox once after its restart', async () => {
    await settled();
    const e = await dieWith(() => press('in-flight'));
    await waitFor(() => recordedUpTo(e.id), { what: 'the event recorded by the new portal', ...WAIT });
    expect(await stored(e.id)).to.equal(1);
    expect(node!.daemon.portalLink!.eventsLost).to.equal(0);
  });

  it('a node event in flight: one recorded whose acknowledgement was lost is sent again and not recorded twice', async () => {
    await settled();
    const recorded = press('recorded');
    await waitFor(() => recordedUpTo(recorded.id), { what: 'the event recorded', ...WAIT });
    // The portal's word that `recorded` is in the outbox is lost: its cursor back one event, so the next welcome
    // names the one before and the node sends `recorded` again.
    const stream = nodeHub().buffered({ internal: true });
    const earlier = stream[stream.findIndex((x) => x.id === recorded.id) - 1]!.id;
    await db.query('UPDATE node_event_cursors SET event_id = $2, n = $3 WHERE node_id = $1', [NODE, earlier, order(earlier)[1]]);
    const e = await dieWith(() => press('in-flight-2'));
    await waitFor(() => recordedUpTo(e.id), { what: 'the events after the cursor recorded by the new portal', ...WAIT });
    expect(await stored(recorded.id), 'the event sent again, stored once').to.equal(1);
    expect(await stored(e.id)).to.equal(1);
    const sent = await db.query<{ username: string }>(
      `SELECT data->>'username' AS username FROM events_outbox WHERE node_id = $1 AND type = 'key.pressed' ORDER BY seq`,
      [NODE],
    );
    expect(sent.rows.map((r) => r.username)).to.deep.equal(['in-flight', 'recorded', 'in-flight-2']);
  });

  it('with the node stopped, the results are read from the portal\'s storage', async () => {
    const uids = (await db.query<{ job_uid: string }>('SELECT job_uid FROM jobs WHERE node_id = $1', [NODE])).rows.map((r) => r.job_uid);
    expect(uids).to.have.length(2);
    const all = (await json<ResultBody[]>(portalUrl, '/api/v2/results')).filter((x) => x.result_id.startsWith(`/${NODE}/`));
    await node!.stop();
    node = undefined;
    expect(all).to.have.length(6);
    for (const res of all) {
      const log = await call(portalUrl, `/api/v2/results${res.result_id}/farmhand.log`);
      expect(log.status, `${res.result_id} farmhand.log`).to.equal(200);
      await log.arrayBuffer();
    }
    // The jobs too, from PostgreSQL now.
    for (const uid of uids) {
      const j = await json<JobBody>(portalUrl, `/api/v2/jobs${uid}`);
      expect(j.status, uid).to.equal('exited');
      expect(j.result_counts.total, uid).to.equal(all.filter((x) => x.job_uid === uid).length);
    }
    const gated = all.find((x) => x.test_case === 'tests/gated.py::test_gate')!;
    const artifact = await call(portalUrl, `/api/v2/results${gated.result_id}/artifacts/through-the-gate.txt`);
    expect(artifact.status).to.equal(200);
    expect(await artifact.text()).to.equal('the portal was away');
  });
});
