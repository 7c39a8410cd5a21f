/**
 * The queue through a portal SIGKILL and a replica restart (issue 32; docs/queue.md, "Tests and what was measured"):
 * real PostgreSQL, real nodes on virtual boxes, the portal(s) as real `farmhand portal` processes, jobs queued through
 * `POST /api/v2/jobs`. Every job's test case waits for a gate file, so the nodes stay busy and the rest of the jobs
 * wait in the queue while the portal is killed or a replica restarted; then the gate opens and every job must end up
 * started exactly once: one `started` queue row each with its own job_uid, one job on the nodes' own disks per queued
 * job (found by the job's `q` tag), one `job.run` audit entry per queue id, and every node job known to the queue.
 */
import { readdir, readFile, rm, writeFile, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../src/farm/db/migrate.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { setNodeLabels } from '../../src/farm/queue/labels.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, type TestConfig, type TestDaemon } from '../helpers/daemon.js';
import { holdableOrigin } from '../helpers/heldOrigin.js';
import { connectionString } from '../helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { freePort } from '../helpers/processFarm.js';
import { startPortalProcess, writePortalConfig, type PortalProcess } from '../helpers/replicaFarm.js';
import { replicaConfig, startFront, type Front } from '../helpers/rollingFarm.js';
import { waitFor } from '../helpers/wait.js';

const GATED = 'tests/gated.py::test_gate';
const NODES = ['vbox-qf1', 'vbox-qf2', 'vbox-qf3'];
const JOBS = 12;
const WAIT = { timeoutMs: 240_000, maxIntervalMs: 250 };

interface QueueRowSeen {
  queue_id: string;
  q: string;
  state: string;
  last_error: string | null;
  node_id: string | null;
  job_uid: string | null;
}

/** One farm of the test: a cluster, a work folder with the gate, the nodes (joined at `url`), a token of `ci`. */
class Farm {
  /** `nodeIds`: the nodes (all device=vbox; the first two room=lab1 too); `jobCount` jobs queued; `nodeConfig` added to each node's. */
  constructor(
    readonly nodeIds: string[] = NODES,
    readonly jobCount = JOBS,
    private readonly nodeConfig: TestConfig = {},
  ) {}
  cluster!: TestPostgres;
  db!: pg.Pool;
  work!: string;
  pack!: TestPackRepo;
  token!: string;
  readonly nodes = new Map<string, TestDaemon>();
  readonly portals: PortalProcess[] = [];

  /** With one portal process (openWithOnePortal): its port and configuration file. */
  port = 0;
  config = '';

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** open(), then one `farmhand portal` process on a free port and the nodes joined to it. */
  async openWithOnePortal(): Promise<void> {
    await this.open();
    this.port = await freePort();
    this.config = await writePortalConfig(this.work, 'portal', this.port, connectionString(this.cluster));
    await startPortal(this, 'portal', this.port, this.config);
    await this.addNodes(this.url);
  }

  /** SIGKILL the one portal, then start it again on the same database and port. */
  async killAndRestartPortal(): Promise<void> {
    const killed = this.portals.at(-1)!;
    killed.signal('SIGKILL');
    expect(await killed.exited).to.equal(null);
    await startPortal(this, 'portal', this.port, this.config);
  }

  get gate(): string {
    return path.join(this.work, 'gate');
  }

  async open(): Promise<void> {
    this.cluster = await startPostgres();
    this.db = new pg.Pool({ connectionString: connectionString(this.cluster), max: 2 });
    this.db.on('error', () => undefined);
    await migrate(this.db);
    this.work = await mkdtemp(path.join(os.tmpdir(), 'farm-queue-failover-'));
    await writeFile(path.join(this.work, 'replica.secret'), `${'s'.repeat(64)}\n`, { mode: 0o600 });
    const wait = ['import os, time', '', 'def test_gate():', `    while not os.path.exists(${JSON.stringify(this.gate)}):`, '        time.sleep(0.05)', ''];
    this.pack = await makeTestPack({ ...STANDARD_FILES, 'tests/gated.py': wait.join('\n') });
    await new PgUsers(this.db).add('ci');
    this.token = (await new PgTokens(this.db).createToken('ci')).token;
  }

  /** Register the nodes, label them (all device=vbox; the first two room=lab1 too), start them joined at `url`. */
  async addNodes(url: string): Promise<void> {
    for (const [i, id] of this.nodeIds.entries()) {
      const cred = path.join(this.work, `${id}.credential`);
      await writeFile(cred, `${await registerNode(this.db, id)}\n`, { mode: 0o600 });
      await setNodeLabels(this.db, id, i < 2 ? { device: 'vbox', room: 'lab1' } : { device: 'vbox' }, []);
      this.nodes.set(id, await startTestDaemon({ pack: this.pack, config: { ...this.nodeConfig, node_id: id, portal: { url, node_credential_file: cred } } }));
    }
    await this.allOnline('the nodes to join');
  }

  async allOnline(what: string): Promise<void> {
    await waitFor(async () => (await this.db.query(`SELECT 1 FROM nodes WHERE node_id = ANY($1) AND online AND state IS NOT NULL`, [this.nodeIds])).rowCount === this.nodeIds.length, { what, ...WAIT });
  }

  /** Queue jobCount jobs through HTTP at `url`: priorities mixed, a third for room=lab1 (two nodes), the rest for any vbox. */
  async queueJobs(url: string): Promise<void> {
    for (let i = 0; i < this.jobCount; i++) {
      const labels = i % 3 === 0 ? { room: 'lab1' } : { device: 'vbox' };
      const body = { labels, priority: (i * 37) % 101, test_pack_revision: 'main', test_cases: [GATED], tags: { q: String(i) } };
      const res = await fetch(`${url}/api/v2/jobs`, { method: 'POST', headers: { Authorization: `token ${this.token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
      expect(res.status, await res.clone().text()).to.equal(201);
    }
  }

  rows = async (): Promise<QueueRowSeen[]> =>
    (await this.db.query<QueueRowSeen>(`SELECT queue_id::text, request->'tags'->>'q' AS q, state, last_error, node_id, job_uid FROM queue_jobs ORDER BY queue_id`)).rows;

  /** The `job.run` audit entries the portal wrote for queued jobs, by queue id. */
  audited = async (): Promise<string[]> =>
    (await this.db.query<{ q: string }>(`SELECT detail->>'queue_id' AS q FROM audit WHERE action = 'job.run' AND detail->>'api' = 'queue' ORDER BY id`)).rows.map((r) => r.q);

  /** Every job on the nodes' own disks (`<data_dir>/jobs/<n>.json`), with its node. */
  async nodeJobs(): Promise<{ node: string; job_uid: string; status: string; q: string | undefined }[]> {
    const out: { node: string; job_uid: string; status: string; q: string | undefined }[] = [];
    for (const [node, d] of this.nodes) {
      const dir = path.join(d.dataDir, 'jobs');
      for (const f of (await readdir(dir).catch(() => [] as string[])).filter((n) => /^\d+\.json$/.test(n))) {
        const j = JSON.parse(await readFile(path.join(dir, f), 'utf8')) as { job_uid: string; status: string; tags: Record<string, string> };
        out.push({ node, job_uid: j.job_uid, status: j.status, q: j.tags.q });
      }
    }
    return out;
  }

  /** Until `n` queued jobs have started and been audited, every node runs one, and the rest wait: no start in flight. */
  async settledWith(n: number, what: string): Promise<void> {
    const ended = await waitFor(async () => {
      const rows = await this.rows();
      const started = rows.filter((r) => r.state === 'started').length;
      const running = (await this.nodeJobs()).filter((j) => j.status === 'running').length;
      const seen = { started, running, queued: rows.filter((r) => r.state === 'queued').length, audited: (await this.audited()).length };
      const failed = rows.filter((r) => r.state !== 'queued' && r.state !== 'started');
      if (failed.length) return failed;
      if (seen.started === n && seen.running === n && seen.queued === this.jobCount - n && seen.audited === n) return [];
      throw new Error(`seen ${JSON.stringify(seen)}`);
    }, { what, ...WAIT });
    expect(ended, 'queued jobs ended otherwise than started').to.deep.equal([]);
  }

  /** Open the gate and wait until every queued job has started and every node job has exited. */
  async drain(): Promise<void> {
    await writeFile(this.gate, 'open\n');
    await waitFor(async () => (await this.rows()).every((r) => r.state === 'started'), { what: 'every queued job to start', ...WAIT });
    await waitFor(async () => {
      const jobs = await this.nodeJobs();
      return jobs.length >= this.jobCount && jobs.every((j) => j.status === 'exited');
    }, { what: 'every node job to exit', ...WAIT });
    await waitFor(async () => (await this.audited()).length >= this.jobCount, { what: 'a job.run audit entry per started job', ...WAIT });
  }

  /** 0 lost, 0 doubled: each queued job started once, as one node job, audited once; no node job the queue does not know. */
  async expectExactlyOnce(what: string): Promise<void> {
    const rows = await this.rows();
    const jobs = await this.nodeJobs();
    const audited = await this.audited();
    const lost = rows.filter((r) => r.state !== 'started' || !r.job_uid).map((r) => r.q);
    const perQ = new Map<string, string[]>();
    for (const j of jobs) perQ.set(j.q ?? '?', [...(perQ.get(j.q ?? '?') ?? []), j.job_uid]);
    const doubled = [...perQ].filter(([, uids]) => uids.length > 1).map(([q, uids]) => `q=${q}: ${uids.join(', ')}`);
    console.log(`      ${what}: ${rows.length} queued, ${rows.filter((r) => r.state === 'started').length} started, ${jobs.length} node jobs, ${lost.length} lost, ${doubled.length} doubled`);
    expect(lost, 'queued jobs not started (lost)').to.deep.equal([]);
    expect(doubled, 'queued jobs started twice on the nodes').to.deep.equal([]);
    expect(rows.map((r) => r.q).sort(), 'the queue holds each job once').to.deep.equal([...Array(this.jobCount).keys()].map(String).sort());
    expect(new Set(rows.map((r) => r.job_uid)).size, 'a job_uid per queue row').to.equal(this.jobCount);
    const byUid = new Map(jobs.map((j) => [j.job_uid, j]));
    for (const r of rows) expect(byUid.get(r.job_uid!), `queue row q=${r.q} names ${r.job_uid}, a job of its node with its tag`).to.deep.include({ node: r.node_id, q: r.q });
    expect(jobs.map((j) => j.job_uid).sort(), 'no node job the queue does not know').to.deep.equal(rows.map((r) => r.job_uid).sort());
    expect([...audited].sort(), 'one job.run audit entry per queue id').to.deep.equal(rows.map((r) => r.queue_id).sort());
  }

  async close(): Promise<void> {
    for (const p of this.portals) p.signal('SIGKILL');
    for (const n of this.nodes.values()) await n.stop().catch(() => undefined);
    await this.pack?.cleanup();
    await this.db?.end();
    await this.cluster?.stop();
    if (this.work) await rm(this.work, { recursive: true, force: true });
  }
}

/** Start a portal process on `file` and wait until it listens. */
async function startPortal(farm: Farm, name: string, port: number, file: string): Promise<PortalProcess> {
  const p = startPortalProcess(name, port, file);
  farm.portals.push(p);
  await p.listening(WAIT);
  return p;
}

describe('the queue through a portal SIGKILL (one portal process)', function () {
  this.timeout(900_000);
  const farm = new Farm();
  before(async function () {
    this.timeout(300_000);
    await farm.openWithOnePortal();
  });
  after(() => farm.close());

  it('SIGKILLed with 3 jobs started and 9 queued, started again on the same database: 0 lost, 0 doubled', async () => {
    await farm.queueJobs(farm.url);
    await farm.settledWith(NODES.length, '3 jobs started (one per node) and 9 waiting');
    await farm.killAndRestartPortal();
    await farm.allOnline('the nodes back at the restarted portal');
    // The restarted portal saw the queue as it was: nothing started or lost while it was away.
    const rows = await farm.rows();
    expect(rows.filter((r) => r.state === 'queued').length, 'jobs waiting after the restart').to.equal(JOBS - NODES.length);
    await farm.drain();
    await farm.expectExactlyOnce('portal SIGKILLed');
  });
});

describe('the queue through replica restarts (3 replicas behind HAProxy)', function () {
  this.timeout(900_000);
  const farm = new Farm();
  const names = ['r1', 'r2', 'r3'];
  const ports: Record<string, number> = {};
  const replicas: Record<string, PortalProcess> = {};
  let front: Front;

  const start = async (name: string): Promise<void> => {
    const file = await replicaConfig(farm.work, { name, port: ports[name]!, database: connectionString(farm.cluster), leaseSecs: 2 });
    replicas[name] = await startPortal(farm, name, ports[name]!, file);
    await waitFor(async () => (await front.state(name)) === 2, { what: `HAProxy to see ${name} up`, ...WAIT });
  };
  /** The replica holding the most nodes: the one dispatching most of the queue (a replica starts jobs on its own nodes). */
  const busiest = async (): Promise<string> => {
    const { rows } = await farm.db.query<{ owner_replica: string }>(`SELECT owner_replica FROM nodes WHERE node_id = ANY($1) AND online GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`, [NODES]);
    return rows[0]!.owner_replica;
  };

  before(async function () {
    this.timeout(300_000);
    await farm.open();
    for (const n of names) ports[n] = await freePort();
    front = await startFront(farm.work, ports);
    for (const n of names) await start(n);
    await farm.addNodes(front.url);
  });
  after(async () => {
    await farm.close();
    front?.stop();
  });

  it('the dispatching replica SIGTERMed and started again, then SIGKILLed and started again, jobs queued: 0 lost, 0 doubled', async () => {
    await farm.queueJobs(front.url);
    await farm.settledWith(NODES.length, '3 jobs started (one per node) and 9 waiting');
    const first = await busiest();
    replicas[first]!.signal('SIGTERM');
    expect(await replicas[first]!.exited, `${first} stopped cleanly (${replicas[first]!.err()})`).to.equal(0);
    await farm.allOnline(`the nodes of ${first} at another replica`);
    await start(first);
    const second = await busiest();
    replicas[second]!.signal('SIGKILL');
    expect(await replicas[second]!.exited).to.equal(null);
    await waitFor(async () => (await farm.db.query(`SELECT 1 FROM nodes WHERE node_id = ANY($1) AND online AND owner_replica <> $2`, [NODES, second])).rowCount === NODES.length, {
      what: `the nodes of ${second} taken by the other replicas`,
      ...WAIT,
    });
    await start(second);
    expect((await farm.rows()).filter((r) => r.state === 'queued').length, 'jobs waiting after the restarts').to.equal(JOBS - NODES.length);
    await farm.drain();
    await farm.expectExactlyOnce(`replica ${first} SIGTERMed, ${second} SIGKILLed`);
  });
});

describe('the queue through a portal SIGKILL while a start is in flight', function () {
  this.timeout(900_000);
  // One node that fetches the test pack on every start (refresh_secs 0), so that its start can be held at the origin.
  const farm = new Farm(['vbox-qf1'], 1, { test_pack: { refresh_secs: 0 } });
  before(async function () {
    this.timeout(300_000);
    await farm.openWithOnePortal();
  });
  after(() => farm.close());

  it('"a portal restart ... starts none twice": killed after the claim, while the node fetches before answering: the restarted portal asks again with the key, one job', async () => {
    const node = farm.nodes.get('vbox-qf1')!;
    const origin = await holdableOrigin(path.join(node.dataDir, 'test-pack.git'));
    try {
      await origin.hold();
      await farm.queueJobs(farm.url);
      // In flight: the intent committed (the job pinned to the node) and the node's start held in its fetch.
      await waitFor(async () => (await origin.heldCount()) > 0 && (await farm.rows())[0]?.node_id === 'vbox-qf1', { what: 'the start held at the origin', ...WAIT });
      await farm.killAndRestartPortal();
      await farm.allOnline('the node back at the restarted portal');
      expect((await farm.rows())[0], 'still being started on its node').to.include({ state: 'queued', node_id: 'vbox-qf1' });
      // The start the dead portal sent goes on; the restarted portal's, with the same key, is answered with its job.
      await origin.release();
      await farm.drain();
      await farm.expectExactlyOnce('portal SIGKILLed during a start');
    } finally {
      await origin.cleanup();
    }
  });
});
