/**
 * Farm reservations on a throwaway PostgreSQL cluster (test/helpers/postgres.ts), through PgReservations:
 *
 * 1. Atomic reservation of 10 nodes: `reserve` of 10 nodes (one transaction: lock, check, insert),
 *    then the 10 reservations ended; median and p95 of each over N rounds (target: reserve median <= 20 ms).
 * 2. 50 concurrent reservers over 20 nodes, on two portals (two PgReservations, two pools): each
 *    reserves a random set of 1-5 nodes, ends it when granted, again, for S seconds. Double bookings
 *    are counted from the table afterwards: two reservations of one node whose lifetimes
 *    [created_at, ended_at) overlap (must be 0). Throughput is printed.
 *
 *   node --import tsx bench/farm-reservations-bench.ts [--rounds N] [--secs S] [--reservers R]
 */
import pg from 'pg';
import { startPostgres } from '../test/helpers/postgres.js';
import { migrate } from '../src/farm/db/migrate.js';
import { PgReservations } from '../src/farm/reservations.js';
import { FarmError } from '../src/core/errors.js';
import { silentLogger } from '../src/logger.js';
import { percentile, Targets } from './lib/stats.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

const rounds = arg('--rounds', 200);
const secs = arg('--secs', 10);
const reservers = arg('--reservers', 50);
const NODES = Array.from({ length: 20 }, (_, i) => `farmhand-${String(i).padStart(12, '0')}`);
const ms = (x: number) => `${x.toFixed(2)} ms`;
const targets = new Targets();

const cluster = await startPostgres();
const cfg = { host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database };
const poolA = new pg.Pool({ ...cfg, max: 25 });
const poolB = new pg.Pool({ ...cfg, max: 25 });
const free = () => null;
const a = new PgReservations({ pool: poolA, isBusy: free, logger: silentLogger });
const b = new PgReservations({ pool: poolB, isBusy: free, logger: silentLogger });
try {
  await migrate(poolA);
  await poolA.query('INSERT INTO nodes (node_id) SELECT unnest($1::text[])', [NODES]);
  await a.start();
  await b.start();
  console.log(`farm-reservations-bench: PostgreSQL throwaway cluster, ${NODES.length} nodes`);

  // 1. Atomic reservation of 10 nodes.
  const ten = NODES.slice(0, 10);
  const reserveMs: number[] = [];
  const endMs: number[] = [];
  for (let i = -10; i < rounds; i++) {
    const t0 = performance.now();
    const made = await a.reserve({ node_ids: ten, username: 'bench', message: 'bench', duration_secs: 600 });
    const t1 = performance.now();
    await Promise.all(made.map((r) => a.end(r.reservation_id, 'bench')));
    const t2 = performance.now();
    if (i < 0) continue; // warm-up
    reserveMs.push(t1 - t0);
    endMs.push(t2 - t1);
  }
  targets.check('reserve 10 nodes (one transaction), median', percentile(reserveMs, 50), '<=', 20, 'ms',
    `median ${ms(percentile(reserveMs, 50))}, p95 ${ms(percentile(reserveMs, 95))} over ${rounds} rounds`);
  console.log(`      end the 10 reservations (10 calls, concurrent): median ${ms(percentile(endMs, 50))}, p95 ${ms(percentile(endMs, 95))}`);

  // 2. Concurrent reservers on two portals.
  await poolA.query('TRUNCATE reservation_nodes, reservations');
  let granted = 0;
  let refused = 0;
  let caughtByIndex = 0;
  const until = performance.now() + secs * 1000;
  let seed = 12345;
  const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
  const worker = async (w: number) => {
    const portal = w % 2 ? b : a;
    const user = `user${w}`;
    while (performance.now() < until) {
      const want = new Set<string>();
      const k = 1 + rand(5);
      while (want.size < k) want.add(NODES[rand(NODES.length)]!);
      try {
        const made = await portal.reserve({ node_ids: [...want], username: user, message: 'load', duration_secs: null });
        granted++;
        for (const r of made) await portal.end(r.reservation_id, user);
      } catch (e) {
        if (!(e instanceof FarmError) || e.code !== 'conflict') throw e;
        refused++;
        if (e.message.includes('at the same moment')) caughtByIndex++;
      }
    }
  };
  const t0 = performance.now();
  await Promise.all(Array.from({ length: reservers }, (_, w) => worker(w)));
  const elapsed = (performance.now() - t0) / 1000;
  const { rows } = await poolA.query<{ n: string; total: string }>(`
    WITH life AS (
      SELECT n.node_id, r.reservation_id, tstzrange(r.created_at, coalesce(r.ended_at, 'infinity')) AS span
      FROM reservations r JOIN reservation_nodes n USING (reservation_id))
    SELECT (SELECT count(*) FROM life x JOIN life y ON x.node_id = y.node_id AND x.reservation_id < y.reservation_id AND x.span && y.span) AS n,
           (SELECT count(*) FROM life) AS total`);
  const doubles = Number(rows[0]!.n);
  console.log(`      ${reservers} reservers on 2 portals, ${NODES.length} nodes, random sets of 1-5 nodes, ${elapsed.toFixed(1)} s:`);
  console.log(`      ${granted} requests granted (${(granted / elapsed).toFixed(0)}/s, ${rows[0]!.total} node reservations), ${refused} refused with 409 (${((granted + refused) / elapsed).toFixed(0)} requests/s); ${caughtByIndex} of the 409s came from the unique index`);
  targets.check('double bookings in the table', doubles, '<=', 0, '', `${doubles} overlapping reservations of one node`);
  targets.printSummary();
} finally {
  await a.close();
  await b.close();
  await poolA.end();
  await poolB.end();
  await cluster.stop();
}
