// The job queue on a real PostgreSQL (throwaway cluster): enqueue's checks, the order, exactly-once starts with two
// dispatchers racing on one database, cancel, why a job waits, queue timeouts, and a dispatcher SIGKILLed between its
// claim and the node's answer giving the job back. The nodes' side (where each stands, what a start does) is the
// dispatcher's ports (src/farm/queue/ports.ts), driven here by `Lab`; the rest is the real store, dispatcher, NOTIFY.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import type { Availability, AvailabilityKind } from '../../src/core/availability.js';
import { FarmError } from '../../src/core/errors.js';
import type { Logger } from '../../src/core/ports.js';
import { migrate } from '../../src/farm/db/migrate.js';
import { JOB_LOCK_CLASS, NODE_LOCK_CLASS, QueueDispatcher, type DispatchEvent } from '../../src/farm/queue/dispatcher.js';
import { setNodeLabels } from '../../src/farm/queue/labels.js';
import type { JobStarter, NodeStates, StartOutcome, StartRequest } from '../../src/farm/queue/ports.js';
import { PgJobQueue, type QueuedJob } from '../../src/farm/queue/store.js';
import { FarmWakeups } from '../../src/farm/wakeups.js';
import { capturingLogger } from '../helpers/logger.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const ROOT = resolve(fileURLToPath(new URL('../..', import.meta.url)));
const RUN = { test_pack_revision: 'main', test_cases: ['tests/a.py::test_a'] };

/** The nodes as the dispatchers see them: each one's availability, and what a start does (busy: 409, else a job). */
class Lab {
  readonly state = new Map<string, AvailabilityKind>();
  /** Each queue id's starts, in order: [node, job_uid]. */
  readonly started = new Map<number, [string, string][]>();
  readonly order: number[] = [];
  /** The nodes' Idempotency-Keys: key -> the job_uid it started (a start sent again with it answers that job). */
  readonly keys = new Map<string, string>();
  private readonly listeners = new Set<() => void>();
  private n = 0;
  /** Jobs end by themselves after each start (the next tick) when true. */
  autoFinish = false;
  /** A start does not make its node look busy when true: its job.started not heard yet (NodeStates.jobOf). */
  quiet = false;
  /** Each node's job as the portal heard of it (NodeStates.jobOf). */
  readonly heard = new Map<string, { job_uid: string; status: 'running' | 'exited' }>();

  constructor(nodes: string[]) {
    for (const id of nodes) this.state.set(id, 'available');
  }
  set(id: string, kind: AvailabilityKind): void {
    this.state.set(id, kind);
    for (const fn of this.listeners) fn();
  }
  nodes(): NodeStates {
    return {
      availability: () => Promise.resolve(new Map([...this.state].map(([id, kind]): [string, Availability] => [id, { kind, detail: kind === 'available' ? null : 'x' }]))),
      onChange: (fn) => (this.listeners.add(fn), () => this.listeners.delete(fn)),
      jobOf: (id) => this.heard.get(id) ?? null,
    };
  }
  starter(): JobStarter {
    return {
      start: async (req: StartRequest): Promise<StartOutcome> => {
        // A node answers over a connection: not in the same tick.
        await new Promise((r) => setImmediate(r));
        const known = req.key === undefined ? undefined : this.keys.get(req.key);
        if (known) return { ok: true, job_uid: known };
        if (this.state.get(req.nodeId) !== 'available') return { ok: false, retry: true, status: 409, message: `node ${req.nodeId} is busy` };
        if (!this.quiet) this.state.set(req.nodeId, 'running');
        const uid = `/${req.nodeId}/abcd/${++this.n}`;
        this.started.set(req.queueId, [...(this.started.get(req.queueId) ?? []), [req.nodeId, uid]]);
        this.order.push(req.queueId);
        if (req.key !== undefined) this.keys.set(req.key, uid);
        if (this.autoFinish) setImmediate(() => this.set(req.nodeId, 'available'));
        return { ok: true, job_uid: uid };
      },
    };
  }
}

/** Resolves when `pred` holds for the dispatchers' events seen so far. */
function eventsUntil(list: DispatchEvent[], pred: (l: DispatchEvent[]) => boolean): { push(e: DispatchEvent): void; done: Promise<void> } {
  let fire!: () => void;
  const done = new Promise<void>((r) => (fire = r));
  return {
    push(e) {
      list.push(e);
      if (pred(list)) fire();
    },
    done,
  };
}

