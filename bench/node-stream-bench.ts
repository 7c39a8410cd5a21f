/**
 * The node stream's fold (docs/farm.md, "The node stream"): N simulated nodes (default 10; raw WebSocket clients
 * speaking the real protocol, test/helpers/farmNodes.ts) each push E events (default 1,000: jobs of 24 runs,
 * each run's run.finished with its record) as fast as the socket takes them, to a real farm portal
 * (startFarmPortal: jobs, results, outbox) over a throwaway PostgreSQL. The first node's connection is killed
 * at its first ack, mid-stream (a node SIGKILLed); it connects again and sends what follows the welcome's
 * last_event_id, as a restarted node does from its journal (events the portal received before the cut and
 * folds meanwhile are then sent twice: the fold takes them once).
 *
 * Prints the fold's transactions (its own counter, exact) and the database's committed transactions over the
 * run (pg_stat_database.xact_commit delta: every transaction of the portal, the fold's and the rest), the events
 * per fold transaction, the fold rate (events / s, from the first event sent to the last ack), and what the
 * tables hold: outbox rows, results, runs counted, per node, against what was sent (lost, doubled).
 *   node --import tsx bench/node-stream-bench.ts [--nodes N] [--events E]
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import type { FarmEvent } from '../src/core/events.js';
import type { ResultRecord } from '../src/core/model.js';
import { registerNode } from '../src/farm/nodeCredentials.js';
import { parsePortalConfig } from '../src/farm/portal/config.js';
import { startFarmPortal } from '../src/farm/portal/farm.js';
import { silentLogger } from '../src/logger.js';
import { SimNode } from '../test/helpers/farmNodes.js';
import { connectionString } from '../test/helpers/farmPortal.js';
import { startPostgres } from '../test/helpers/postgres.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const NODES = arg('nodes', 10);
const EVENTS = arg('events', 1000);
const RUNS_PER_JOB = 24; // a job is 2 + 2 x 24 = 50 events

interface Item {
  event: FarmEvent;
  record?: ResultRecord;
}

/** A node's stream of `count` events: jobs of RUNS_PER_JOB runs, the last one cut short where the count ends. */
function streamOf(nodeId: string, count: number): Item[] {
  const out: Item[] = [];
  const boot = 'kb2';
  const ev = (type: FarmEvent['type'], data: Record<string, unknown>, time: string): FarmEvent =>
    ({ id: `${boot}-${out.length + 1}`, type, time, data: { node_id: nodeId, ...data } }) as unknown as FarmEvent;
  for (let job = 1; out.length < count; job++) {
    const uid = `/${nodeId}/beef/${job}`;
    const t0 = Date.UTC(2026, 10, 26, 0, 0, 0) + job * 3600_000;
    const at = (s: number) => new Date(t0 + s * 1000).toISOString();
    out.push({ event: ev('job.started', { job_uid: uid, username: 'bench', start_time: at(0), test_cases: [], test_pack_sha: 'a'.repeat(40), test_pack_branch: null, category: 'c', soak: null, remote_control: null, tags: {} }, at(0)) });
    let runs = 0;
    for (let i = 1; i <= RUNS_PER_JOB && out.length < count - 1; i++, runs++) {
      const stamp = new Date(t0 + i * 1000).toISOString().slice(0, 19).replace('T', '_').replace(/:/g, '.');
      const record: ResultRecord = {
        result_id: `${uid}/${stamp}`, job_uid: uid, test_case: `tests/a.py::test_${i}`, test_pack_sha: 'a'.repeat(40), test_pack_branch: null,
        category: 'c', username: 'bench', tags: {}, start_time: at(i), end_time: at(i), duration: 0, result: i % 5 === 0 ? 'fail' : 'pass',
        failure_reason: i % 5 === 0 ? 'AssertionError' : null, traceback: null,
      };
      out.push({ event: ev('run.started', { job_uid: uid, result_id: record.result_id, test_case: record.test_case, start_time: at(i) }, at(i)) });
      if (out.length >= count - 1) break;
      const { job_uid, result_id, test_case, result, failure_reason, start_time, end_time, duration } = record;
      out.push({ event: ev('run.finished', { job_uid, result_id, test_case, result, failure_reason, infrastructure_error: null, start_time, end_time, duration }, at(i)), record });
    }
    if (out.length < count) out.push({ event: ev('job.exited', { job_uid: uid, end_time: at(RUNS_PER_JOB + 1), result_counts: { pass: runs, fail: 0, error: 0, total: runs } }, at(RUNS_PER_JOB + 1)) });
  }
  return out.slice(0, count);
}

const send = (n: SimNode, items: readonly Item[]) => {
  for (const s of items) n.send({ t: 'event', event: s.event, ...(s.record && { record: s.record }) });
};
const ackedUpTo = (n: SimNode, id: string) => n.received.some((m) => m.t === 'ack' && m.last_event_id === id);

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 600_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

