/**
 * The queue of issue 32 at scale, through the portal: a `farmhand portal` process on a throwaway PostgreSQL, 9
 * `farmhand serve` processes on virtual boxes (the shipped node configuration: `virtual:` capture and IR, recording
 * on, the default rates) labelled into 3 pools of 3, and 300 jobs of mixed priorities (short test cases of the
 * example test pack) queued with `POST /api/v2/jobs` while the pools are held in maintenance, then released.
 *
 * Prints: the total time (release to the last job's end), each job run once (queue rows started, jobs the nodes
 * ran, distinct job ids, jobs per node), priority inversions (a lower-priority job of a pool started before a
 * higher-priority one queued before it started; split into starts of one dispatch pass that answered in either
 * order, and true inversions, where the job ahead started only after the other had ended), nodes left idle while
 * a job of their pool waited (test/helpers/queueScale.ts idleNodes), and the gap from a node freeing (its job's
 * end_time) to its next queued job starting (that job's start_time) whenever a job of its pool was waiting then:
 * p50 / p95 / max, split into the portal's part (to the dispatcher's claim) and the node's (its answer), against
 * the target, <= 500 ms.
 *
 * A portal without POST /api/v2/jobs yet (the endpoint of issue 32's next step): the portal runs in this process
 * instead, its dispatcher wired as test/farm/queue-portal.test.ts does, and jobs are queued with PgJobQueue. The
 * first line printed says which.
 *
 *   node --import tsx bench/queue-bench.ts [--pools 3] [--per-pool 3] [--jobs 300] [--revision main|sha]
 *
 * `--revision main` (default) queues the jobs on the branch, as CI usually does: a node fetches the test pack
 * before a job when its mirror is older than `test_pack.refresh_secs` (10 s); `--revision sha` names the commit,
 * so no job waits for a fetch.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { migrate } from '../src/farm/db/migrate.js';
import { registerNode } from '../src/farm/nodeCredentials.js';
import { setNodeLabels } from '../src/farm/queue/labels.js';
import { PgTokens, PgUsers } from '../src/farm/users.js';
import { packFromFolder, type TestPackRepo } from '../test/fixtures/testPack.js';
import { connectionString } from '../test/helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../test/helpers/postgres.js';
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
} from '../test/helpers/queueScale.js';
import { waitFor } from '../test/helpers/wait.js';
import { PROJECT_ROOT } from './lib/daemon.js';
import { waitFor200 } from './lib/http.js';
import { freePort, spawnLogged, tail, type Spawned } from './lib/processes.js';
import { percentile, Targets } from './lib/stats.js';

const arg = (name: string, dflt: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : dflt;
};
const POOLS = Number(arg('pools', '3'));
const PER_POOL = Number(arg('per-pool', '3'));
const JOBS = Number(arg('jobs', '300'));
const REVISION = arg('revision', 'main');
const TARGET_MS = 500;
/** Short test cases of the example pack (no device; one reads its tags). */
const CASES = ['tests/example.py::test_passes', 'tests/example.py::test_reads_tags'];
const log = (msg: string) => console.log(`${new Date().toISOString().slice(11, 19)} ${msg}`);

interface Farm {
  work: string;
  cluster: TestPostgres;
  db: pg.Pool;
  pack: TestPackRepo;
  url: string;
  tokens: { admin: string; ci: string };
  nodes: string[];
  /** The `farmhand portal` process (none when the portal runs in this process). */
  portal?: Spawned;
  /** The nodes' processes. */
  procs: Spawned[];
  /** Stops what runs in this process (the in-process portal and its dispatcher). */
  inProcess?: () => Promise<void>;
}

