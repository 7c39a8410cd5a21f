/**
 * A node between owners (docs/farm.md, "Many portals: faults and figures", the hold): two `farmhand portal` processes
 * in replicas "many" (A and B) on one throwaway PostgreSQL, a real node connected to A through a gate the test opens
 * and shuts (a TCP relay: shut, it drops every new connection, so the node cannot reconnect until the test lets it).
 * Requests are made at B, which passes a request of A's node to A.
 *
 * - A SIGKILLed (its lease still live in PostgreSQL, so B still finds it the owner): B's requests for the node, a
 *   read and a run_tests, are held, not answered 503 ("does not answer (ECONNREFUSED)"), and answered by the node
 *   once it reconnected to B.
 * - A stopped (SIGTERM: its nodes released, the node no one's): B's request is held, not answered 503 ("offline"),
 *   and answered once the node reconnected.
 * - A stopped while an await_completion of a running job is held at A: A's drain answers it 202 (call again), not 503.
 *
 * No clock: each step waits for what it needs (B's log saying a request is held, a process's exit, a row).
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
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
import { startPortalProcess, type PortalProcess } from '../helpers/replicaFarm.js';
import { replicaConfig } from '../helpers/rollingFarm.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'farmhand-hold-1';
const WAIT = { timeoutMs: 180_000, maxIntervalMs: 200 };
const HELD = 'a request for a node between owners is held for its next owner';

/**
 * A TCP relay to `target` (a replica's port); with no target it drops every new connection at once (those open
 * stay). A new target drops the connections open (the node's), so the node reconnects to it.
 */
