/**
 * The queue of issue 32 at scale, through the portal: a `farmhand portal` process on a throwaway PostgreSQL, 9
 * `farmhand serve` processes on virtual boxes (the shipped node configuration: `virtual:` capture and IR, recording
 * on, the default rates) labelled into 3 pools of 3, and 300 jobs of mixed priorities (short test cases of the
 * example test pack) queued with `POST /api/v2/jobs` while the pools are held in maintenance, then released.
 *
 * Prints: the load average at the start and at the end (the machine may be shared: a loaded one stalls the virtual
 * boxes' capture, and the nodes go offline); the total time (release to the last job's end); each job run once, lost
 * or doubled (queue rows started, jobs the nodes ran, distinct job ids, jobs per node); priority inversions (a
 * lower-priority job of a pool started before a higher-priority one queued before it started; split into starts of
 * one dispatch pass that answered in either order, and true inversions, where the job ahead started only after the
 * other had ended); nodes left idle while a job of their pool waited (test/helpers/queueScale.ts idleNodes), those online
 * through as long as the other node's job (an offline node could not take the job; bench/lib/queueGaps.ts) and all; and the
 * gap from a node freeing (its job's end_time) to its next queued job starting (that job's start_time) whenever a job
 * of its pool was waiting then, **less the time the node was offline in between** (the events outbox's
 * `node.offline`/`node.online`: bench/lib/queueGaps.ts): median / p99 / max, against the target, <= 500 ms; the
 * whole gap (offline time included) and the portal's part (to the dispatcher's claim) are printed beside it.
 *
 * The portal is always a `farmhand portal` process on its shipped configuration (its dispatcher and health checks as
 * they start by default; the nodes recording, at the default rates), jobs queued with `POST /api/v2/jobs`. A portal
 * without that endpoint is an error: the bench does not fall back to a portal in its own process.
 *
 *   node --import tsx bench/queue-bench.ts [--pools 3] [--per-pool 3] [--jobs 300] [--revision main|sha] [--trace DIR [--log-level debug] [--node-log-level info]] [--portal-nice N]
 *
 * `--revision main` (default) queues the jobs on the branch, as CI usually does: a node fetches the test pack
 * before a job when its mirror is older than `test_pack.refresh_secs` (10 s); `--revision sha` names the commit,
 * so no job waits for a fetch.
 *
 * `--portal-nice -10` is a kinder set-up, to be printed beside the shipped one, never instead: the portal's share of
 * the cores raised (its session's autogroup nice, `/proc/<pid>/autogroup`; root), as on a server of its own, which is
 * where a farm runs it, while the 9 nodes still share what is left. It shows how much of a gap is
 * the portal waiting for a core on this machine. The summary says when it was used.
 */
import { appendFileSync, cpSync, mkdirSync, writeFileSync } from 'node:fs';
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
import { idleWhileOnline, nodeEventsBetween, offlineFreeGaps, offlineSpans } from './lib/queueGaps.js';
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
/** Keep the portal's and the nodes' logs (at `--log-level` and `--node-log-level`) and a sample of the portal's database sessions here. */
const TRACE = arg('trace', '');
const LOG_LEVEL = arg('log-level', 'warn');
const NODE_LOG_LEVEL = arg('node-log-level', 'warn');
/** The portal's autogroup nice (-20..19); undefined: as shipped, untouched. */
const PORTAL_NICE = ((v) => {
  if (v === '') return undefined;
  const n = Number(v);
  if (!Number.isInteger(n) || n < -20 || n > 19) throw new Error(`--portal-nice: an integer from -20 to 19, not ${v}`);
  return n;
})(arg('portal-nice', ''));
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
  /** The `farmhand portal` process. */
  portal?: Spawned;
  /** The nodes' processes. */
  procs: Spawned[];
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

/** `farmhand portal` on the shipped configuration. */
async function startPortal(farm: Farm): Promise<void> {
  const port = await freePort();
  farm.url = `http://127.0.0.1:${port}`;
  const settings = { listen: `127.0.0.1:${port}`, public_url: farm.url, database: connectionString(farm.cluster), storage_dir: path.join(farm.work, 'storage'), log_level: LOG_LEVEL };
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
}

/**
 * `--portal-nice`: the autogroup nice of the portal's session, as on a server of its own. PostgreSQL needs nothing:
 * each of its backends starts a session of its own (setsid), so each has a group's share already.
 */
