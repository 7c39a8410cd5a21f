/**
 * Liveness cost on the portal: N simulated nodes (default 100; in a child
 * process, raw WebSocket clients speaking the real protocol) heartbeating
 * every `--interval` seconds (default 5) for `--secs` (default 60) of steady
 * state, against a real portal (startPortal) over a throwaway PostgreSQL.
 * Prints the portal process's CPU (process.cpuUsage delta / wall time, in
 * cores) and the database writes per heartbeat: the nodes table's n_tup_upd
 * delta (pg_stat_user_tables) and, exactly, rows and statements counted by
 * triggers on nodes.
 *   node --import tsx bench/farm-heartbeat-bench.ts [--nodes N] [--interval S] [--secs S] [--flush S]
 */
import { fork } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import pg from 'pg';
import { startPostgres } from '../test/helpers/postgres.js';
import { connectionString, startTestPortal } from '../test/helpers/farmPortal.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const NODES = arg('nodes', 100);
const INTERVAL = arg('interval', 5);
const SECS = arg('secs', 60);
const FLUSH = arg('flush', 30);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const cluster = await startPostgres();
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 1 });
  const t = await startTestPortal(cluster, { heartbeat_secs: INTERVAL, flush_secs: FLUSH });
  const child = fork(path.join(path.dirname(fileURLToPath(import.meta.url)), 'lib', 'farm-sim-nodes.ts'), [], { execArgv: ['--import', 'tsx'] });
  try {
    const nodes: { id: string; credential: string }[] = [];
    for (let i = 0; i < NODES; i++) {
      const id = `bench-${String(i).padStart(3, '0')}`;
      nodes.push({ id, credential: await t.registerNode(id) });
    }
    await db.query(`CREATE TABLE node_rows (n int); CREATE TABLE node_stmts (n int);
      CREATE FUNCTION count_row() RETURNS trigger AS $$ BEGIN INSERT INTO node_rows VALUES (1); RETURN NULL; END $$ LANGUAGE plpgsql;
      CREATE FUNCTION count_stmt() RETURNS trigger AS $$ BEGIN INSERT INTO node_stmts VALUES (1); RETURN NULL; END $$ LANGUAGE plpgsql;
      CREATE TRIGGER node_rows AFTER UPDATE ON nodes FOR EACH ROW EXECUTE FUNCTION count_row();
      CREATE TRIGGER node_stmts AFTER UPDATE ON nodes FOR EACH STATEMENT EXECUTE FUNCTION count_stmt();`);
    const ready = new Promise<void>((resolve) => child.once('message', () => resolve()));
    child.send({ t: 'start', start: { url: t.portal.url, nodes, intervalSecs: INTERVAL } });
    await ready;
    const online = t.portal.hub.links().filter((l) => l.online).length;
    // Steady state: every node connected and its first heartbeat under way.
    await sleep(INTERVAL * 1000);
    await t.portal.hub.idle();
    const counts = async () => {
      const { rows } = await db.query<{ upd: string; r: string; s: string }>(
        `SELECT (SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'nodes') AS upd,
                (SELECT count(*) FROM node_rows) AS r, (SELECT count(*) FROM node_stmts) AS s`,
      );
      return { upd: Number(rows[0]!.upd), rows: Number(rows[0]!.r), stmts: Number(rows[0]!.s) };
    };
    // Table statistics reach pg_stat_user_tables up to about 10 s after the statement (an idle backend's flush interval).
    await sleep(11_000);
    const before = await counts();
    const heartbeatsBefore = await heartbeatsSent(child);
    const cpu0 = process.cpuUsage();
    const t0 = process.hrtime.bigint();
    await sleep(SECS * 1000);
    const cpu = process.cpuUsage(cpu0);
    const wall = Number(process.hrtime.bigint() - t0) / 1e9;
    const heartbeats = (await heartbeatsSent(child)) - heartbeatsBefore;
    const end = await counts();
    // n_tup_upd lags; read it after the lag and take off what the triggers saw written during the wait.
    await sleep(11_000);
    const late = await counts();
    const after = { upd: late.upd - (late.rows - end.rows), rows: end.rows, stmts: end.stmts };
    const cores = (cpu.user + cpu.system) / 1e6 / wall;
    console.log(`farm heartbeat bench: ${NODES} nodes (${online} online), heartbeat every ${INTERVAL} s, flush every ${FLUSH} s, ${wall.toFixed(1)} s measured`);
    console.log(`  heartbeats received:          ${heartbeats}`);
    console.log(`  portal CPU:                   ${cores.toFixed(4)} cores (user ${(cpu.user / 1e6).toFixed(2)} s, system ${(cpu.system / 1e6).toFixed(2)} s)`);
    console.log(`  nodes n_tup_upd delta:        ${after.upd - before.upd} -> ${((after.upd - before.upd) / heartbeats).toFixed(4)} rows written per heartbeat`);
    console.log(`  UPDATE statements on nodes:   ${after.stmts - before.stmts} -> ${((after.stmts - before.stmts) / heartbeats).toFixed(5)} statements per heartbeat`);
    console.log(`  rows updated (trigger count): ${after.rows - before.rows}`);
  } finally {
    child.kill();
    await t.stop();
    await db.end();
    await cluster.stop();
  }
}

/** The heartbeats the child has sent so far (asked over IPC). */
function heartbeatsSent(child: ReturnType<typeof fork>): Promise<number> {
  return new Promise((resolve) => {
    const on = (m: { t: string; heartbeats?: number }) => {
      if (m.t !== 'count') return;
      child.off('message', on);
      resolve(m.heartbeats!);
    };
    child.on('message', on);
    child.send({ t: 'count' });
  });
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e);
    process.exit(1);
  },
);