const codeOf = async (p: Promise<unknown>): Promise<string> => {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(FarmError);
    return (e as FarmError).code;
  }
  throw new Error('did not throw');
};

describe('the job queue (PostgreSQL)', function () {
  this.timeout(120_000);
  let cluster: TestPostgres;
  let admin: pg.Pool;
  let conninfo: string;
  let dbn = 0;
  const closers: (() => Promise<unknown>)[] = [];

  before(async () => {
    cluster = await startPostgres();
    admin = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database });
  });
  after(async () => {
    await admin?.end();
    await cluster?.stop();
  });
  afterEach(async () => {
    for (const c of closers.splice(0).reverse()) await c();
  });

  /** A fresh database with the farm's schema and these nodes, labelled. */
  async function farm(nodes: Record<string, Record<string, string>>): Promise<pg.Pool> {
    const name = `q${++dbn}`;
    await admin.query(`CREATE DATABASE ${name}`);
    conninfo = `postgresql://${cluster.user}@/${name}?host=${encodeURIComponent(cluster.host)}&port=${cluster.port}`;
    const pool = new pg.Pool({ connectionString: conninfo, max: 10 });
    closers.push(() => pool.end());
    await migrate(pool);
    for (const [id, labels] of Object.entries(nodes)) {
      await pool.query('INSERT INTO nodes (node_id) VALUES ($1)', [id]);
      await setNodeLabels(pool, id, labels, []);
    }
    return pool;
  }

  async function dispatcher(pool: pg.Pool, lab: Lab, onEvent: (e: DispatchEvent) => void, settleMs = 0, logger?: Logger): Promise<QueueDispatcher> {
    const wakeups = new FarmWakeups({ pool });
    await wakeups.start();
    // A slow poll: what starts the jobs in time is the NOTIFY of each job queued and the lab's node changes.
    const d = new QueueDispatcher({ pool, queue: new PgJobQueue(pool), nodes: lab.nodes(), starter: lab.starter(), wakeups, onEvent, pollMs: 60_000, settleMs, logger });
    d.start();
    closers.push(() => wakeups.close(), () => d.close());
    return d;
  }

  it('enqueue: checks labels, priority, the run_tests body; refuses at once what no node can ever take', async () => {
    const pool = await farm({ r1: { device: 'roku', room: 'lab1' }, a1: { device: 'appletv', room: 'lab2' } });
    const q = new PgJobQueue(pool);
    const job = await q.enqueue({ labels: { device: 'roku' }, ...RUN, tags: { build: '42' } }, 'alice');
    expect(job).to.include({ state: 'queued', priority: 50, selector: 'device=roku', username: 'alice', queue_timeout_secs: null, node_id: null });
    expect(job.request).to.deep.equal({ ...RUN, category: 'default', soak: 'run once', shuffle: false, remote_control: null, tags: { build: '42' } });
    expect(await q.get(job.queue_id)).to.deep.equal(job);
    const refused = async (body: unknown) => codeOf(q.enqueue(body, 'alice'));
    expect(await refused({ labels: { device: 'roku' }, priority: 101, ...RUN })).to.equal('invalid_request');
    expect(await refused({ labels: { device: 'roku' }, priority: -1, ...RUN })).to.equal('invalid_request');
    expect(await refused({ labels: { colour: 'red' }, ...RUN })).to.equal('invalid_request');
    expect(await refused({ labels: { device: 'roku', room: 'lab2' }, ...RUN })).to.equal('invalid_request');
    expect(await refused({ labels: { device: 'roku' }, test_pack_revision: 'main', test_cases: ['nope'] })).to.equal('invalid_request');
    expect(await refused({ labels: { device: 'roku' }, node_id: 'r1', ...RUN })).to.equal('invalid_request');
    expect(await refused({ labels: { device: 'roku' }, queue_timeout_secs: 0, ...RUN })).to.equal('invalid_request');
    expect(await refused({ ...RUN })).to.equal('invalid_request');
    expect(await codeOf(q.get(999))).to.equal('not_found');
    expect((await q.list()).map((j) => j.queue_id)).to.deep.equal([job.queue_id]);
  });

  it('starts jobs highest priority first, then oldest, each on a node matching its labels', async () => {
    const pool = await farm({ r1: { device: 'roku' }, a1: { device: 'appletv' } });
    const lab = new Lab(['r1', 'a1']);
    lab.set('r1', 'running');
    lab.set('a1', 'maintenance');
    const q = new PgJobQueue(pool);
    const ids: Record<string, number> = {};
    for (const [name, priority] of [['low', 10], ['mid1', 50], ['high', 90], ['mid2', 50], ['top', 100]] as const) {
      ids[name] = (await q.enqueue({ labels: { device: 'roku' }, priority, ...RUN }, 'alice')).queue_id;
    }
    const tv = (await q.enqueue({ labels: { device: 'appletv' }, priority: 0, ...RUN }, 'bob')).queue_id;
    const events: DispatchEvent[] = [];
    let next = eventsUntil(events, (l) => l.filter((e) => e.type === 'started').length === 1);
    await dispatcher(pool, lab, (e) => next.push(e));
    // One at a time: each job ends, the node is free again, the next one starts.
    for (let i = 1; i <= 5; i++) {
      next = eventsUntil(events, (l) => l.filter((e) => e.type === 'started').length === i);
      lab.set('r1', 'available');
      await next.done;
    }
    expect(lab.order).to.deep.equal([ids.top, ids.high, ids.mid1, ids.mid2, ids.low]);
    for (const id of Object.values(ids)) expect(lab.started.get(id)?.[0]?.[0]).to.equal('r1');
    const done = (await q.list({ states: ['started'] })).map((j) => [j.queue_id, j.node_id, j.job_uid]);
    expect(done).to.have.length(5);
    expect((await q.get(tv)).state).to.equal('queued');
    next = eventsUntil(events, (l) => l.some((e) => e.type === 'started' && e.job.queue_id === tv));
    lab.set('a1', 'available');
    await next.done;
    expect(await q.get(tv)).to.include({ state: 'started', node_id: 'a1', end_reason: 'started' });
  });

  it('"no node idle while a job it matches waits": a node given a job is not offered another until its job is heard of, then at once, even when the job already ended', async () => {
    const pool = await farm({ n1: { device: 'roku' } });
    const lab = new Lab(['n1']);
    lab.quiet = true;
    const q = new PgJobQueue(pool);
    const first = (await q.enqueue({ labels: { device: 'roku' }, priority: 90, ...RUN }, 'alice')).queue_id;
    const second = (await q.enqueue({ labels: { device: 'roku' }, ...RUN }, 'alice')).queue_id;
    const events: DispatchEvent[] = [];
    let next = eventsUntil(events, (l) => l.some((e) => e.type === 'started'));
    // A settle time longer than the test: what frees the node is hearing of its job.
    const log = capturingLogger();
    const d = await dispatcher(pool, lab, (e) => next.push(e), 600_000, log);
    await next.done;
    const uid = lab.started.get(first)![0]![1];
    // Still shown available (its job.started not heard yet): woken again, the dispatcher does not offer it the second job.
    const passes = d.passes;
    lab.set('n1', 'available');
    await d.idle();
    expect(d.passes).to.be.greaterThan(passes);
    expect(lab.started.has(second)).to.equal(false);
    // The pass's debug line says why the node was left out (docs/queue.md, "The dispatcher's log").
    const last = log.entries.filter((l) => l.msg === 'queue: dispatch pass').at(-1);
    expect(last?.obj).to.deep.include({ free: [], left_out: { n1: 'given' } });
    expect(log.entries.find((l) => l.msg === 'queue: a start')?.obj).to.include({ queue_id: first, node: 'n1', ok: true });
    // The first job, short, ended before any pass saw it running: its job.exited is what the portal hears first.
    next = eventsUntil(events, (l) => l.some((e) => e.type === 'started' && e.job.queue_id === second));
    lab.heard.set('n1', { job_uid: uid, status: 'exited' });
    lab.set('n1', 'available');
    await next.done;
    expect(lab.started.get(second)?.[0]?.[0]).to.equal('n1');
    expect(lab.started.get(first)).to.have.length(1);
  });

  it('two dispatchers on one database: every job started exactly once, never two at once on a node', async () => {
    const nodes = Object.fromEntries(['n1', 'n2', 'n3', 'n4'].map((n, i) => [n, { device: i < 2 ? 'roku' : 'appletv' }]));
    const pool = await farm(nodes);
    const lab = new Lab(Object.keys(nodes));
    lab.autoFinish = true;
    const N = 80;
    const events: DispatchEvent[] = [];
    const all = eventsUntil(events, (l) => l.filter((e) => e.type === 'started').length >= N);
    const poolB = new pg.Pool({ connectionString: conninfo, max: 10 });
    closers.push(() => poolB.end());
    await dispatcher(pool, lab, (e) => all.push(e));
    await dispatcher(poolB, lab, (e) => all.push(e));
    const q = new PgJobQueue(pool);
    for (let i = 0; i < N; i++) await q.enqueue({ labels: { device: i % 3 === 0 ? 'appletv' : 'roku' }, priority: (i * 37) % 101, ...RUN }, 'ci');
    await all.done;
    expect(lab.started.size).to.equal(N);
    for (const [id, starts] of lab.started) expect(starts, `job ${id}`).to.have.length(1);
    const rows = await q.list({ limit: 1000 });
    expect(rows.filter((j) => j.state === 'started')).to.have.length(N);
    for (const j of rows) expect(j.job_uid).to.equal(lab.started.get(j.queue_id)![0]![1]);
    expect(events.filter((e) => e.type === 'started')).to.have.length(N);
  });

  it('a claim leaves a node alone while another process holds its lock (a replica starting a job there), and a job while its claimer holds it; the row is not pinned meanwhile', async () => {
    const pool = await farm({ n1: { device: 'roku' } });
    const lab = new Lab(['n1']);
    const q = new PgJobQueue(pool);
    const other = await pool.connect();
    closers.push(async () => other.release());
    const events: DispatchEvent[] = [];
    let next = eventsUntil(events, (l) => l.some((e) => e.type === 'started'));
    // Refused while held: the dispatcher looks again every LOCKED_NODE_MS, so some passes go by with nothing started.
    const refusedWhileHeld = async (d: QueueDispatcher, queueId: number) => {
      const passes = d.passes;
      await waitFor(() => d.passes >= passes + 3, { what: 'three passes while the lock is held', timeoutMs: 60_000 });
      expect(lab.started.has(queueId)).to.equal(false);
      expect(await q.get(queueId)).to.include({ state: 'queued', node_id: null });
    };
    await other.query('SELECT pg_advisory_lock($1, hashtext($2::text))', [NODE_LOCK_CLASS, 'n1']);
    const first = (await q.enqueue({ labels: { device: 'roku' }, ...RUN }, 'alice')).queue_id;
    const d = await dispatcher(pool, lab, (e) => next.push(e));
    await refusedWhileHeld(d, first);
    await other.query('SELECT pg_advisory_unlock_all()');
    await next.done;
    expect(lab.started.get(first)?.[0]?.[0]).to.equal('n1');

    const second = (await q.enqueue({ labels: { device: 'roku' }, ...RUN }, 'alice')).queue_id;
    await other.query('SELECT pg_advisory_lock($1, hashtext($2::text))', [JOB_LOCK_CLASS, String(second)]);
    next = eventsUntil(events, (l) => l.some((e) => e.type === 'started' && e.job.queue_id === second));
    lab.set('n1', 'available');
    await refusedWhileHeld(d, second);
    await other.query('SELECT pg_advisory_unlock_all()');
    await next.done;
    expect(await q.get(second)).to.include({ state: 'started', node_id: 'n1' });
    expect(lab.started.get(second)).to.have.length(1);
  });

  it('cancel: the owner or an admin, a waiting job only; a cancelled job never starts', async () => {
    const pool = await farm({ r1: { device: 'roku' } });
    const q = new PgJobQueue(pool);
    const a = await q.enqueue({ labels: { device: 'roku' }, priority: 100, ...RUN }, 'alice');
    const b = await q.enqueue({ labels: { device: 'roku' }, priority: 0, ...RUN }, 'alice');
    expect(await codeOf(q.cancel(a.queue_id, { user: 'bob', admin: false }))).to.equal('forbidden');
    expect(await q.cancel(a.queue_id, { user: 'alice', admin: false })).to.include({ state: 'cancelled', end_reason: 'cancelled', ended_by: 'alice' });
    expect((await q.cancel(a.queue_id, { user: 'alice', admin: false })).state).to.equal('cancelled');
    expect(await codeOf(q.cancel(12345, { user: 'alice', admin: true }))).to.equal('not_found');
    const lab = new Lab(['r1']);
    const events: DispatchEvent[] = [];
    const started = eventsUntil(events, (l) => l.some((e) => e.type === 'started'));
    await dispatcher(pool, lab, (e) => started.push(e));
    await started.done;
    expect(lab.order).to.deep.equal([b.queue_id]);
    expect(await codeOf(q.cancel(b.queue_id, { user: 'root', admin: true }))).to.equal('conflict');
  });

  it('says why each waiting job waits', async () => {
    const pool = await farm({ r1: { device: 'roku' }, r2: { device: 'roku' }, a1: { device: 'appletv' }, f1: { device: 'firetv' } });
    const q = new PgJobQueue(pool);
    const roku1 = await q.enqueue({ labels: { device: 'roku' }, priority: 80, ...RUN }, 'alice');
    const roku2 = await q.enqueue({ labels: { device: 'roku' }, priority: 20, ...RUN }, 'alice');
    const tv = await q.enqueue({ labels: { device: 'appletv' }, ...RUN }, 'alice');
    const fire = await q.enqueue({ labels: { device: 'firetv' }, ...RUN }, 'alice');
    const av = (kind: AvailabilityKind): Availability => ({ kind, detail: kind === 'available' ? null : 'x' });
    // f1 is not in the map: a node the portal has no word of is offline.
    const states = new Map([
      ['r1', av('running')],
      ['r2', av('reserved')],
      ['a1', av('maintenance')],
    ]);
    const why = new Map((await q.explain(await q.list(), states)).map((j) => [j.queue_id, j.waiting]));
    expect(why.get(roku1.queue_id)).to.include({ kind: 'busy', position: 1, matching: 2, message: 'all 2 nodes with device=roku are busy (1 running a job, 1 reserved)' });
    expect(why.get(roku2.queue_id)).to.include({ kind: 'busy', position: 2 });
    expect(why.get(tv.queue_id)).to.include({ kind: 'maintenance', message: 'the one node with device=appletv is in maintenance' });
    expect(why.get(fire.queue_id)).to.include({ kind: 'offline' });
    await pool.query('DELETE FROM node_labels WHERE node_id = $1', ['f1']);
    const [gone] = await q.explain([await q.get(fire.queue_id)], states);
    expect(gone!.waiting).to.include({ kind: 'no_node', message: 'no node has the labels device=firetv' });
    const [c] = await q.explain([await q.cancel(tv.queue_id, { user: 'alice', admin: false })], states);
    expect(c!.waiting).to.equal(null);
  });

  it('a job not started within queue_timeout_secs expires (by the database clock) and never starts', async () => {
    const pool = await farm({ r1: { device: 'roku' } });
    const lab = new Lab(['r1']);
    lab.set('r1', 'running');
    const q = new PgJobQueue(pool);
    const events: DispatchEvent[] = [];
    let wait = eventsUntil(events, (l) => l.some((e) => e.type === 'expired'));
    await dispatcher(pool, lab, (e) => wait.push(e));
    const job = await q.enqueue({ labels: { device: 'roku' }, queue_timeout_secs: 1, ...RUN }, 'alice');
    const keep = await q.enqueue({ labels: { device: 'roku' }, priority: 0, ...RUN }, 'alice');
    await wait.done;
    const e = events.find((x): x is Extract<DispatchEvent, { type: 'expired' }> => x.type === 'expired')!;
    expect(e.job).to.include({ queue_id: job.queue_id, state: 'expired', end_reason: 'queue_timeout' });
    expect(Date.parse(e.job.ended_at!)).to.be.at.least(Date.parse(job.expires_at!));
    wait = eventsUntil(events, (l) => l.some((x) => x.type === 'started'));
    lab.set('r1', 'available');
    await wait.done;
    expect(lab.order).to.deep.equal([keep.queue_id]);
    expect((await q.get(job.queue_id)).state).to.equal('expired');
  });

  /** A dispatcher in a child process (queue-child.ts) that claims `job` on r1 and hangs there; resolves with the key it pinned. */
  async function claimInChild(q: PgJobQueue, job: QueuedJob): Promise<{ child: ChildProcess; key: string }> {
    const child: ChildProcess = spawn(process.execPath, ['--import', 'tsx', 'test/farm/queue-child.ts', conninfo, 'r1'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] });
    closers.push(async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGKILL');
        await once(child, 'exit');
      }
    });
    const lines = createInterface({ input: child.stdout! });
    let claimed = '';
    for await (const line of lines) {
      if (line.startsWith('starting ')) {
        claimed = line;
        break;
      }
    }
    const [, queueId, node, key] = claimed.split(' ');
    expect([queueId, node]).to.deep.equal([String(job.queue_id), 'r1']);
    // The intent is committed before the node is asked: pinned to r1 with the key the start carries.
    expect(await q.get(job.queue_id)).to.include({ state: 'queued', node_id: 'r1' });
    // While the child holds it, the job is neither startable elsewhere nor cancellable: it is being started.
    expect(await codeOf(q.cancel(job.queue_id, { user: 'alice', admin: false }))).to.equal('conflict');
    const [why] = await q.explain([await q.get(job.queue_id)], new Map());
    expect(why!.waiting).to.include({ kind: 'starting', message: 'being started on node r1' });
    return { child, key: key! };
  }

  it('a dispatcher SIGKILLed between its claim and the node\'s answer: the job stays on its node and is sent there again with its key, started once', async () => {
    const pool = await farm({ r1: { device: 'roku' }, r2: { device: 'roku' } });
    const q = new PgJobQueue(pool);
    const job = await q.enqueue({ labels: { device: 'roku' }, ...RUN }, 'alice');
    const { child } = await claimInChild(q, job);
    child.kill('SIGKILL');
    await once(child, 'exit');
    const lab = new Lab(['r1', 'r2']);
    const events: DispatchEvent[] = [];
    const started = eventsUntil(events, (l) => l.some((e) => e.type === 'started'));
    await dispatcher(pool, lab, (e) => started.push(e));
    await started.done;
    expect([...lab.started]).to.deep.equal([[job.queue_id, [['r1', '/r1/abcd/1']]]]);
    expect(await q.get(job.queue_id)).to.include({ state: 'started', node_id: 'r1', job_uid: '/r1/abcd/1', attempts: 1 });
  });

  it('"a restart ... starts none twice": the node got the start but its answer died with the dispatcher; sent again with the key, the node answers that job', async () => {
    const pool = await farm({ r1: { device: 'roku' }, r2: { device: 'roku' } });
    const q = new PgJobQueue(pool);
    const job = await q.enqueue({ labels: { device: 'roku' }, ...RUN }, 'alice');
    const { child, key } = await claimInChild(q, job);
    // The node received the start and runs the job; the dispatcher that sent it dies before reading the answer.
    const lab = new Lab(['r1', 'r2']);
    const first = await lab.starter().start({ nodeId: 'r1', run: job.request, username: 'alice', queueId: job.queue_id, key }, new AbortController().signal);
    expect(first).to.deep.equal({ ok: true, job_uid: '/r1/abcd/1' });
    child.kill('SIGKILL');
    await once(child, 'exit');
    const events: DispatchEvent[] = [];
    const started = eventsUntil(events, (l) => l.some((e) => e.type === 'started'));
    await dispatcher(pool, lab, (e) => started.push(e));
    await started.done;
    // r2 was free all along: without the pin the job would have started there as well.
    expect([...lab.started]).to.deep.equal([[job.queue_id, [['r1', '/r1/abcd/1']]]]);
    expect(await q.get(job.queue_id)).to.include({ state: 'started', node_id: 'r1', job_uid: '/r1/abcd/1' });
  });

  it('an answer that does not say (502, no answer in time) keeps the job on its node and asks again with the same key; an offline node past lostNodeMs gives it back', async () => {
    const pool = await farm({ r1: { device: 'roku' }, r2: { device: 'roku' } });
    const lab = new Lab(['r1', 'r2']);
    lab.set('r2', 'offline');
    const q = new PgJobQueue(pool);
    const keys: (string | undefined)[] = [];
    const answers: StartOutcome[] = [{ ok: false, retry: true, unknown: true, status: 502, message: 'the link lost the answer' }];
    /** r1 answers nothing that says, every time. */
    let stuck = false;
    const real = lab.starter();
    const starter: JobStarter = {
      start: (req, signal) => {
        keys.push(req.key);
        const next = answers.shift() ?? (stuck && req.nodeId === 'r1' ? { ok: false, retry: true, unknown: true, status: null, message: 'no answer in time' } : undefined);
        return next ? Promise.resolve(next) : real.start(req, signal);
      },
    };
    const events: DispatchEvent[] = [];
    let wait = eventsUntil(events, (l) => l.some((e) => e.type === 'started'));
    const wakeups = new FarmWakeups({ pool });
    await wakeups.start();
    /** Nodes not connected to this dispatcher's portal. */
    const away = new Set<string>();
    const nodes: NodeStates = { ...lab.nodes(), isLocal: (id) => !away.has(id) };
    const d = new QueueDispatcher({ pool, queue: q, nodes, starter, wakeups, onEvent: (e) => wait.push(e), pollMs: 60_000, cooldownMs: 20, settleMs: 0, lostNodeMs: 0 });
    d.start();
    closers.push(() => wakeups.close(), () => d.close());
    const job = await q.enqueue({ labels: { device: 'roku' }, ...RUN }, 'alice');
    await wait.done;
    expect(events.map((e) => e.type)).to.deep.equal(['unanswered', 'started']);
    expect(keys).to.have.length(2);
    expect(keys[0], 'the same key both times').to.be.a('string').and.equal(keys[1]);
    expect(await q.get(job.queue_id)).to.include({ state: 'started', node_id: 'r1', attempts: 1 });

    // Lost with its node: r1 unanswered, then offline and not connected here; r2 free. Back in the queue, started on r2.
    lab.set('r1', 'available');
    stuck = true;
    events.length = 0;
    wait = eventsUntil(events, (l) => l.some((e) => e.type === 'unanswered'));
    const second = await q.enqueue({ labels: { device: 'roku' }, ...RUN }, 'alice');
    await wait.done;
    expect(await q.get(second.queue_id)).to.include({ state: 'queued', node_id: 'r1' });
    wait = eventsUntil(events, (l) => l.some((e) => e.type === 'started'));
    away.add('r1');
    lab.set('r2', 'available');
    lab.set('r1', 'offline');
    await wait.done;
    const kinds = events.map((e) => e.type);
    expect(kinds.slice(-2)).to.deep.equal(['returned', 'started']);
    expect(new Set(kinds.slice(0, -2))).to.deep.equal(new Set(['unanswered']));
    expect(await q.get(second.queue_id)).to.include({ state: 'started', node_id: 'r2', attempts: 2 });
    expect(lab.started.get(second.queue_id), 'started on r2 only').to.deep.equal([['r2', '/r2/abcd/2']]);
  });

  it('a node that cannot take a job (busy, gone) gives it back to the queue, in its place; a refused request fails the job', async () => {
    const pool = await farm({ r1: { device: 'roku' } });
    const lab = new Lab(['r1']);
    const q = new PgJobQueue(pool);
    let refuse: StartOutcome | undefined = { ok: false, retry: true, status: 503, message: 'node r1 is not connected' };
    const real = lab.starter();
    const starter: JobStarter = { start: (req, signal) => (refuse ? Promise.resolve(refuse) : real.start(req, signal)) };
    const events: DispatchEvent[] = [];
    let wait = eventsUntil(events, (l) => l.some((e) => e.type === 'returned'));
    const wakeups = new FarmWakeups({ pool });
    await wakeups.start();
    const d = new QueueDispatcher({ pool, queue: q, nodes: lab.nodes(), starter, wakeups, onEvent: (e) => wait.push(e), pollMs: 60_000, cooldownMs: 0, settleMs: 0 });
    d.start();
    closers.push(() => wakeups.close(), () => d.close());
    const job = await q.enqueue({ labels: { device: 'roku' }, ...RUN }, 'alice');
    await wait.done;
    expect(await q.get(job.queue_id)).to.include({ state: 'queued', last_error: 'node r1 could not take it (503): node r1 is not connected' });
    wait = eventsUntil(events, (l) => l.some((e) => e.type === 'failed'));
    refuse = { ok: false, retry: false, status: 400, message: 'no test case tests/a.py::test_a in the test pack' };
    d.wake();
    await wait.done;
    expect(await q.get(job.queue_id)).to.include({ state: 'failed', node_id: 'r1' });
    expect((await q.get(job.queue_id)).end_reason).to.match(/refused the request \(400\): no test case/);
  });
});