/** PostgreSQL, the schema, two users, the nodes registered and labelled (as `farmhand farm node add` and `... label` do). */
async function prepare(work: string): Promise<Farm> {
  const cluster = await startPostgres();
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 2, application_name: 'queue-bench' });
  await migrate(db);
  const users = new PgUsers(db);
  const tokens = new PgTokens(db);
  await users.add('root', 'admin');
  await users.add('ci');
  const pack = await packFromFolder(path.join(PROJECT_ROOT, 'examples/test-pack'));
  const nodes: string[] = [];
  for (let p = 0; p < POOLS; p++) {
    for (let i = 1; i <= PER_POOL; i++) {
      const id = `stb-${String.fromCharCode(97 + p)}${i}`;
      writeFileSync(path.join(work, `${id}.credential`), `${await registerNode(db, id)}\n`, { mode: 0o600 });
      await setNodeLabels(db, id, { device: poolOf(p), room: 'lab1' }, []);
      nodes.push(id);
    }
  }
  const admin = (await tokens.createToken('root')).token;
  const ci = (await tokens.createToken('ci')).token;
  return { work, cluster, db, pack, url: '', tokens: { admin, ci }, nodes, procs: [] };
}

const poolOf = (p: number) => `box-${String.fromCharCode(97 + p)}`;

/** `farmhand portal` on the shipped configuration (a fixed port, so an in-process portal can take its place). */
async function startPortal(farm: Farm): Promise<{ port: number; settings: Record<string, unknown> }> {
  const port = await freePort();
  farm.url = `http://127.0.0.1:${port}`;
  const settings = { listen: `127.0.0.1:${port}`, public_url: farm.url, database: connectionString(farm.cluster), storage_dir: path.join(farm.work, 'storage'), log_level: 'warn' };
  const config = path.join(farm.work, 'portal.json');
  writeFileSync(config, JSON.stringify(settings));
  const logFile = path.join(farm.work, 'portal.log');
  const p = spawnLogged(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'src/main.ts'), 'portal', '--config', config], logFile, { cwd: PROJECT_ROOT });
  farm.portal = p;
  let alive = true;
  void p.exited.then(() => (alive = false));
  await waitFor200(`${farm.url}/healthz`, performance.now() + 180_000, () => alive, 100).catch((e: Error) => {
    throw new Error(`${e.message}\n${tail(logFile)}`);
  });
  return { port, settings };
}

/** The portal in this process with the dispatcher wired by hand (test/farm/queue-portal.test.ts), on the same port. */
async function portalInProcess(farm: Farm, settings: Record<string, unknown>): Promise<void> {
  await farm.portal?.stop();
  farm.portal = undefined;
  const { parsePortalConfig } = await import('../src/farm/portal/config.js');
  const { startFarmPortal } = await import('../src/farm/portal/farm.js');
  const { createLogger } = await import('../src/logger.js');
  const { FarmWakeups } = await import('../src/farm/wakeups.js');
  const { PgJobQueue } = await import('../src/farm/queue/store.js');
  const { QueueDispatcher } = await import('../src/farm/queue/dispatcher.js');
  const { farmNodeStates, hubJobStarter } = await import('../src/farm/queue/adapters.js');
  const portal = await startFarmPortal(parsePortalConfig(settings), createLogger('warn'));
  const { pool, hub } = portal;
  const wakeups = new FarmWakeups({ pool });
  await wakeups.start();
  const nodes = farmNodeStates({ pool, hub, reservations: portal.reservations });
  const dispatcher = new QueueDispatcher({ pool, queue: new PgJobQueue(pool), wakeups, nodes, starter: hubJobStarter({ hub, baseUrl: farm.url }) });
  dispatcher.start();
  farm.inProcess = async () => {
    await dispatcher.close();
    await wakeups.close();
    await portal.stop();
  };
}

