// The queue at scale through a real portal and real nodes (farmhand serve on virtual boxes, joined over their
// connection): 3 pools of 2 nodes, 48 jobs of mixed priorities queued while the pools are held in maintenance, then
// released. Every job runs exactly once; within a pool no job waits while a node takes one behind it in the order
// (judged from the order of the jobs' starts and ends, not their durations); no node sits free while another node of
// its pool runs a whole job and a job of the pool waits. Jobs are queued with POST /api/v2/jobs when the portal
// has it; before that, with PgJobQueue and the dispatcher wired here as queue-portal.test.ts does.
import { expect } from 'chai';
import { farmNodeStates, hubJobStarter } from '../../src/farm/queue/adapters.js';
import { QueueDispatcher } from '../../src/farm/queue/dispatcher.js';
import { setNodeLabels } from '../../src/farm/queue/labels.js';
import { PgJobQueue } from '../../src/farm/queue/store.js';
import { FarmWakeups } from '../../src/farm/wakeups.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import {
  allInMaintenance,
  enqueuer,
  freedGaps,
  idleNodes,
  isDone,
  jobsOnNodes,
  mixedPriority,
  outOfOrder,
  readQueueRuns,
  setMaintenance,
  type QueueRun,
} from '../helpers/queueScale.js';
import { waitFor } from '../helpers/wait.js';

const POOLS = ['a', 'b', 'c'];
const PER_POOL = 2;
const JOBS = 48;
const CASES = ['tests/basic.py::test_pass', 'tests/basic.py::test_fail'];
const NODES = POOLS.flatMap((p) => Array.from({ length: PER_POOL }, (_, i) => `${p}-${i + 1}`));

describe('the job queue at scale: 3 pools, 6 real nodes, 48 jobs of mixed priorities', function () {
  this.timeout(600_000);
  let farm: TestFarm;
  let pack: TestPackRepo;
  let wired: { dispatcher: QueueDispatcher; wakeups: FarmWakeups } | undefined;
  let runs: QueueRun[];

  before(async () => {
    pack = await makeTestPack();
    farm = await startTestFarm();
    for (const id of NODES) await farm.addNode(id, { pack });
    for (const id of NODES) await setNodeLabels(farm.db, id, { pool: id.split('-')[0]!, room: 'lab1' }, []);
  });
  after(async () => {
    await wired?.dispatcher.close();
    await wired?.wakeups.close();
    await farm?.stop();
    await pack?.cleanup();
  });

  /** The portal's own dispatcher once it has POST /api/v2/jobs; before that, one wired here on its hub and pool. */
  async function wireIfNeeded(via: 'http' | 'store'): Promise<void> {
    if (via === 'http') return;
    const { pool, hub } = farm.portal;
    const wakeups = new FarmWakeups({ pool });
    await wakeups.start();
    const dispatcher = new QueueDispatcher({
      pool,
      queue: new PgJobQueue(pool),
      wakeups,
      nodes: farmNodeStates({ pool, hub, reservations: farm.portal.reservations }),
      starter: hubJobStarter({ hub, baseUrl: farm.url }),
    });
    dispatcher.start();
    wired = { dispatcher, wakeups };
  }

  it('runs every job once, in the order of its pool, with no node idle while a job of its pool waits', async () => {
    const admin = await farm.tokenFor('root', 'admin');
    const token = await farm.tokenFor('carol');
    const queue = await enqueuer({ url: farm.url, token, db: farm.db, user: 'carol' });
    await wireIfNeeded(queue.via);

    // Held: the whole queue is there before any node takes a job, so the order is the rule's alone.
    await setMaintenance(farm.url, admin, NODES, true);
    await waitFor(() => allInMaintenance(farm.url, admin, NODES), { what: 'every node in maintenance at the portal', timeoutMs: 60_000 });
    const ids: number[] = [];
    for (let i = 0; i < JOBS; i++) {
      const body = { labels: { pool: POOLS[i % POOLS.length]! }, priority: mixedPriority(i), test_pack_revision: pack.sha, test_cases: [CASES[i % 5 === 4 ? 1 : 0]!], tags: { n: String(i) } };
      ids.push(await queue.enqueue(body));
    }
    await setMaintenance(farm.url, admin, NODES, false);

    runs = await waitFor(
      async () => {
        const all = await readQueueRuns(farm.db);
        return all.length === JOBS && all.every(isDone) ? all : undefined;
      },
      { what: `all ${JOBS} queued jobs started and ended`, timeoutMs: 480_000, maxIntervalMs: 1000 },
    );

    // Once each: every queued job started as one job of its own, and the nodes ran no other.
    expect(runs.map((r) => r.queue_id)).to.deep.equal(ids);
    expect(new Set(runs.map((r) => r.job_uid)).size).to.equal(JOBS);
    expect(await jobsOnNodes(farm.db, NODES)).to.equal(JOBS);
    for (const r of runs) expect(r.node_id!.split('-')[0], `job ${r.queue_id} of pool ${r.selector}`).to.equal(r.selector.replace('pool=', ''));
    // Every node took part: none was passed over for the whole run.
    expect(new Set(runs.map((r) => r.node_id))).to.deep.equal(new Set(NODES));

    // The order: a job behind in its pool's order may start before one ahead of it only as two starts of one pass
    // (the one ahead started while the other still ran), never after a whole run of it.
    const swaps = outOfOrder(runs);
    expect(swaps.filter((s) => s.waitedWholeRun)).to.deep.equal([]);
    // No node free while another ran a whole job and a job of their pool waited.
    expect(idleNodes(runs)).to.deep.equal([]);

    // Measured, not asserted (bench/queue-bench.ts judges it): node freed -> its next queued job started.
    const gaps = freedGaps(runs).map((g) => Math.round(g.gapMs));
    console.log(`      via ${queue.via}; starts of one pass in either order: ${swaps.length}; node freed -> next job started (ms): ${gaps.sort((a, b) => a - b).join(', ')}`);
  });
});
