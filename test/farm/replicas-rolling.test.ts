/**
 * The replicas' faults (issue 19, item 5; docs/farm.md, "Many portals: faults and figures"), with real parts: three
 * `farmhand portal` processes in replicas "many" on one throwaway PostgreSQL and one storage folder, a real Debian
 * haproxy in front (`balance roundrobin`, checking /readyz), two real nodes connected through it, and CI-like
 * clients running jobs through it (run_tests, await_completion, the Job, the job's results).
 *
 * (a) Every replica restarted in turn (SIGTERM, then started again) while the clients run jobs: every job completes
 *     and is recorded once; the clients see no error but 503 with Retry-After (counted) and no connection reset.
 * (b) The node's owner replica SIGKILLed while the node runs a job, uploads a result's file, a client waits in
 *     await_completion and holds a reservation of the node: the job is not ended, no result or event is lost or
 *     doubled, the reservation holds, and the node's files are byte-identical in the portal's storage.
 */
import { existsSync } from 'node:fs';
import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
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
import { SERVED_BY_HEADER, startPortalProcess, type PortalProcess } from '../helpers/replicaFarm.js';
import { CountingClient, filesOf, newTally, replicaConfig, startFront, type Front } from '../helpers/rollingFarm.js';
import { waitFor } from '../helpers/wait.js';

const NODES = ['farmhand-roll-1', 'farmhand-roll-2'];
const REPLICAS = ['r1', 'r2', 'r3'];
const WAIT = { timeoutMs: 180_000, maxIntervalMs: 200 };
const JOB = ['tests/basic.py::test_pass', 'tests/basic.py::test_fail'];