/** The nodes: `farmhand serve` each, the shipped configuration on a virtual box, joined to the portal. */
async function startNodes(farm: Farm): Promise<void> {
  for (const id of farm.nodes) {
    const dir = path.join(farm.work, id);
    mkdirSync(dir);
    const config = path.join(dir, 'node.json');
    writeFileSync(
      config,
      JSON.stringify({
        node_id: id,
        listen: `127.0.0.1:${await freePort()}`,
        data_dir: path.join(dir, 'data'),
        log_level: 'warn',
        test_pack: { url: farm.pack.dir },
        capture: { uri: 'virtual:' },
        ir: { uri: 'virtual:' },
        // Nine nodes on one machine: the tests run as the daemon's user (one shared test user would be ended by each).
        runner: { run_tests_as: false },
        portal: { url: farm.url, node_credential_file: path.join(farm.work, `${id}.credential`) },
      }),
    );
    farm.procs.push(spawnLogged(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'src/main.ts'), 'serve', '--config', config], path.join(dir, 'log'), { cwd: PROJECT_ROOT }));
  }
  await waitFor(
    async () => {
      const res = await fetch(`${farm.url}/api/v2/nodes`, { headers: { authorization: `token ${farm.tokens.admin}` } });
      const list = res.status === 200 ? ((await res.json()) as { node_id: string; online: boolean }[]) : [];
      return farm.nodes.every((id) => list.find((n) => n.node_id === id)?.online);
    },
    { what: `all ${farm.nodes.length} nodes online at the portal`, timeoutMs: 600_000, maxIntervalMs: 1000 },
  ).catch((e: Error) => {
    throw new Error(`${e.message}\n${farm.nodes.map((id) => `${id}: ${tail(path.join(farm.work, id, 'log'), 3)}`).join('\n')}`);
  });
}

/** Hold the pools, queue every job, release them; resolves once every job has started and ended. */
async function run(farm: Farm, revision: string): Promise<{ runs: QueueRun[]; totalMs: number; enqueueMs: number }> {
  await setMaintenance(farm.url, farm.tokens.admin, farm.nodes, true);
  await waitFor(() => allInMaintenance(farm.url, farm.tokens.admin, farm.nodes), { what: 'every node in maintenance', timeoutMs: 120_000 });
  const queue = await enqueuer({ url: farm.url, token: farm.tokens.ci, db: farm.db, user: 'ci' });
  const t0 = performance.now();
  for (let i = 0; i < JOBS; i++) {
    const device = poolOf(i % POOLS);
    await queue.enqueue({ labels: { device }, priority: mixedPriority(i), test_pack_revision: revision, test_cases: [CASES[i % 7 === 6 ? 1 : 0]], tags: { n: String(i) } });
  }
  const enqueueMs = performance.now() - t0;
  log(`${JOBS} jobs queued (${queue.via === 'http' ? 'POST /api/v2/jobs' : 'PgJobQueue.enqueue'}) in ${(enqueueMs / 1000).toFixed(1)} s; releasing the pools`);
  const released = Date.now();
  await setMaintenance(farm.url, farm.tokens.admin, farm.nodes, false);
  const runs = await waitFor(
    async () => {
      const all = await readQueueRuns(farm.db);
      return all.length === JOBS && all.every(isDone) ? all : undefined;
    },
    { what: `all ${JOBS} jobs started and ended`, timeoutMs: 3_600_000, maxIntervalMs: 2000 },
  );
  return { runs, totalMs: Math.max(...runs.map((r) => r.end ?? 0)) - released, enqueueMs };
}

