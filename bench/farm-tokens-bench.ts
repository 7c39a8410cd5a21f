/**
 * The portal's token verifier (PgTokenVerifier) on a throwaway PostgreSQL cluster: with N tokens
 * (default 10,000) in the table, how long a full reload takes (what every notification and the
 * periodic safety net cost), how long verify() takes (every v2 request pays it), and how long a
 * revocation takes to be honoured through NOTIFY (commit of the UPDATE to the first refused
 * verify, polled on the event loop). Prints medians and p95.
 *   node --import tsx bench/farm-tokens-bench.ts [--tokens N] [--runs N]
 */
import pg from 'pg';
import { startPostgres } from '../test/helpers/postgres.js';
import { migrate } from '../src/farm/db/migrate.js';
import { PgTokens, PgTokenVerifier } from '../src/farm/users.js';
import { percentile } from './lib/stats.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

const total = arg('--tokens', 10_000);
const runs = arg('--runs', 50);

const cluster = await startPostgres();
const pool = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database, max: 4 });
try {
  await migrate(pool);
  await pool.query("INSERT INTO users (username) SELECT 'user' || i FROM generate_series(1, 100) i");
  // Tokens made in bulk (random hashes: their secrets are not needed), plus `runs` real ones to revoke.
  await pool.query(
    `INSERT INTO tokens (token_id, token_hash, username)
     SELECT lpad(to_hex(i), 8, '0'), encode(sha256(i::text::bytea), 'hex'), 'user' || (1 + i % 100) FROM generate_series(1, $1::int) i`,
    [total],
  );
  const tokens = new PgTokens(pool);
  const made = [];
  for (let i = 0; i < runs; i++) made.push(await tokens.createToken('user1'));

  const verifier = new PgTokenVerifier(pool, { reloadSecs: 3600 });
  let t0 = performance.now();
  await verifier.start();
  const startMs = performance.now() - t0;

  const reloads: number[] = [];
  for (let i = 0; i < runs; i++) {
    t0 = performance.now();
    await verifier.reload();
    reloads.push(performance.now() - t0);
  }

  const N = 100_000;
  const token = made[0]!.token;
  t0 = performance.now();
  for (let i = 0; i < N; i++) if (!verifier.verify(token)) throw new Error('token refused');
  const verifyUs = ((performance.now() - t0) * 1000) / N;

  const revokes: number[] = [];
  for (const m of made) {
    await tokens.revoke(m.entry.id);
    const committed = performance.now();
    while (verifier.verify(m.token)) await new Promise((r) => setImmediate(r));
    revokes.push(performance.now() - committed);
  }
  await verifier.close();

  const f = (n: number) => n.toFixed(2);
  console.log(`farm-tokens-bench: ${(total + runs).toLocaleString('en')} tokens, ${runs} runs`);
  console.log(`  start (LISTEN + first load)            ${f(startMs)} ms`);
  console.log(`  full reload                            median ${f(percentile(reloads, 50))} ms, p95 ${f(percentile(reloads, 95))} ms`);
  console.log(`  verify()                               ${f(verifyUs)} us per call (sha256 + constant-time compare)`);
  console.log(`  revocation honoured (NOTIFY + reload)  median ${f(percentile(revokes, 50))} ms, p95 ${f(percentile(revokes, 95))} ms after the UPDATE returned`);
} finally {
  await pool.end();
  await cluster.stop();
}
