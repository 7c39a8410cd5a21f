/**
 * Applies the farm's migrations at start: in one transaction, under a
 * transaction-scoped advisory lock, so two portals starting together never
 * apply the same migration twice and a failed migration leaves nothing behind.
 * Plain SQL and ~40 lines: a migration library (node-pg-migrate) would add a
 * CLI, its own table layout and a dependency tree for no gain here.
 */
import type pg from 'pg';
import { MIGRATIONS, type Migration } from './migrations.js';
import { inTransaction, NO_QUERY_TIMEOUT } from './pool.js';

/** Key of the advisory lock ('farmhand' in ASCII, as a bigint). */
const LOCK_KEY = '7377303478837800548';

/** Apply every migration not yet applied; returns the ids applied now. */
export async function migrate(pool: pg.Pool, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  return inTransaction(pool, async (client) => {
    // No query timeout here: a migration of a large table, or another portal's held lock, may rightly take long.
    const q = <R extends pg.QueryResultRow>(text: string, values?: unknown[]) =>
      client.query<R>({ text, values, query_timeout: NO_QUERY_TIMEOUT } as pg.QueryConfig);
    await q('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
    await q(`CREATE TABLE IF NOT EXISTS farm_migrations (
      id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set((await q<{ id: number }>('SELECT id FROM farm_migrations')).rows.map((r) => r.id));
    const applied: number[] = [];
    for (const m of [...migrations].sort((a, b) => a.id - b.id)) {
      if (done.has(m.id)) continue;
      await q(m.sql);
      await q('INSERT INTO farm_migrations (id, name) VALUES ($1, $2)', [m.id, m.name]);
      applied.push(m.id);
    }
    return applied;
  });
}