function raisePortal(farm: Farm, nice: number): string {
  writeFileSync(`/proc/${farm.portal!.pid}/autogroup`, String(nice));
  return `the portal (pid ${farm.portal!.pid}) at autogroup nice ${nice}; PostgreSQL, the nodes and their children as shipped`;
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
        log_level: NODE_LOG_LEVEL,
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

/** Run once, lost, doubled: each queue row started once, as one job the nodes ran. */
function once(farm: Farm, runs: QueueRun[], jobsSeen: number, t: Targets): void {
  const started = runs.filter((r) => r.state === 'started').length;
  const uids = new Set(runs.filter((r) => r.job_uid).map((r) => r.job_uid)).size;
  const lost = JOBS - uids;
  const doubled = Math.max(0, started - uids) + Math.max(0, jobsSeen - uids);
  log(`jobs: ${uids} run once, ${lost} lost, ${doubled} doubled (${started} of ${JOBS} queue rows started, ${uids} distinct jobs, ${jobsSeen} jobs on the nodes); returned to the queue and retried: ${runs.reduce((n, r) => n + r.attempts - 1, 0)}`);
  log(`jobs per node: ${farm.nodes.map((id) => `${id} ${runs.filter((r) => r.node_id === id).length}`).join(', ')}`);
  t.check('every job run once', lost + doubled, '<=', 0, 'jobs lost or doubled', `${uids} once, ${lost} lost, ${doubled} doubled`);
}

function inversions(runs: QueueRun[], t: Targets): void {
  const swaps = outOfOrder(runs);
  const lower = swaps.filter((s) => priorityOf(runs, s.ahead) > priorityOf(runs, s.behind));
  const truly = lower.filter((s) => s.waitedWholeRun).length;
  log(
    `priority inversions (a lower-priority job started before a higher one queued before it): ${lower.length}, ` +
      `of which starts of one pass answered in either order ${lower.length - truly}, true ${truly}; same priority, older one started later: ${swaps.length - lower.length}`,
  );
  t.check('true priority inversions', truly, '<=', 0, 'pairs', 'a job ahead started only after one behind it had ended');
}

const dist = (xs: number[]) => (xs.length ? `median ${percentile(xs, 50).toFixed(0)}  p99 ${percentile(xs, 99).toFixed(0)}  max ${Math.max(...xs).toFixed(0)} ms (n=${xs.length})` : 'none');

/** The gap, less offline time (the target), beside the whole gap and the portal's part. */
async function gaps(farm: Farm, runs: QueueRun[], t: Targets): Promise<void> {
  const { spans, events } = await offlineSpans(farm.db, farm.nodes);
  const offline = [...spans.values()].flat();
  log(`offline: ${offline.length} spans on ${[...spans.values()].filter((l) => l.length).length} nodes (${events} node.online/offline events), ${(offline.reduce((n, s) => n + Math.min(s.to, Date.now()) - s.from, 0) / 1000).toFixed(1)} s in all`);
  const g = offlineFreeGaps(runs, spans);
  const touched = g.filter((x) => x.offlineMs > 0);
  log(`node freed -> next queued job started, less offline time: ${dist(g.map((x) => x.gapMs))}; ${g.filter((x) => x.neverAgain).length} never given another`);
  log(`  the whole gap (offline time included): ${dist(g.map((x) => x.rawMs))}; ${touched.length} gaps had offline time (${(touched.reduce((n, x) => n + x.offlineMs, 0) / 1000).toFixed(1)} s)`);
  const legacy = freedGaps(runs);
  log(`  the portal's part (freed -> dispatcher's claim, offline included): ${dist(legacy.map((x) => x.claimMs))}`);
  const worst = [...g].sort((a, b) => b.gapMs - a.gapMs).slice(0, 3);
  log(`  largest: ${worst.map((x) => `${x.node_id} ${x.gapMs.toFixed(0)} ms at +${((x.from - Math.min(...runs.map((r) => r.start ?? Infinity))) / 1000).toFixed(1)} s`).join('; ')}`);
  // Where each of the largest went: to the dispatcher's claim and to the node's start, and what the node said meanwhile.
  const parts = new Map(legacy.map((x) => [`${x.node_id} ${x.from}`, x]));
  for (const x of worst) {
    const p = parts.get(`${x.node_id} ${x.from}`);
    log(`    ${x.node_id}: to the claim ${p ? p.claimMs.toFixed(0) : '?'} ms, the node's answer ${p ? p.answerMs.toFixed(0) : '?'} ms; its events: ${await nodeEventsBetween(farm.db, x.node_id, x.from, x.to)}`);
  }
  if (g.length) t.check('largest gap, node freed -> next queued job started (offline left out)', Math.max(...g.map((x) => x.gapMs)), '<=', TARGET_MS, 'ms', dist(g.map((x) => x.gapMs)));
}

async function report(farm: Farm, runs: QueueRun[], totalMs: number, jobsSeen: number): Promise<Targets> {
  const t = new Targets();
  log(`total: ${(totalMs / 1000).toFixed(1)} s from the release to the last job's end (${((JOBS / totalMs) * 60_000).toFixed(0)} jobs a minute)`);
  once(farm, runs, jobsSeen, t);
  inversions(runs, t);
  const idle = idleNodes(runs);
  const { spans } = await offlineSpans(farm.db, farm.nodes);
  const online = idleWhileOnline(idle, runs, spans);
  log(`nodes idle through another node's whole job while a job of their pool waited: ${online.length} online through it${online.length ? ` (${JSON.stringify(online.slice(0, 3))})` : ''}; ${idle.length} counting the ones offline (no picture) meanwhile`);
  t.check('nodes idle (online) while their pool waited', online.length, '<=', 0, '', `another node ran a whole job meanwhile; ${idle.length} with offline ones`);
  await gaps(farm, runs, t);
  return t;
}

const load = () => os.loadavg().map((x) => x.toFixed(1)).join(' ');

const priorityOf = (runs: QueueRun[], id: number) => runs.find((r) => r.queue_id === id)!.priority;

/**
 * `--trace`: every 250 ms, the portal's database sessions (state, wait, last query, how long), one JSON
 * line each sample, to find where a stall waits. Returns a stop function.
 */
function traceSessions(farm: Farm, file: string): () => void {
  let on = true;
  void (async () => {
    while (on) {
      const { rows } = await farm.db
        .query(
          `SELECT pid, state, wait_event_type, wait_event, left(query, 160) AS query, round(extract(epoch FROM now() - state_change) * 1000) AS ms,
                  round(extract(epoch FROM now() - xact_start) * 1000) AS xact_ms
           FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND application_name <> 'queue-bench'`,
        )
        .catch(() => ({ rows: [] }));
      appendFileSync(file, `${JSON.stringify({ t: new Date().toISOString(), total: rows.length, sessions: rows })}\n`);
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  return () => (on = false);
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'queue-bench-'));
  let farm: Farm | undefined;
  let stopTrace = () => {};
  try {
    farm = await prepare(work);
    log(`load average at the start (1, 5, 15 min): ${load()} on ${os.cpus().length} CPUs`);
    await startPortal(farm);
    const probe = await enqueuer({ url: farm.url, token: farm.tokens.ci, db: farm.db, user: 'ci' });
    if (probe.via !== 'http') throw new Error('the portal answers no POST /api/v2/jobs: the bench measures the queue through a `farmhand portal` process only');
    log(`${POOLS} pools x ${PER_POOL} nodes, ${JOBS} jobs, revision ${REVISION}; portal: \`farmhand portal\` process (pid ${farm.portal?.pid}), POST /api/v2/jobs`);
    if (PORTAL_NICE !== undefined) log(`KINDER SET-UP, not the shipped one: ${raisePortal(farm, PORTAL_NICE)}`);
    await startNodes(farm);
    log(`${farm.nodes.length} nodes online`);
    if (TRACE) {
      mkdirSync(TRACE, { recursive: true });
      stopTrace = traceSessions(farm, path.join(TRACE, 'sessions.jsonl'));
    }
    const { runs, totalMs } = await run(farm, REVISION === 'sha' ? farm.pack.sha : REVISION);
    const t = await report(farm, runs, totalMs, await jobsOnNodes(farm.db, farm.nodes));
    log(`load average at the end (1, 5, 15 min): ${load()}`);
    t.printSummary();
    if (PORTAL_NICE !== undefined) log(`KINDER SET-UP (--portal-nice ${PORTAL_NICE}): the portal had more than the shipped share of the cores`);
    process.exitCode = t.missed.length ? 1 : 0;
  } finally {
    stopTrace();
    for (const p of farm?.procs ?? []) await p.stop();
    await farm?.portal?.stop();
    if (TRACE && farm) {
      cpSync(path.join(farm.work, 'portal.log'), path.join(TRACE, 'portal.log'));
      for (const id of farm.nodes) cpSync(path.join(farm.work, id, 'log'), path.join(TRACE, `${id}.log`));
      const { rows } = await farm.db.query('SELECT * FROM queue_jobs ORDER BY queue_id');
      writeFileSync(path.join(TRACE, 'queue_jobs.json'), JSON.stringify(rows));
    }
    await farm?.db.end();
    await farm?.cluster.stop();
    await farm?.pack.cleanup();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