function report(farm: Farm, runs: QueueRun[], totalMs: number, jobsSeen: number): Targets {
  const t = new Targets();
  const started = runs.filter((r) => r.state === 'started').length;
  const uids = new Set(runs.map((r) => r.job_uid)).size;
  const perNode = farm.nodes.map((id) => `${id} ${runs.filter((r) => r.node_id === id).length}`).join(', ');
  log(`total: ${(totalMs / 1000).toFixed(1)} s from the release to the last job's end (${((JOBS / totalMs) * 60_000).toFixed(0)} jobs a minute)`);
  log(`once: ${started} of ${JOBS} queue rows started, ${uids} distinct jobs, ${jobsSeen} jobs on the nodes; returned to the queue and retried: ${runs.reduce((n, r) => n + r.attempts - 1, 0)}`);
  log(`jobs per node: ${perNode}`);
  const swaps = outOfOrder(runs);
  const lower = swaps.filter((s) => priorityOf(runs, s.ahead) > priorityOf(runs, s.behind));
  log(
    `priority inversions (a lower-priority job started before a higher one queued before it): ${lower.length}, ` +
      `of which starts of one pass answered in either order ${lower.filter((s) => !s.waitedWholeRun).length}, true ${lower.filter((s) => s.waitedWholeRun).length}; ` +
      `same priority, older one started later: ${swaps.length - lower.length}`,
  );
  const idle = idleNodes(runs);
  log(`nodes idle through another node's whole job while a job of their pool waited: ${idle.length}${idle.length ? ` (${JSON.stringify(idle.slice(0, 3))})` : ''}`);
  const gaps = freedGaps(runs);
  const dist = (xs: number[]) => (xs.length ? `p50 ${percentile(xs, 50).toFixed(0)}  p95 ${percentile(xs, 95).toFixed(0)}  max ${Math.max(...xs).toFixed(0)} ms` : 'none');
  log(`node freed -> next queued job started (n=${gaps.length}, ${gaps.filter((g) => g.neverAgain).length} never given another): ${dist(gaps.map((g) => g.gapMs))}`);
  log(`  the portal's part (freed -> dispatcher's claim): ${dist(gaps.map((g) => g.claimMs))}`);
  log(`  the node's part (claim -> its job's start_time): ${dist(gaps.filter((g) => !g.neverAgain).map((g) => g.answerMs))}`);
  const off = Math.abs(started - JOBS) + Math.abs(uids - JOBS) + Math.abs(jobsSeen - JOBS);
  t.check('every job run once', off, '<=', 0, 'jobs missing or extra', `${started} started, ${uids} distinct, ${jobsSeen} on the nodes`);
  t.check('true priority inversions', lower.filter((s) => s.waitedWholeRun).length, '<=', 0, 'pairs', 'a job ahead started only after one behind it had ended');
  t.check('nodes idle while their pool waited', idle.length, '<=', 0, '', 'another node ran a whole job meanwhile');
  if (gaps.length) t.check('largest gap, node freed -> next queued job started', Math.max(...gaps.map((g) => g.gapMs)), '<=', TARGET_MS, 'ms', dist(gaps.map((g) => g.gapMs)));
  return t;
}

const priorityOf = (runs: QueueRun[], id: number) => runs.find((r) => r.queue_id === id)!.priority;

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'queue-bench-'));
  let farm: Farm | undefined;
  try {
    farm = await prepare(work);
    const { settings } = await startPortal(farm);
    const probe = await enqueuer({ url: farm.url, token: farm.tokens.ci, db: farm.db, user: 'ci' });
    if (probe.via === 'store') await portalInProcess(farm, settings);
    log(
      `${POOLS} pools x ${PER_POOL} nodes, ${JOBS} jobs, revision ${REVISION}; portal: ${probe.via === 'http' ? '`farmhand portal` process, POST /api/v2/jobs' : 'in this process (no POST /api/v2/jobs yet), dispatcher wired by the bench, PgJobQueue.enqueue'}`,
    );
    await startNodes(farm);
    log(`${farm.nodes.length} nodes online`);
    const { runs, totalMs } = await run(farm, REVISION === 'sha' ? farm.pack.sha : REVISION);
    const t = report(farm, runs, totalMs, await jobsOnNodes(farm.db, farm.nodes));
    t.printSummary();
    process.exitCode = t.missed.length ? 1 : 0;
  } finally {
    for (const p of farm?.procs ?? []) await p.stop();
    await farm?.inProcess?.();
    await farm?.portal?.stop();
    await farm?.db.end();
    await farm?.cluster.stop();
    await farm?.pack.cleanup();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
