/**
 * The figures of issue 19 for portal replicas (docs/farm.md, "Many portals: faults and figures"), with real parts:
 * three `farmhand portal` processes (replicas "many") on a throwaway PostgreSQL and one storage folder, a real Debian
 * haproxy in front (`balance roundrobin`, checking /readyz), real nodes connected through it.
 *
 * 1. Failover: a replica holding nodes SIGKILLed; the time until every one of its nodes answers
 *    `GET /api/v2/nodes/<id>/job/await_completion` (no job: 200 at once, from the node) through HAProxy again (target <= 10 s). `--rounds` times, the replica started again
 *    between rounds.
 * 2. Rolling restart: `--clients` CI-like clients (run_tests, await_completion, the Job, the results) on the real
 *    nodes while each replica in turn is stopped (SIGTERM) and started again; every request counted, the 503s with
 *    Retry-After among them (target <= 1 %; printed as 503s / requests and by cause), other errors and reset
 *    connections (target 0). `--rounds 0 --sim 0` runs this part alone.
 * 3. At rest (`--sim N`, default 100; 0 skips): N simulated nodes (the real protocol, test/helpers/farmNodes.ts)
 *    across the three replicas heartbeating every `--interval` s; for `--secs` s each replica's CPU (utime + stime
 *    of /proc/<pid>/stat, in cores; target <= 0.1) and the database's writes: rows of `nodes` updated (counted by
 *    triggers) per heartbeat (target 0), and pg_stat_database's xact_commit delta (every transaction, reads and the
 *    leases' renewals included).
 *
 *   node --import tsx bench/replicas-failover-bench.ts [--rounds 3] [--clients 4] [--sim 100] [--interval 5] [--secs 30] [--flush 30] [--lease 10]
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { migrate } from '../src/farm/db/migrate.js';
import { registerNode } from '../src/farm/nodeCredentials.js';
import { PgTokens, PgUsers } from '../src/farm/users.js';
import { makeTestPack, STANDARD_FILES } from '../test/fixtures/testPack.js';
import { startTestDaemon, type TestDaemon } from '../test/helpers/daemon.js';
import { connectionString } from '../test/helpers/farmPortal.js';
import { SimNode } from '../test/helpers/farmNodes.js';
import { startPostgres } from '../test/helpers/postgres.js';
import { freePort } from '../test/helpers/processFarm.js';
import { startPortalProcess, type PortalProcess } from '../test/helpers/replicaFarm.js';
import { CountingClient, newTally, replicaConfig, startFront } from '../test/helpers/rollingFarm.js';
import { waitFor } from '../test/helpers/wait.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const ROUNDS = arg('rounds', 3);
const CLIENTS = arg('clients', 4);
const SIM = arg('sim', 100);
const INTERVAL = arg('interval', 5);
const SECS = arg('secs', 30);
const LEASE = arg('lease', 10);
const FLUSH = arg('flush', 30);
const REPLICAS = ['r1', 'r2', 'r3'];
const NODES = ['bench-node-1', 'bench-node-2', 'bench-node-3'];
const WAIT = { timeoutMs: 300_000, maxIntervalMs: 100 };
const JOB = ['tests/basic.py::test_pass', 'tests/basic.py::test_fail'];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const cluster = await startPostgres();
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
  await migrate(db);
  const work = await mkdtemp(path.join(os.tmpdir(), 'replicas-bench-'));
  await writeFile(path.join(work, 'replica.secret'), 'a secret every replica shares, long enough\n', { mode: 0o600 });
  const pack = await makeTestPack(STANDARD_FILES);
  await new PgUsers(db).add('ci');
  const token = (await new PgTokens(db).createToken('ci')).token;
  const ports: Record<string, number> = {};
  for (const r of REPLICAS) ports[r] = await freePort();
  const front = await startFront(work, ports);
  const replicas: Record<string, PortalProcess> = {};
  const all: PortalProcess[] = [];
  const nodes: TestDaemon[] = [];
  const sims: SimNode[] = [];
  const start = async (name: string) => {
    const file = await replicaConfig(work, {
      name,
      port: ports[name]!,
      database: connectionString(cluster),
      leaseSecs: LEASE,
      extra: { heartbeat_secs: INTERVAL, flush_secs: FLUSH, log_level: 'warn' },
    });
    const p = startPortalProcess(name, ports[name]!, file);
    all.push(p);
    replicas[name] = p;
    await waitFor(() => p.out().includes('portal listening on'), { what: `replica ${name} to listen (${p.err()})`, ...WAIT });
    await waitFor(async () => (await front.state(name)) === 2, { what: `HAProxy to see ${name} up`, ...WAIT });
  };
  const owners = async () =>
    new Map((await db.query<{ node_id: string; owner_replica: string | null; online: boolean }>('SELECT node_id, owner_replica, online FROM nodes')).rows.map((r) => [r.node_id, r]));
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    for (const s of sims) s.kill();
    for (const n of nodes) await n.stop().catch(() => undefined);
    for (const p of all) p.signal('SIGKILL');
    front.stop();
    await pack.cleanup();
    await db.end();
    await cluster.stop();
    await rm(work, { recursive: true, force: true });
  };
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void cleanup().finally(() => process.exit(130)));
  try {
    for (const r of REPLICAS) await start(r);
    for (const id of NODES) {
      const credFile = path.join(work, `${id}.credential`);
      await writeFile(credFile, `${await registerNode(db, id)}\n`, { mode: 0o600 });
      nodes.push(await startTestDaemon({ pack, config: { node_id: id, portal: { url: front.url, node_credential_file: credFile } } }));
    }
    await waitFor(async () => {
      const o = await owners();
      return NODES.every((id) => o.get(id)?.online);
    }, { what: 'every node online', ...WAIT });
    console.log(`replicas bench: 3 replicas (lease ${LEASE} s) behind HAProxy, ${NODES.length} real nodes; load average ${os.loadavg()[0]!.toFixed(1)}`);

    // 1. Failover.
    const times: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const o = await owners();
      const victim = o.get(NODES[round % NODES.length]!)!.owner_replica!;
      const held = NODES.filter((id) => o.get(id)?.owner_replica === victim);
      const t0 = performance.now();
      replicas[victim]!.signal('SIGKILL');
      await replicas[victim]!.exited;
      await Promise.all(
        held.map((id) =>
          waitFor(async () => (await fetch(`${front.url}/api/v2/nodes/${id}/job/await_completion`, { headers: { Authorization: `token ${token}` } }).catch(() => undefined))?.status === 200, {
            what: `${id} usable again`,
            intervalMs: 20,
            ...WAIT,
            maxIntervalMs: 50,
          }),
        ),
      );
      const secs = (performance.now() - t0) / 1000;
      times.push(secs);
      console.log(`  failover ${round + 1}: ${victim} SIGKILLed holding ${held.length} node(s): usable through the others after ${secs.toFixed(2)} s`);
      await start(victim);
      await waitFor(async () => {
      const o = await owners();
      return NODES.every((id) => o.get(id)?.online);
    }, { what: 'every node online', ...WAIT });
    }
    if (times.length) console.log(`  failover: max ${Math.max(...times).toFixed(2)} s over ${times.length} rounds (target <= 10 s)`);

    // 2. Rolling restart under CI-like clients.
    const tally = newTally();
    let jobs = 0;
    const uids: string[] = [];
    let stop = false;
    const clients = Array.from({ length: CLIENTS }, async (_, i) => {
      const c = new CountingClient(front.url, token, tally);
      const id = NODES[i % NODES.length]!;
      while (!stop) {
        try {
          uids.push((await c.runJob(id, JOB)).uid);
          jobs++;
        } catch (e) {
          if (!/: 409 /.test((e as Error).message)) throw e;
          tally.errors.pop(); // the node is busy with another client's job: not an error of the farm
          tally.requests--;
          await sleep(200);
        }
      }
    });
    const running = Promise.all(clients);
    running.catch(() => undefined);
    const progress = async () => {
      const base = jobs;
      await Promise.race([waitFor(() => jobs >= base + CLIENTS, { what: 'jobs done', ...WAIT }), running]);
    };
    await progress();
    const t0 = performance.now();
    for (const r of REPLICAS) {
      replicas[r]!.signal('SIGTERM');
      await replicas[r]!.exited;
      await start(r);
      await progress();
    }
    stop = true;
    await running.catch((e: unknown) => console.log(`  a client failed: ${(e as Error).message}`));
    console.log(
      `  rolling restart (${((performance.now() - t0) / 1000).toFixed(1)} s, ${CLIENTS} clients): ${jobs} jobs, ${tally.requests} requests, ` +
        `${tally.unavailable} answered 503 + Retry-After (${((100 * tally.unavailable) / tally.requests).toFixed(2)} %, target <= 1 %), ` +
        `${tally.errors.length} other errors, ${tally.resets.length} connections reset`,
    );
    const orphans = await db.query('SELECT job_uid FROM jobs WHERE NOT (job_uid = ANY($1)) AND created_at > now() - $2::interval', [uids, `${Math.ceil((performance.now() - t0) / 1000) + 60} seconds`]);
    console.log(`    jobs in PostgreSQL that no client was told of (a run_tests answered 503 after its job started): ${orphans.rowCount}`);
    for (const e of [...tally.errors, ...tally.resets].slice(0, 10)) console.log(`    ${e}`);
    // The 503s by cause (docs/farm.md, "Faults and figures"): which part answered it, read from its message.
    const causes = new Map<string, number>();
    for (const w of tally.unavailableWhat) {
      const cause = /which does not answer/.test(w)
        ? 'passed to an owner replica that does not answer (stopping or gone)'
        : /no longer served by portal replica/.test(w)
          ? 'passed to an owner replica that answered it is stopping or no longer holds the node'
          : /this portal is stopping/.test(w)
            ? "the drain of the replica the request landed on"
            : /offline|not connected/.test(w)
              ? 'the node between owners (not connected to any replica yet)'
              : /answer broke off/.test(w)
                ? "the node's forward to its own HTTP server broke off (node side: a kept-alive socket closed as it was reused)"
                : 'other';
      causes.set(cause, (causes.get(cause) ?? 0) + 1);
    }
    console.log(`    503 rate: ${tally.unavailable} / ${tally.requests} requests = ${((100 * tally.unavailable) / Math.max(1, tally.requests)).toFixed(2)} % (target <= 1 %)`);
    for (const [cause, n] of causes) console.log(`    503 by cause: ${n} ${cause}`);
    for (const e of tally.unavailableWhat.slice(0, 20)) console.log(`    503: ${e}`);

    // 3. At rest: simulated nodes across the replicas.
    if (SIM > 0) {
      for (const n of nodes) await n.stop();
      nodes.length = 0;
      for (let i = 0; i < SIM; i++) {
        const id = `sim-${String(i).padStart(3, '0')}`;
        sims.push(new SimNode({ portalUrl: front.url, nodeId: id, credential: await registerNode(db, id) }));
      }
      for (const s of sims) await s.connect();
      await waitFor(() => sims.every((s) => s.welcome), { what: 'every simulated node welcomed', ...WAIT });
      let heartbeats = 0;
      const timers = sims.map((s, i) =>
        setTimeout(() => {
          timers.push(
            setInterval(() => {
              s.heartbeat();
              heartbeats++;
            }, INTERVAL * 1000),
          );
        }, (i * INTERVAL * 1000) / sims.length),
      );
      const spread = await db.query<{ owner_replica: string; n: number }>(
        `SELECT owner_replica, count(*)::int AS n FROM nodes WHERE node_id LIKE 'sim-%' AND online GROUP BY 1 ORDER BY 1`,
      );
      await db.query(`CREATE TABLE IF NOT EXISTS bench_node_rows (n int); CREATE TABLE IF NOT EXISTS bench_node_stmts (n int);
        CREATE OR REPLACE FUNCTION bench_count_row() RETURNS trigger AS $$ BEGIN INSERT INTO bench_node_rows VALUES (1); RETURN NULL; END $$ LANGUAGE plpgsql;
        CREATE OR REPLACE FUNCTION bench_count_stmt() RETURNS trigger AS $$ BEGIN INSERT INTO bench_node_stmts VALUES (1); RETURN NULL; END $$ LANGUAGE plpgsql;
        CREATE TRIGGER bench_node_rows AFTER UPDATE ON nodes FOR EACH ROW EXECUTE FUNCTION bench_count_row();
        CREATE TRIGGER bench_node_stmts AFTER UPDATE ON nodes FOR EACH STATEMENT EXECUTE FUNCTION bench_count_stmt();`);
      await sleep(INTERVAL * 1000 * 2); // steady state: every node's heartbeats under way
      const tick = Number((await import('node:child_process')).execSync('getconf CLK_TCK').toString().trim()) || 100;
      const cpuOf = async (p: PortalProcess) => {
        const f = (await readFile(`/proc/${p.child.pid}/stat`, 'utf8')).split(') ')[1]!.split(' ');
        return (Number(f[11]) + Number(f[12])) / tick; // utime, stime (fields 14 and 15)
      };
      const counts = async () => {
        const { rows } = await db.query<{ rows: string; stmts: string; commits: string }>(
          `SELECT (SELECT count(*) FROM bench_node_rows) AS rows, (SELECT count(*) FROM bench_node_stmts) AS stmts,
                  (SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()) AS commits`,
        );
        return { rows: Number(rows[0]!.rows), stmts: Number(rows[0]!.stmts), commits: Number(rows[0]!.commits) };
      };
      const cpu0 = await Promise.all(REPLICAS.map((r) => cpuOf(replicas[r]!)));
      const c0 = await counts();
      const h0 = heartbeats;
      const w0 = performance.now();
      await sleep(SECS * 1000);
      const wall = (performance.now() - w0) / 1000;
      const cpu1 = await Promise.all(REPLICAS.map((r) => cpuOf(replicas[r]!)));
      const c1 = await counts();
      const beats = heartbeats - h0;
      for (const t of timers) clearInterval(t);
      console.log(
        `  at rest: ${SIM} simulated nodes (${spread.rows.map((r) => `${r.owner_replica} ${r.n}`).join(', ')}), heartbeat every ${INTERVAL} s, ${wall.toFixed(1)} s measured, ${beats} heartbeats`,
      );
      REPLICAS.forEach((r, i) => console.log(`    ${r} CPU: ${((cpu1[i]! - cpu0[i]!) / wall).toFixed(4)} cores (target <= 0.1)`));
      console.log(
        `    nodes rows updated: ${c1.rows - c0.rows} by ${c1.stmts - c0.stmts} UPDATE statements (the last_seen flush: one statement per replica ` +
          `per ${FLUSH} s, one row per node); ${((c1.stmts - c0.stmts) / Math.max(1, beats)).toFixed(4)} statements per heartbeat (target 0)`,
      );
      console.log(`    transactions committed (all, reads and lease renewals included): ${c1.commits - c0.commits} (${((c1.commits - c0.commits) / wall).toFixed(2)} per s)`);
    }
  } finally {
    await cleanup();
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
