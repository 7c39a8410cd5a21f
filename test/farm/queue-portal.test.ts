// The queue through a real portal and real nodes (farmhand serve on virtual boxes, joined over their connection):
// the dispatcher wired as docs/queue.md "Wiring" says, with the adapters (src/farm/queue/adapters.ts) built from the
// portal's own hub, pool and reservations. Jobs start through the same path as POST /api/v2/run_tests with a node_id,
// run on the nodes, and their ends free the nodes for the next ones; a node in maintenance gets none.
import { expect } from 'chai';
import { farmNodeStates, hubJobStarter } from '../../src/farm/queue/adapters.js';
import { QueueDispatcher, type DispatchEvent } from '../../src/farm/queue/dispatcher.js';
import { setNodeLabels } from '../../src/farm/queue/labels.js';
import { PgJobQueue } from '../../src/farm/queue/store.js';
import { FarmWakeups } from '../../src/farm/wakeups.js';
import type { FarmEvent } from '../../src/core/events.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { waitFor } from '../helpers/wait.js';

const PASS = 'tests/basic.py::test_pass';
const NODES = ['vbox-1', 'vbox-2'];

describe('the job queue through a portal and real nodes', function () {
  this.timeout(180_000);
  let farm: TestFarm;
  let pack: TestPackRepo;
  let wakeups: FarmWakeups;
  let dispatcher: QueueDispatcher;
  let queue: PgJobQueue;
  const events: DispatchEvent[] = [];
  const startedAt = new Map<number, number>();
  const calledAt = new Map<number, number>();
  const exits: { node: string; at: number }[] = [];
  let waiters: (() => void)[] = [];
  /** Resolves once `pred` holds, looked at again after each of the dispatcher's events. */
  const until = (pred: () => boolean) =>
    new Promise<void>((resolve) => {
      const check = () => {
        if (pred()) resolve();
        else waiters.push(check);
      };
      check();
    });

  before(async () => {
    pack = await makeTestPack();
    farm = await startTestFarm({ options: { queue: { dispatch: false } } }); // this test runs its own dispatcher
    for (const id of NODES) await farm.addNode(id, { pack });
    for (const id of NODES) await setNodeLabels(farm.db, id, { device: 'vbox', room: 'lab1' }, []);
    const { pool, hub } = farm.portal;
    hub.onEvent((e: FarmEvent) => {
      if (e.type === 'job.exited') exits.push({ node: e.data.node_id, at: performance.now() });
    });
    wakeups = new FarmWakeups({ pool });
    await wakeups.start();
    queue = new PgJobQueue(pool);
    const real = hubJobStarter({ hub, baseUrl: farm.url });
    dispatcher = new QueueDispatcher({
      pool,
      queue,
      wakeups,
      nodes: farmNodeStates({ pool, hub, reservations: farm.portal.reservations }),
      starter: { start: (req, signal) => (calledAt.set(req.queueId, performance.now()), real.start(req, signal)) },
      onEvent: (e) => {
        if (e.type === 'started') startedAt.set(e.job.queue_id, performance.now());
        events.push(e);
        const w = waiters;
        waiters = [];
        for (const fn of w) fn();
      },
    });
    dispatcher.start();
  });
  after(async () => {
    await dispatcher?.close();
    await wakeups?.close();
    await farm?.stop();
    await pack?.cleanup();
  });

  const started = () => events.filter((e): e is Extract<DispatchEvent, { type: 'started' }> => e.type === 'started');

  it('runs every queued job once on the matching nodes, each start through the node as run_tests does', async () => {
    const alice = await farm.tokenFor('alice');
    const ids: number[] = [];
    for (let i = 0; i < 6; i++) ids.push((await queue.enqueue({ labels: { device: 'vbox' }, priority: i * 10, test_pack_revision: 'main', test_cases: [PASS], tags: { n: String(i) } }, 'alice')).queue_id);
    await until(() => started().length >= 6);
    const byId = new Map(started().map((e) => [e.job.queue_id, e.job]));
    expect([...byId.keys()].sort((a, b) => a - b)).to.deep.equal(ids);
    expect(new Set(started().map((e) => e.job.node_id))).to.deep.equal(new Set(NODES));
    for (const job of byId.values()) {
      expect(job.job_uid).to.match(new RegExp(`^/${job.node_id}/`));
      const done = await farm.http.get(`/api/v2/jobs${job.job_uid}/await_completion`).set('Authorization', `token ${alice}`);
      expect(done.status, done.text).to.equal(200);
      expect(done.body).to.include({ status: 'exited' });
    }
    // The node ran it on behalf of the user who queued it, with the job's tags.
    const uid = byId.get(ids[5]!)!.job_uid;
    const row = await waitFor(
      async () => (await farm.db.query<{ username: string; tags: Record<string, string> }>('SELECT username, tags FROM results WHERE job_uid = $1', [uid])).rows[0],
      { what: 'the result in the farm index', timeoutMs: 30_000 },
    );
    expect(row).to.deep.include({ username: 'alice', tags: { n: '5' } });
    // Measured, not asserted (the bench's business): from a node's job.exited at the portal to the dispatcher asking
    // it to start its next queued job, + the node's answer to that run_tests (its job_uid).
    const gaps = [...byId.values()].flatMap((j) => {
      const at = startedAt.get(j.queue_id)!;
      const freed = exits.filter((x) => x.node === j.node_id && x.at <= at).at(-1);
      return freed ? [`${Math.round(calledAt.get(j.queue_id)! - freed.at)}+${Math.round(at - calledAt.get(j.queue_id)!)}`] : [];
    });
    console.log(`      node freed -> next queued job asked of it + the node's answer (ms): ${gaps.join(', ')}`);
  });

  it('gives no job to a node in maintenance, and says so while the only other node is busy', async () => {
    const root = await farm.tokenFor('root', 'admin');
    const on = await farm.http.post('/api/v2/nodes/vbox-2/maintenance').set('Authorization', `token ${root}`).send({ on: true, message: 'repairs until Monday' });
    expect(on.status, on.text).to.equal(200);
    const states = farmNodeStates({ pool: farm.portal.pool, hub: farm.portal.hub, reservations: farm.portal.reservations });
    await waitFor(async () => (await states.availability()).get('vbox-2')?.kind === 'maintenance', { what: 'vbox-2 in maintenance at the portal', timeoutMs: 30_000 });
    const before = started().length;
    const hang = (await queue.enqueue({ labels: { room: 'lab1' }, priority: 100, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] }, 'alice')).queue_id;
    await until(() => started().length > before);
    expect(started().at(-1)!.job).to.include({ queue_id: hang, node_id: 'vbox-1' });
    const next = await queue.enqueue({ labels: { room: 'lab1' }, test_pack_revision: 'main', test_cases: [PASS] }, 'alice');
    await waitFor(async () => (await states.availability()).get('vbox-1')?.kind === 'running', { what: 'vbox-1 running at the portal', timeoutMs: 30_000 });
    const [why] = await queue.explain([await queue.get(next.queue_id)], await states.availability());
    expect(why!.waiting).to.include({ kind: 'unavailable', message: 'none of the 2 nodes with room=lab1 is free: 1 running a job, 1 in maintenance' });
    const alice = await farm.tokenFor('alice');
    const stop = await farm.http.post(`/api/v2/jobs${started().at(-1)!.job.job_uid}/stop`).set('Authorization', `token ${alice}`);
    expect(stop.status, stop.text).to.equal(200);
    await until(() => started().some((e) => e.job.queue_id === next.queue_id));
    expect(started().find((e) => e.job.queue_id === next.queue_id)!.job.node_id).to.equal('vbox-1');
  });
});