async function startGate(): Promise<{ url: string; to(port: number | undefined): void; close(): void }> {
  let target: number | undefined;
  const open = new Set<net.Socket>();
  const server = net.createServer((c) => {
    if (target === undefined) {
      c.destroy();
      return;
    }
    const up = net.connect(target, '127.0.0.1');
    open.add(c).add(up);
    const end = () => {
      c.destroy();
      up.destroy();
      open.delete(c);
      open.delete(up);
    };
    c.on('error', end).on('close', end);
    up.on('error', end).on('close', end);
    c.pipe(up).pipe(c);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`,
    to(port) {
      if (port === target) return;
      target = port;
      if (port !== undefined) for (const s of open) s.destroy();
    },
    close() {
      for (const s of open) s.destroy();
      server.close();
    },
  };
}

describe('farm: a request for a node between owners is held for its next owner (two replica processes, a real node)', function () {
  this.timeout(600_000);
  let cluster: TestPostgres;
  let db: pg.Pool;
  let work: string;
  let pack: TestPackRepo;
  let token: string;
  let gate: Awaited<ReturnType<typeof startGate>>;
  let node: TestDaemon | undefined;
  const ports: Record<string, number> = {};
  const replicas: Record<string, PortalProcess> = {};
  const all: PortalProcess[] = [];

  const start = async (name: string) => {
    // A lease far longer than the test's steps (a SIGKILLed A stays the owner in PostgreSQL), a hold as long.
    const file = await replicaConfig(work, { name, port: ports[name]!, database: connectionString(cluster), leaseSecs: 120, replicas: { hold_secs: 120 } });
    const p = startPortalProcess(name, ports[name]!, file);
    all.push(p);
    replicas[name] = p;
    await p.listening(WAIT);
    return p;
  };
  const row = async () =>
    (await db.query<{ online: boolean; owner_replica: string | null }>('SELECT online, owner_replica FROM nodes WHERE node_id = $1', [NODE])).rows[0];
  const at = (name: string, method: string, p: string, body?: unknown) =>
    fetch(`${replicas[name]!.url}${p}`, {
      method,
      headers: { Authorization: `token ${token}`, ...(body !== undefined && { 'Content-Type': 'application/json' }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    }).then(async (r) => ({ status: r.status, text: await r.text() }));
  const held = (name: string) => replicas[name]!.out().split('\n').filter((l) => l.includes(HELD)).length;
  /** The node connected to `name` through the gate, and B having passed one request of it to A (it saw it live). */
  const nodeAt = async (name: string) => {
    gate.to(ports[name]);
    await waitFor(async () => {
      const r = await row();
      return r?.online && r.owner_replica === name;
    }, { what: `${NODE} online at ${name}`, ...WAIT });
  };
  /** Resolves with the answer, or rejects if it came before B held the request (the code before: 503 at once). */
  const heldThenAnswered = async (name: string, before: number, n: number, answers: Promise<{ status: number; text: string }>[]) => {
    const early = Promise.race(answers).then((a) => {
      throw new Error(`answered before being held: ${a.status} ${a.text}`);
    });
    early.catch(() => undefined);
    await Promise.race([waitFor(() => held(name) >= before + n, { what: `${name} to hold ${n} request(s)`, ...WAIT }), early]);
  };

  before(async function () {
    this.timeout(300_000);
    cluster = await startPostgres();
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
    await migrate(db);
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-hold-'));
    await writeFile(path.join(work, 'replica.secret'), 'a secret every replica shares, long enough\n', { mode: 0o600 });
    pack = await makeTestPack({
      ...STANDARD_FILES,
      'tests/gated.py': ['import os, time', '', 'def test_gate():', `    while not os.path.exists(${JSON.stringify(path.join(work, 'gate'))}):`, '        time.sleep(0.05)', ''].join('\n'),
    });
    await new PgUsers(db).add('ci');
    token = (await new PgTokens(db).createToken('ci')).token;
    for (const r of ['a', 'b']) ports[r] = await freePort();
    gate = await startGate();
    for (const r of ['a', 'b']) await start(r);
    const credFile = path.join(work, `${NODE}.credential`);
    await writeFile(credFile, `${await registerNode(db, NODE)}\n`, { mode: 0o600 });
    gate.to(ports.a);
    node = await startTestDaemon({ pack, config: { node_id: NODE, portal: { url: gate.url, node_credential_file: credFile } } });
  });
  // Each case starts with A running (a case before may have stopped it).
  beforeEach(async () => {
    const a = replicas.a!;
    if (a.child.exitCode !== null || a.child.signalCode !== null) await start('a');
  });
  after(async () => {
    for (const c of all) c.signal('SIGKILL');
    gate?.close();
    await node?.stop();
    await pack?.cleanup();
    await db?.end();
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('the owner SIGKILLed (its lease still live): a read and a run_tests at B are held, then answered by the node at B, no 503', async () => {
    await nodeAt('a');
    expect((await at('b', 'GET', `/api/v2/nodes/${NODE}`)).status, 'passed from B to A').to.equal(200);
    gate.to(undefined);
    replicas.a!.signal('SIGKILL');
    await replicas.a!.exited;
    const before = held('b');
    const read = at('b', 'GET', `/api/v2/nodes/${NODE}/job/await_completion`);
    const run = at('b', 'POST', '/api/v2/run_tests', { node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass'], shuffle: false, tags: {} });
    await heldThenAnswered('b', before, 2, [read, run]);
    gate.to(ports.b);
    const [r, s] = await Promise.all([read, run]);
    expect(r, 'await_completion of the node (no job running: 200 from the node)').to.deep.include({ status: 200 });
    expect(s.status, s.text).to.equal(200);
    expect((await row())?.owner_replica).to.equal('b');
    const uid = (JSON.parse(s.text) as { job_uid: string }).job_uid;
    await waitFor(async () => (await at('b', 'GET', `/api/v2/jobs${uid}/await_completion`)).status === 200, { what: 'the job started through the hold to end', ...WAIT });
    const jobs = await db.query('SELECT job_uid FROM jobs WHERE node_id = $1', [NODE]);
    expect(jobs.rows, 'one job: the run_tests was passed once to the node').to.deep.equal([{ job_uid: uid }]);
  });

  it('the owner stopped (its nodes released): a read at B is held, then answered once the node reconnected, no 503', async () => {
    await nodeAt('a');
    // B passes one request to A, so B has seen the node at a live replica (a node long gone is not held for).
    expect((await at('b', 'GET', `/api/v2/nodes/${NODE}`)).status, 'passed from B to A').to.equal(200);
    gate.to(undefined);
    replicas.a!.signal('SIGTERM');
    expect(await replicas.a!.exited, `a stopped cleanly (${replicas.a!.err()})`).to.equal(0);
    expect(await row(), 'released by the clean stop').to.deep.equal({ online: false, owner_replica: null });
    const before = held('b');
    const read = at('b', 'GET', `/api/v2/nodes/${NODE}/job/await_completion`);
    await heldThenAnswered('b', before, 1, [read]);
    gate.to(ports.b);
    expect(await read).to.deep.include({ status: 200 });
  });

  it('the owner stopped while it holds an await_completion: its drain answers it 202 (call again), not 503', async () => {
    await nodeAt('a');
    const started = await at('a', 'POST', '/api/v2/run_tests', { node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/gated.py::test_gate'], shuffle: false, tags: {} });
    expect(started.status, started.text).to.equal(200);
    const uid = (JSON.parse(started.text) as { job_uid: string }).job_uid;
    const poll = at('a', 'GET', `/api/v2/jobs${uid}/await_completion`);
    // The long poll is under way at A: forwarded to the node, which holds it while the gated test runs.
    await waitFor(async () => /^farmhand_portal_forwards_in_flight [1-9]/m.test((await at('a', 'GET', '/metrics')).text), { what: 'the long poll forwarded at A', ...WAIT });
    replicas.a!.signal('SIGTERM');
    const answer = await poll;
    expect(answer.status, answer.text).to.equal(202);
    expect(JSON.parse(answer.text)).to.deep.include({ job_uid: uid });
    expect(await replicas.a!.exited).to.equal(0);
    await writeFile(path.join(work, 'gate'), 'open\n');
    gate.to(ports.b);
    await waitFor(async () => (await at('b', 'GET', `/api/v2/jobs${uid}/await_completion`)).status === 200, { what: 'the gated job to end, seen at B', ...WAIT });
  });
});