describe('farm: replicas` faults, three replicas behind a real HAProxy, real nodes, CI-like clients', function () {
  this.timeout(900_000);
  let cluster: TestPostgres;
  let db: pg.Pool;
  let work: string;
  let gate: string;
  let pack: TestPackRepo;
  let token: string;
  let front: Front;
  const nodes: TestDaemon[] = [];
  const ports: Record<string, number> = {};
  const replicas: Record<string, PortalProcess> = {};
  const all: PortalProcess[] = [];

  const start = async (name: string) => {
    const file = await replicaConfig(work, { name, port: ports[name]!, database: connectionString(cluster), leaseSecs: 2 });
    const p = startPortalProcess(name, ports[name]!, file);
    all.push(p);
    replicas[name] = p;
    await p.listening(WAIT);
    await waitFor(async () => (await front.state(name)) === 2, { what: `HAProxy to see ${name} up`, ...WAIT });
    return p;
  };
  const nodeRow = async (id: string) =>
    (await db.query<{ online: boolean; owner_replica: string | null }>('SELECT online, owner_replica FROM nodes WHERE node_id = $1', [id])).rows[0];

  before(async function () {
    this.timeout(300_000);
    cluster = await startPostgres();
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
    await migrate(db);
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-rolling-'));
    await writeFile(path.join(work, 'replica.secret'), 'a secret every replica shares, long enough\n', { mode: 0o600 });
    gate = path.join(work, 'gate');
    pack = await makeTestPack({
      ...STANDARD_FILES,
      'tests/gated.py': ['import os, time', '', 'def test_gate():', `    while not os.path.exists(${JSON.stringify(gate)}):`, '        time.sleep(0.05)', ''].join('\n'),
      // A file of many upload chunks (1 MiB each), so that the upload is under way when the replica is killed.
      'tests/blob.py': ['import os', '', 'def test_blob():', '    os.makedirs("big", exist_ok=True)', '    with open("big/blob.bin", "wb") as f:', '        f.write(os.urandom(48 * 1024 * 1024 + 12345))', ''].join('\n'),
    });
    await new PgUsers(db).add('ci');
    token = (await new PgTokens(db).createToken('ci')).token;
    for (const r of REPLICAS) ports[r] = await freePort();
    front = await startFront(work, ports);
    for (const r of REPLICAS) await start(r);
    for (const id of NODES) {
      const credFile = path.join(work, `${id}.credential`);
      await writeFile(credFile, `${await registerNode(db, id)}\n`, { mode: 0o600 });
      nodes.push(await startTestDaemon({ pack, config: { node_id: id, portal: { url: front.url, node_credential_file: credFile } } }));
    }
    for (const id of NODES) await waitFor(async () => (await nodeRow(id))?.online, { what: `${id} online through HAProxy`, ...WAIT });
  });
  after(async () => {
    for (const c of all) c.signal('SIGKILL');
    front?.stop();
    for (const n of nodes) await n.stop();
    await pack?.cleanup();
    await db?.end();
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('(a) every replica restarted in turn under CI-like clients: every job completes, recorded once; only 503 + Retry-After, no reset', async () => {
    const tally = newTally();
    const done: { uid: string; job: any; results: any[] }[] = [];
    const perNode = NODES.map(() => 0);
    let stop = false;
    // Two clients per node (a CI with two pipelines per box): a client whose node is busy gets 409 and tries again.
    const clients = NODES.flatMap((id, i) =>
      [0, 1].map(async () => {
        const c = new CountingClient(front.url, token, tally);
        while (!stop) {
          try {
            const r = await c.runJob(id, JOB);
            done.push(r);
            perNode[i]!++;
          } catch (e) {
            // 409 "busy" is the other pipeline's job: wait for it (the error list keeps it out of the tally).
            if (/: 409 /.test((e as Error).message)) {
              tally.errors.pop();
              await new Promise((r) => setTimeout(r, 200));
              continue;
            }
            throw e;
          }
        }
      }),
    );
    const progress = async (what: string) => {
      const base = [...perNode];
      await waitFor(() => perNode.every((n, i) => n >= base[i]! + 1), { what, ...WAIT });
    };
    const running = Promise.all(clients);
    running.catch(() => undefined);
    await Promise.race([progress('a job done on each node before the restarts'), running]);
    for (const r of REPLICAS) {
      const p = replicas[r]!;
      p.signal('SIGTERM');
      expect(await p.exited, `${r} stopped cleanly (${p.err()})`).to.equal(0);
      await start(r);
      await Promise.race([progress(`a job done on each node after ${r} restarted`), running]);
    }
    stop = true;
    await running;

    console.log(
      `      rolling restart of 3 replicas: ${done.length} jobs, ${tally.requests} requests, ${tally.unavailable} answered 503 + Retry-After (${((100 * tally.unavailable) / tally.requests).toFixed(2)} %), ${tally.resets.length} resets`,
    );
    for (const w of tally.unavailableWhat) console.log(`        503: ${w}`);
    expect(tally.errors, 'errors other than 503 + Retry-After').to.deep.equal([]);
    expect(tally.resets, 'connections reset on requests that had started').to.deep.equal([]);
    for (const { uid, job, results } of done) {
      expect(job.status, uid).to.equal('exited');
      expect(job.result_counts, uid).to.deep.equal({ pass: 1, fail: 1, error: 0, total: 2 });
      expect(results.map((x: { test_case: string }) => x.test_case).sort(), uid).to.deep.equal([...JOB].sort());
    }
    // Recorded once, in PostgreSQL: one jobs row each, exited by its own end, two results each, one job.exited each.
    const uids = done.map((d) => d.uid);
    const jobs = await db.query<{ job_uid: string; state: string; end_reason: string | null }>(
      `SELECT job_uid, state, end_reason FROM jobs WHERE job_uid = ANY($1)`,
      [uids],
    );
    expect(jobs.rows.length).to.equal(uids.length);
    expect(jobs.rows.filter((j) => j.state !== 'exited')).to.deep.equal([]);
    const res = await db.query<{ job_uid: string; n: number; cases: number }>(
      'SELECT job_uid, count(*)::int AS n, count(DISTINCT test_case)::int AS cases FROM results WHERE job_uid = ANY($1) GROUP BY job_uid',
      [uids],
    );
    expect(res.rows.length).to.equal(uids.length);
    expect(res.rows.filter((r) => r.n !== 2 || r.cases !== 2)).to.deep.equal([]);
    const exits = await db.query<{ job_uid: string; n: number }>(
      `SELECT data->>'job_uid' AS job_uid, count(*)::int AS n FROM events_outbox WHERE type = 'job.exited' AND data->>'job_uid' = ANY($1) GROUP BY 1`,
      [uids],
    );
    expect(exits.rows.length).to.equal(uids.length);
    expect(exits.rows.filter((r) => r.n !== 1)).to.deep.equal([]);
    // No job the clients do not know of: a run_tests answered 503 (so sent again by its client) after the node had
    // started the job would leave one.
    const orphans = await db.query<{ job_uid: string }>('SELECT job_uid FROM jobs WHERE node_id = ANY($1) AND NOT (job_uid = ANY($2))', [NODES, uids]);
    if (orphans.rows.length) {
      for (const p of all) console.log(p.name, p.out().split('\n').filter((l) => /drained|stopping|run_tests|forward|lease/.test(l)).join('\n'));
      console.log('HAProxy:', front.log().split('\n').filter((l) => /run_tests/.test(l)).join('\n'));
    }
    expect(orphans.rows, 'jobs started that no client was told of').to.deep.equal([]);
    expect(new Set(uids).size, 'a job told to two clients').to.equal(uids.length);
  });

  it('a run_tests sent again with its Idempotency-Key, through another replica, answers the job it started', async () => {
    const id = NODES[1]!;
    const send = async (base: string) => {
      const res = await fetch(`${base}/api/v2/run_tests`, {
        method: 'POST',
        headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json', 'Idempotency-Key': 'rolling-once-1' },
        body: JSON.stringify({ node_id: id, test_pack_revision: 'main', test_cases: JOB, shuffle: false, tags: {} }),
      });
      return { status: res.status, served: res.headers.get(SERVED_BY_HEADER), json: (await res.json()) as { job_uid?: string } };
    };
    const count = async () => (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM jobs WHERE node_id = $1', [id])).rows[0]!.n;
    const before = await count();
    const first = await send(front.url);
    expect(first.status, JSON.stringify(first.json)).to.equal(200);
    // Sent again to another replica, as HAProxy's retry does (on its last try, `option redispatch`).
    const other = REPLICAS.find((r) => r !== first.served)!;
    const again = await send(replicas[other]!.url);
    expect(again.status, JSON.stringify(again.json)).to.equal(200);
    expect(again.json.job_uid).to.equal(first.json.job_uid);
    const job = await new CountingClient(front.url, token).awaitJob(first.json.job_uid!);
    expect(job.status).to.equal('exited');
    expect(await count(), 'one job started').to.equal(before + 1);
  });

  it('(b) the owner SIGKILLed during a job, an upload, a long poll and a reservation: nothing ended, lost or changed', async () => {
    const id = NODES[0]!;
    const node = nodes[0]!;
    const tally = newTally();
    const c = new CountingClient(front.url, token, tally);
    for (const r of REPLICAS) await waitFor(async () => (await front.state(r)) === 2, { what: `HAProxy to see ${r} up`, ...WAIT });
    await waitFor(async () => (await nodeRow(id))?.online, { what: `${id} online`, ...WAIT });
    const reservation = (await c.call('POST', '/api/v2/reservations', { node_ids: [id], message: 'failover test' })).json.reservations[0];
    const started = await c.call('POST', '/api/v2/run_tests', {
      node_id: id,
      test_pack_revision: 'main',
      test_cases: ['tests/blob.py::test_blob', 'tests/gated.py::test_gate'],
      shuffle: false,
      tags: {},
    });
    const uid = started.json.job_uid as string;
    const waiting = c.awaitJob(uid); // the long poll, through HAProxy, held while the gate is shut
    waiting.catch(() => undefined);
    // The upload under way: a partial file of the node in the shared storage.
    const partial = path.join(work, 'storage', '.partial');
    await waitFor(async () => (await readdir(partial).catch(() => [] as string[])).some((f) => f.startsWith(`${id}.`)), { what: 'an upload under way', timeoutMs: 300_000, intervalMs: 5, maxIntervalMs: 20 });
    const owner = (await nodeRow(id))!.owner_replica!;
    replicas[owner]!.signal('SIGKILL');
    await replicas[owner]!.exited;
    await waitFor(async () => {
      const row = await nodeRow(id);
      return row?.online && row.owner_replica !== owner;
    }, { what: `${id} taken by another replica`, ...WAIT });

    // The reservation holds through the failover.
    const held = await db.query('SELECT ended_at FROM reservations WHERE reservation_id = $1', [reservation.reservation_id]);
    expect(held.rows, JSON.stringify(reservation)).to.deep.equal([{ ended_at: null }]);
    const job = await db.query<{ state: string }>('SELECT state FROM jobs WHERE job_uid = $1', [uid]);
    expect(job.rows[0]?.state, 'the job through the failover').to.equal('running');

    await writeFile(gate, 'open\n');
    const exited = await waiting;
    expect(exited.status).to.equal('exited');
    expect(exited.result_counts).to.deep.equal({ pass: 2, fail: 0, error: 0, total: 2 });
    const ended = await db.query<{ state: string; end_reason: string | null }>(`SELECT state, end_reason FROM jobs WHERE job_uid = $1`, [uid]);
    expect(ended.rows).to.deep.equal([{ state: 'exited', end_reason: null }]);
    // Every event of the job, each once, in the node's order (the outbox).
    const { rows } = await db.query<{ type: string; node_event_id: string }>(
      `SELECT type, node_event_id FROM events_outbox WHERE data->>'job_uid' = $1 AND node_event_id IS NOT NULL ORDER BY seq`,
      [uid],
    );
    expect(rows.map((r) => r.type)).to.deep.equal(['job.started', 'run.started', 'run.finished', 'run.started', 'run.finished', 'job.exited']);
    expect(new Set(rows.map((r) => r.node_event_id)).size).to.equal(rows.length);
    const results = await db.query<{ result_id: string }>('SELECT result_id FROM results WHERE job_uid = $1 ORDER BY start_time', [uid]);
    expect(results.rows).to.have.length(2);
    // Files byte-identical: the node's result folders and the portal's storage, once the uploads are done.
    for (const { result_id } of results.rows) {
      const rel = result_id.slice(`/${id}/`.length);
      const mine = await filesOf(path.join(node.dataDir, 'results', rel));
      const stored = path.join(work, 'storage', id, rel);
      // Complete once the portal wrote its record (result.json, last, atomically: its temporary file sits beside the
      // uploaded files while it is written, and a listing taken then has one file more).
      await waitFor(async () => existsSync(path.join(stored, 'result.json')) && JSON.stringify(await filesOf(stored).catch(() => ({}))) === JSON.stringify(mine), {
        what: `the files of ${result_id} in the storage`,
        ...WAIT,
      });
      expect(await filesOf(stored)).to.deep.equal(mine);
    }
    const blob = results.rows[0]!.result_id.slice(`/${id}/`.length);
    expect(Object.keys(await filesOf(path.join(node.dataDir, 'results', blob)))).to.include('big/blob.bin');
    console.log(`      owner SIGKILLed: ${tally.requests} requests, ${tally.unavailable} answered 503 + Retry-After, ${tally.resets.length} resets (${tally.resets.join('; ')})`);
    expect(tally.errors).to.deep.equal([]);
    await c.call('DELETE', `/api/v2/reservations/${reservation.reservation_id}`, undefined, [204]);
    await start(owner);
  });
});
