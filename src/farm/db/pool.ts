/**
 * The portal's pg pool and what it does when PostgreSQL goes away (docs/farm.md, "Faults"):
 *
 * - `newPool`: a pg.Pool that survives a server restart. An idle client losing its server emits
 *   'error' on the pool, and a CHECKED-OUT client (pool.connect(), a transaction) emits 'error' on
 *   itself; either with no listener would take the whole process down. Both are listened to here,
 *   once, for every client: the query in flight rejects, the pool drops the broken client, and the
 *   next query opens a new connection. A connection attempt gives up after `connectTimeoutMs`, so
 *   a request never waits on a database that does not answer. A query not answered within
 *   `queryTimeoutMs` rejects (a server frozen, a network gone quiet without a reset), and its
 *   connection, still busy with it, is destroyed rather than handed to the next caller.
 * - `inTransaction`: BEGIN, the work, COMMIT; on an error ROLLBACK, except on a connection that is
 *   away or busy with a timed-out query, which is destroyed (its server rolls the transaction back).
 * - `isDatabaseUnavailable` / `databaseUnavailable`: the errors that mean "the database cannot be
 *   reached now" (the socket refused or gone, the server shutting down or starting up, a connection
 *   cut), mapped to FarmError('database_unavailable'), answered 503 with a JSON body, never a 500.
 */
import pg from 'pg';
import { FarmError } from '../../core/errors.js';
import type { Logger } from '../../core/ports.js';

export interface PoolOptions {
  connectionString: string;
  max: number;
  logger: Logger;
  /** A connection not made within this is a failure (default 10 s). */
  connectTimeoutMs?: number;
  /** A query not answered within this is a failure (default 30 s); see {@link NO_QUERY_TIMEOUT}. */
  queryTimeoutMs?: number;
}

/** A query's own `query_timeout` for work that may rightly take long (migrations): about 24 days, setTimeout's most. */
export const NO_QUERY_TIMEOUT = 2 ** 31 - 1;

export function newPool(o: PoolOptions): pg.Pool {
  const pool = new pg.Pool({
    connectionString: o.connectionString,
    max: o.max,
    connectionTimeoutMillis: o.connectTimeoutMs ?? 10_000,
    // Client-side: a frozen server cannot enforce a statement_timeout. pool.query() destroys the client of a query that timed out.
    query_timeout: o.queryTimeoutMs ?? 30_000,
    // A connection whose peer vanished without a reset is noticed by the kernel, not only by the next query.
    keepAlive: true,
  });
  // An idle client losing its server (PostgreSQL restarted): logged; the pool drops it.
  pool.on('error', (e) => o.logger.warn({ err: e }, 'an idle database connection failed; the next query reconnects'));
  // A checked-out client losing its server: its query rejects (the caller handles that); the event itself only logged.
  pool.on('connect', (client) => client.on('error', (e) => o.logger.debug({ err: e }, 'a database connection in use failed')));
  return pool;
}

/** SQLSTATEs of a server that is away: class 08 (connection exception), shutdown, starting up, too many connections. */
const AWAY_STATES = new Set(['57P01', '57P02', '57P03', '53300']);
/** Node socket errors of a server that is away (a Unix socket missing is ENOENT). */
const AWAY_ERRNOS = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOENT', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNABORTED']);
/** pg's message for a query not answered within `query_timeout` (newPool). */
const QUERY_TIMEOUT = 'Query read timeout';
/** pg's own messages for a connection that broke, timed out or was never made. */
const AWAY_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
  QUERY_TIMEOUT,
  'Connection terminated unexpectedly',
];

/** Whether an error means the database cannot be reached now (as opposed to a bad query or a constraint). */
export function isDatabaseUnavailable(e: unknown): boolean {
  if (!(e instanceof Error)) return false;
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && (code.startsWith('08') || AWAY_STATES.has(code))) return true;
  // A socket error of the database's connection, not of a file the portal reads (a missing result file is ENOENT too).
  if (typeof code === 'string' && AWAY_ERRNOS.has(code) && (e as { syscall?: unknown }).syscall !== 'open') {
    if (code !== 'ENOENT' || (e as { syscall?: unknown }).syscall === 'connect') return true;
  }
  return AWAY_MESSAGES.some((m) => e.message.startsWith(m));
}

/** The 503 for an error `isDatabaseUnavailable` accepted; a query that timed out says so (the server may be hung, or the query too slow). */
export const databaseUnavailable = (e?: unknown): FarmError =>
  e instanceof Error && e.message.startsWith(QUERY_TIMEOUT)
    ? new FarmError('database_unavailable', "the farm's database (PostgreSQL) did not answer in time (database_query_timeout_secs): it may be hung or overloaded; retry later, or narrow a free-text filter")
    : new FarmError('database_unavailable', "the farm's database (PostgreSQL) cannot be reached now; retry in a few seconds");

/**
 * Run `fn` in a transaction on one client of `pool`. On an error the transaction is rolled back,
 * and the error rethrown. A client whose database is away, or whose query timed out (the connection
 * is still busy with it: a ROLLBACK would queue behind it, and the next caller would inherit the
 * open transaction), is destroyed instead; the server rolls back what it had.
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const out = await fn(client);
    await client.query('COMMIT');
    return out;
  } catch (e) {
    if (isDatabaseUnavailable(e)) broken = e as Error;
    else await client.query('ROLLBACK').catch((r: unknown) => (broken = r instanceof Error ? r : new Error(String(r))));
    throw e;
  } finally {
    client.release(broken);
  }
}
