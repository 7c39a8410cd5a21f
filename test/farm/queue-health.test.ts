// Pools' health checks and maintenance through a real portal and real nodes (farmhand serve on virtual boxes), with
// the queue's dispatcher wired as docs/queue.md says and the health-check runner (src/farm/queue/health.ts) and pool
// maintenance (src/farm/queue/pool.ts) as the composition root would open them; the administrator's side through the
// real CLI (`farmhand farm pool ...`, `farmhand farm node healthy`) on the same throwaway PostgreSQL.
// The health check is a real test case whose outcome a flag file per node decides (the rig "broken" or not).
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { expect } from 'chai';
import type { FarmEvent } from '../../src/core/events.js';
import { farmCommand } from '../../src/cli/farm.js';
import { presentNodeHealth } from '../../src/farm/portal/nodeViews.js';
import { farmNodeStates, hubJobStarter } from '../../src/farm/queue/adapters.js';
import { QueueDispatcher, type DispatchEvent } from '../../src/farm/queue/dispatcher.js';
import { PoolHealthChecks } from '../../src/farm/queue/health.js';
import { setNodeLabels } from '../../src/farm/queue/labels.js';
import { PoolMaintenance } from '../../src/farm/queue/pool.js';
import { PgJobQueue } from '../../src/farm/queue/store.js';
import type { NodeStates } from '../../src/farm/queue/ports.js';
import { FarmWakeups } from '../../src/farm/wakeups.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { connectionString } from '../helpers/farmPortal.js';
import { waitFor } from '../helpers/wait.js';

const PASS = 'tests/basic.py::test_pass';
const HANG = 'tests/hang.py::test_hang';
const CHECK = 'tests/health.py::test_ok';
const WAIT = { timeoutMs: 120_000 };