async function main(): Promise<void> {
  const cluster = await startPostgres();
  const storage = await mkdtemp(path.join(os.tmpdir(), 'node-stream-bench-'));
  const cfg = parsePortalConfig({
    listen: '127.0.0.1:0',
    database: connectionString(cluster),
    storage_dir: storage,
    log_level: 'silent',
    rate_limit: { requests_per_second: 1000, burst: 10000 },
    heartbeat_secs: 5,
  });
  const portal = await startFarmPortal(cfg, silentLogger);
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 1 });
  const sims: SimNode[] = [];
  try {
    const nodes = await Promise.all(
      Array.from({ length: NODES }, async (_, i) => {
        const id = `stream-${String(i).padStart(2, '0')}`;
        return { id, credential: await registerNode(db, id), items: streamOf(id, EVENTS) };
      }),
    );
    const connect = async (n: (typeof nodes)[number]) => {
      const sim = new SimNode({ portalUrl: portal.url, nodeId: n.id, credential: n.credential, availability: { kind: 'available', detail: '' } });
      sims.push(sim);
      await sim.connect();
      await until(() => sim.welcome !== undefined, `${n.id}'s welcome`);
      return sim;
    };
    const conns = await Promise.all(nodes.map(connect));
    await portal.hub.idle();
    const xacts = async () => Number((await db.query<{ x: string }>('SELECT xact_commit AS x FROM pg_stat_database WHERE datname = current_database()')).rows[0]!.x);
    await sleep(1500); // the statistics of the connections' start reach pg_stat_database
    const x0 = await xacts();
    const f0 = { ...portal.fold.stats };
    const t0 = process.hrtime.bigint();
    // The first node dies mid-stream (its socket cut at its first ack, with events in flight and not yet folded),
    // comes back, and sends again what follows the portal's cursor.
    for (let i = 0; i < NODES; i++) send(conns[i]!, nodes[i]!.items);
    await until(() => conns[0]!.received.some((m) => m.t === 'ack'), "the first node's first ack", 600_000);
    conns[0]!.kill();
    const again = await connect(nodes[0]!);
    const cursor = again.welcome!.last_event_id ?? null;
    const from = cursor === null ? 0 : nodes[0]!.items.findIndex((s) => s.event.id === cursor) + 1;
    // And, as after a portal crash between a fold and its ack, the 100 events before the cursor once more.
    const twice = Math.min(from, 100);
    send(again, nodes[0]!.items.slice(from - twice));
    const survivors = [again, ...conns.slice(1)];
    await until(() => survivors.every((s, i) => ackedUpTo(s, nodes[i]!.items.at(-1)!.event.id)), 'every node acknowledged');
    const secs = Number(process.hrtime.bigint() - t0) / 1e9;
    const f1 = portal.fold.stats;
    const folds = f1.transactions - f0.transactions;
    await sleep(11_000); // table and database statistics reach pg_stat_* up to ~10 s late
    const x1 = await xacts();

    const counts = await db.query<{ node_id: string; outbox: string; distinct_ids: string; results: string; runs: string }>(
      `SELECT n.node_id,
              (SELECT count(*) FROM events_outbox o WHERE o.node_id = n.node_id AND o.type NOT LIKE 'node.%') AS outbox,
              (SELECT count(DISTINCT node_event_id) FROM events_outbox o WHERE o.node_id = n.node_id AND o.type NOT LIKE 'node.%') AS distinct_ids,
              (SELECT count(*) FROM results r WHERE r.node_id = n.node_id) AS results,
              (SELECT coalesce(sum((j.job->>'runs_finished')::int), 0) FROM jobs j WHERE j.node_id = n.node_id) AS runs
         FROM nodes n WHERE n.node_id LIKE 'stream-%' ORDER BY n.node_id`,
    );
    let lost = 0;
    let doubled = 0;
    for (const row of counts.rows) {
      const items = nodes.find((n) => n.id === row.node_id)!.items;
      const finished = items.filter((s) => s.event.type === 'run.finished').length;
      lost += Math.max(0, items.length - Number(row.distinct_ids)) + Math.max(0, finished - Number(row.results));
      doubled += Number(row.outbox) - Number(row.distinct_ids) + Math.max(0, Number(row.runs) - finished);
    }
    const total = NODES * EVENTS;
    console.log(JSON.stringify({
      nodes: NODES,
      events_sent: total,
      unfolded_at_cut: EVENTS - from,
      sent_twice_on_purpose: twice,
      fold_transactions: folds,
      events_per_fold_transaction: Math.round(((f1.events - f0.events) / folds) * 10) / 10,
      xact_commit_delta: x1 - x0,
      events_per_committed_transaction: Math.round((total / (x1 - x0)) * 10) / 10,
      secs: Math.round(secs * 100) / 100,
      events_per_sec: Math.round(total / secs),
      lost,
      doubled,
    }, null, 2));
  } finally {
    for (const s of sims) s.kill();
    await portal.stop();
    await db.end();
    await cluster.stop();
    await rm(storage, { recursive: true, force: true });
  }
}

await main();