describe('pools: health checks and maintenance through a portal and real nodes', function () {
  this.timeout(600_000);
  let farm: TestFarm;
  let pack: TestPackRepo;
  let flags: string;
  let wakeups: FarmWakeups;
  let health: PoolHealthChecks;
  let maintenance: PoolMaintenance;
  let dispatcher: QueueDispatcher;
  let queue: PgJobQueue;
  let states: NodeStates;
  const events: DispatchEvent[] = [];
  const online: string[] = [];

  /** `farmhand farm ...` in this process, on the farm's database; its exit status and output. */
  const cli = async (...argv: string[]) => {
    const out = new PassThrough();
    const err = new PassThrough();
    const chunks: string[] = [];
    out.on('data', (c: Buffer) => chunks.push(c.toString()));
    err.on('data', (c: Buffer) => chunks.push(c.toString()));
    const code = await farmCommand(['--database', connectionString(farm.cluster), ...argv], out, err);
    return { code, text: chunks.join('') };
  };
  const checks = async (node: string) =>
    (await farm.db.query<{ check_id: string; outcome: string | null; result_id: string | null; job_uid: string | null }>('SELECT * FROM node_health_checks WHERE node_id = $1 ORDER BY check_id', [node])).rows;
  const healthOf = async (node: string) => (await farm.db.query<{ state: string; result_id: string | null; reason: string | null; set_by: string }>('SELECT * FROM node_health WHERE node_id = $1', [node])).rows[0];
  const started = (queueId: number) => events.find((e): e is Extract<DispatchEvent, { type: 'started' }> => e.type === 'started' && e.job.queue_id === queueId)?.job;
  const why = async (queueId: number) => (await queue.explain([await queue.get(queueId)], await states.availability()))[0]!.waiting;
  const enqueue = async (labels: Record<string, string>, testCase = PASS) => (await queue.enqueue({ labels, test_pack_revision: 'main', test_cases: [testCase] }, 'alice')).queue_id;
  /** Stop the node and start it again: a new connection to the portal. */
  const reconnect = async (node: string) => {
    await farm.nodes.get(node)!.stop();
    await waitFor(() => farm.portal.hub.link(node)?.online === false, { what: `${node} offline at the portal`, ...WAIT });
    const before = online.length;
    await farm.addNode(node, { pack });
    await waitFor(() => online.slice(before).includes(node), { what: `${node}'s node.online`, ...WAIT });
  };

  before(async () => {
    flags = await mkdtemp(path.join(os.tmpdir(), 'farmhand-health-flags-'));
    const healthPy = [
      'import os',
      'import time',
      '',
      'def test_ok():',
      `    flag = os.path.join(${JSON.stringify(flags)}, os.environ["FARMHAND_NODE_ID"])`,
      '    while os.path.exists(flag + ".hold"):  # held until the test lets the check go on',
      '        time.sleep(0.05)',
      '    assert not os.path.exists(flag), "the rig of this node is broken (its test flag is set)"',
      '',
    ].join('\n');
    pack = await makeTestPack({ ...STANDARD_FILES, 'tests/health.py': healthPy });
    await writeFile(path.join(flags, 'vbox-1'), 'broken\n');
    // The portal's own dispatcher off: this test runs one wired with the health checks, as the composition root will.
    farm = await startTestFarm({ options: { queue: { dispatch: false } } });
    for (const id of ['vbox-1', 'vbox-2']) await farm.addNode(id, { pack });
    await setNodeLabels(farm.db, 'vbox-1', { device: 'vbox', room: 'lab1', slot: 'one' }, []);
    await setNodeLabels(farm.db, 'vbox-2', { device: 'vbox', room: 'lab1', slot: 'two' }, []);
    const set = await cli('pool', 'health-check', 'device=vbox', CHECK, '--every-hours', '6');
    expect(set.code, set.text).to.equal(0);
    expect(set.text).to.match(/device=vbox: health check tests\/health.py::test_ok at HEAD, when a node comes back online and every 6 hours, on 2 nodes/);

    const { pool, hub } = farm.portal;
    hub.onEvent((e: FarmEvent) => (e.type === 'node.online' ? void online.push(e.data.node_id) : undefined));
    wakeups = new FarmWakeups({ pool });
    await wakeups.start();
    queue = new PgJobQueue(pool);
    const starter = hubJobStarter({ hub, baseUrl: farm.url });
    health = new PoolHealthChecks({ pool, hub, starter, wakeups, base: farmNodeStates({ pool, hub, reservations: farm.portal.reservations }) });
    states = farmNodeStates({ pool, hub, reservations: farm.portal.reservations, health });
    dispatcher = new QueueDispatcher({ pool, queue, wakeups, nodes: states, starter, onEvent: (e) => events.push(e) });
    maintenance = new PoolMaintenance({ pool, hub, baseUrl: farm.url, wakeups });
    health.start();
    dispatcher.start();
    maintenance.start();
  });
  after(async () => {
    await dispatcher?.close();
    await health?.close();
    await maintenance?.close();
    await wakeups?.close();
    await farm?.stop();
    await pack?.cleanup();
    if (flags) await rm(flags, { recursive: true, force: true });
  });

  it('checks each node of the pool; a node whose check failed gets no queued job, and the job says why it waits', async () => {
    // Queued before the checks end: a node whose check is due is held for it, so neither job runs on an unchecked node.
    const any = await enqueue({ device: 'vbox' });
    const one = await enqueue({ slot: 'one' });
    const bad = await waitFor(async () => ((await healthOf('vbox-1'))?.state === 'unhealthy' ? healthOf('vbox-1') : undefined), { what: 'vbox-1 unhealthy', ...WAIT });
    expect(bad.result_id).to.be.a('string');
    expect(bad.reason).to.match(/the rig of this node is broken/);
    // The result linked is the check's, a real result of the farm's index.
    const result = await farm.db.query<{ test_case: string; result: string; category: string }>('SELECT test_case, result::text, category FROM results WHERE result_id = $1', [bad.result_id]);
    expect(result.rows[0]).to.deep.equal({ test_case: CHECK, result: 'fail', category: 'health-check' });
    await waitFor(async () => (await healthOf('vbox-2'))?.state === 'healthy', { what: 'vbox-2 healthy', ...WAIT });
    await waitFor(() => started(any), { what: 'the device=vbox job started', ...WAIT });
    expect(started(any)!.node_id).to.equal('vbox-2');
    // Each job started after its node's check had started (the check went first).
    const [check2] = await checks('vbox-2');
    const order = await farm.db.query<{ first: boolean }>('SELECT (SELECT started_at FROM node_health_checks WHERE check_id = $1) < (SELECT ended_at FROM queue_jobs WHERE queue_id = $2) AS first', [check2!.check_id, any]);
    expect(order.rows[0]!.first).to.equal(true);
    const w = await why(one);
    expect(w).to.include({ kind: 'unhealthy' });
    expect(w!.message).to.equal('the one node with slot=one is unhealthy (its health check failed)');
    expect((await states.availability()).get('vbox-1')!.detail).to.include(`result ${bad.result_id}`);
    expect(started(one)).to.equal(undefined);
  });

  it('farmhand farm node healthy puts the node back: the waiting job starts on it', async () => {
    const waiting = (await queue.list({ selector: { slot: 'one' }, states: ['queued'] })).map((j) => j.queue_id);
    expect(waiting).to.have.length(1);
    const r = await cli('node', 'healthy', 'vbox-1');
    expect(r.code, r.text).to.equal(0);
    expect(r.text).to.match(/vbox-1: healthy \(was unhealthy: health check failed: tests\/health.py::test_ok/);
    await waitFor(() => started(waiting[0]!), { what: 'the slot=one job started on vbox-1', ...WAIT });
    expect(started(waiting[0]!)!.node_id).to.equal('vbox-1');
    const audit = await farm.db.query<{ action: string; target: string }>(`SELECT action, target FROM audit WHERE action IN ('node.healthy', 'pool.health_check') ORDER BY id`);
    expect(audit.rows).to.deep.equal([
      { action: 'pool.health_check', target: 'device=vbox' },
      { action: 'node.healthy', target: 'vbox-1' },
    ]);
    const done = await farm.http.get(`/api/v2/jobs${started(waiting[0]!)!.job_uid}/await_completion`).set('Authorization', `token ${await farm.tokenFor('alice')}`);
    expect(done.status, done.text).to.equal(200);
  });

  it('checks the node again when it comes back online: failing, it is unhealthy; passing, it is back in the pool', async () => {
    const checksBefore = (await checks('vbox-1')).length;
    await reconnect('vbox-1');
    await waitFor(async () => (await checks('vbox-1')).length > checksBefore && (await checks('vbox-1')).at(-1)!.outcome !== null, { what: "vbox-1's check after reconnecting", ...WAIT });
    expect((await checks('vbox-1')).at(-1)!.outcome).to.equal('fail');
    expect((await healthOf('vbox-1'))!.state).to.equal('unhealthy');
    const next = await enqueue({ slot: 'one' });
    expect(await why(next)).to.include({ kind: 'unhealthy' });

    await rm(path.join(flags, 'vbox-1'));
    await reconnect('vbox-1');
    await waitFor(async () => (await healthOf('vbox-1'))?.state === 'healthy', { what: 'vbox-1 healthy after its check passed', ...WAIT });
    const last = (await checks('vbox-1')).at(-1)!;
    expect(last.outcome).to.equal('pass');
    expect((await healthOf('vbox-1'))!.result_id).to.equal(last.result_id);
    await waitFor(() => started(next), { what: 'the waiting job started on vbox-1', ...WAIT });
    expect(started(next)!.node_id).to.equal('vbox-1');
  });

  it("pool maintenance: the running job finishes, nothing new starts, the end brings the nodes back; audited", async () => {
    const alice = await farm.tokenFor('alice');
    const hang = await enqueue({ slot: 'two' }, HANG);
    await waitFor(() => started(hang), { what: 'the hanging job started on vbox-2', ...WAIT });
    const uid = started(hang)!.job_uid!;
    await waitFor(async () => (await states.availability()).get('vbox-2')?.kind === 'running', { what: 'vbox-2 running', ...WAIT });

    const on = await cli('pool', 'maintenance', 'room=lab1', '--reason', 'new firmware until 14:00');
    expect(on.code, on.text).to.equal(0);
    await waitFor(async () => (await states.availability()).get('vbox-1')?.kind === 'maintenance', { what: 'vbox-1 in maintenance', ...WAIT });
    expect((await states.availability()).get('vbox-1')!.detail).to.match(/^pool room=lab1: new firmware until 14:00 \(/);
    // The running job goes on.
    const job = await farm.http.get(`/api/v2/jobs${uid}`).set('Authorization', `token ${alice}`);
    expect(job.status, job.text).to.equal(200);
    expect(job.body).to.include({ status: 'running' });
    const waiting = await enqueue({ room: 'lab1' });
    // Stop the hanging job: vbox-2 is then free but in maintenance (the node's own maintenance, asked when the job ended or before).
    expect((await farm.http.post(`/api/v2/jobs${uid}/stop`).set('Authorization', `token ${alice}`)).status).to.equal(200);
    await waitFor(async () => (await states.availability()).get('vbox-2')?.kind === 'maintenance', { what: 'vbox-2 in maintenance', ...WAIT });
    expect(await why(waiting)).to.include({ kind: 'maintenance', message: 'all 2 nodes with room=lab1 are in maintenance' });
    expect(started(waiting)).to.equal(undefined);

    const off = await cli('pool', 'maintenance', 'room=lab1', '--end');
    expect(off.code, off.text).to.equal(0);
    await waitFor(() => started(waiting), { what: 'the waiting job started once the maintenance ended', ...WAIT });
    const audit = await farm.db.query<{ action: string; node_id: string | null; detail: { on?: boolean } }>(
      `SELECT action, node_id, detail FROM audit WHERE action IN ('pool.maintenance', 'node.maintenance') ORDER BY id`,
    );
    expect(audit.rows.filter((r) => r.action === 'pool.maintenance').map((r) => r.detail.on)).to.deep.equal([true, false]);
  });

  it('shows each node\'s pool health in its Node object: unhealthy with the failed check\'s result linked, then healthy', async () => {
    const admin = await farm.tokenFor('root', 'admin');
    const nodeHealth = async (node: string) => {
      const one = await farm.http.get(`/api/v2/nodes/${node}`).set('Authorization', `token ${admin}`);
      const all = await farm.http.get('/api/v2/nodes').set('Authorization', `token ${admin}`);
      expect(one.status, one.text).to.equal(200);
      expect(all.status, all.text).to.equal(200);
      const listed = (all.body as { node_id: string; health: unknown }[]).find((n) => n.node_id === node)!.health;
      expect(listed, 'the list and the node agree').to.deep.equal(one.body.health);
      return one.body.health as { state: string; pool: string | null; test_case: string | null; reason: string | null; result_url: string | null; checked_at: string | null; set_by: string | null };
    };
    await writeFile(path.join(flags, 'vbox-1'), 'broken\n');
    const checksBefore = (await checks('vbox-1')).length;
    await reconnect('vbox-1');
    // The check of this reconnection has failed, and none is running (one the stop cut short ended as an error first).
    await waitFor(
      async () => {
        const all = await checks('vbox-1');
        return all.slice(checksBefore).some((c) => c.outcome === 'fail') && all.every((c) => c.outcome !== null) && (await healthOf('vbox-1'))?.state === 'unhealthy';
      },
      { what: 'vbox-1 unhealthy again from the check of its reconnection', ...WAIT },
    );
    const bad = await nodeHealth('vbox-1');
    const row = (await healthOf('vbox-1'))!;
    expect(bad).to.include({ state: 'unhealthy', pool: 'device=vbox', test_case: CHECK, set_by: 'health-check' });
    expect(bad.reason).to.match(/the rig of this node is broken/);
    expect(bad.checked_at).to.match(/^\d{4}-\d\d-\d\dT/);
    expect(bad.result_url).to.be.a('string').and.match(/\/api\/v2\/results\//);
    // The link is the check's own result, served by the portal.
    const result = await farm.http.get(new URL(bad.result_url!).pathname).set('Authorization', `token ${admin}`);
    expect(result.status, result.text).to.equal(200);
    expect(result.body).to.include({ test_case: CHECK, result: 'fail' });
    expect(new URL(bad.result_url!).pathname).to.equal(`/api/v2/results${row.result_id}`);
    expect((await nodeHealth('vbox-2')).state).to.equal('healthy');

    await rm(path.join(flags, 'vbox-1'));
    const r = await cli('node', 'healthy', 'vbox-1');
    expect(r.code, r.text).to.equal(0);
    const good = await nodeHealth('vbox-1');
    expect(good).to.include({ state: 'healthy', result_url: null, reason: 'put back by an administrator', pool: null });
    expect(presentNodeHealth(undefined, farm.url)).to.include({ state: 'unchecked', result_url: null });
  });

  it('a check that started before an administrator put the node back does not undo it when it fails after', async () => {
    await writeFile(path.join(flags, 'vbox-1'), 'broken\n');
    await writeFile(path.join(flags, 'vbox-1.hold'), 'hold\n');
    const checksBefore = (await checks('vbox-1')).length;
    await reconnect('vbox-1');
    const running = await waitFor(async () => (await checks('vbox-1')).slice(checksBefore).find((c) => c.job_uid !== null && c.outcome === null), { what: "vbox-1's check running", ...WAIT });
    const back = await cli('node', 'healthy', 'vbox-1');
    expect(back.code, back.text).to.equal(0);
    await rm(path.join(flags, 'vbox-1.hold'));
    const ended = await waitFor(async () => (await checks('vbox-1')).find((c) => c.check_id === running.check_id && c.outcome !== null), { what: 'the held check ended', ...WAIT });
    expect(ended.outcome, 'the check itself failed').to.equal('fail');
    expect(await healthOf('vbox-1')).to.include({ state: 'healthy', reason: 'put back by an administrator' });
    await rm(path.join(flags, 'vbox-1'));
  });

  it('refuses a pool no node is in, and bad arguments', async () => {
    const r = await cli('pool', 'maintenance', 'device=firetv', '--reason', 'x');
    expect(r.code).to.equal(1);
    expect(r.text).to.match(/unknown label device=firetv: no node has it/);
    const h = await cli('pool', 'health-check', 'device=vbox', 'not a test case');
    expect(h.code).to.equal(1);
    expect(h.text).to.match(/is not a test case/);
    const e = await cli('pool', 'health-check', 'device=vbox', CHECK, '--every-hours', 'soon');
    expect(e.code).to.equal(64);
  });
});
