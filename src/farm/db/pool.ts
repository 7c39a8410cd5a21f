/**
 * The portal's pg pool and what it does when PostgreSQL goes away (docs/farm.md, "Faults"):
 *
 * - `newPool`: a pg.Pool that survives a server restart. An idle client losing its server emits
 *   'error' on the pool, and a CHECKED-OUT client (pool.connect(), a transaction) emits 'error' on
 *   itself; either with no listener would take the whole process down. Both are listened to here,
 *   once, for every client: the query in flight rejects, the pool drops the broken client, and the
 *   next query opens a new connection. A connection attempt gives up after `connectTimeoutMs`, so
 *   a request never waits on a database that does not answer.
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
}

export function newPool(o: PoolOptions): pg.Pool {
  const pool = new pg.Pool({ connectionString: o.connectionString, max: o.max, connectionTimeoutMillis: o.connectTimeoutMs ?? 10_000 });
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
/** pg's own messages for a connection that broke, timed out or was never made. */
const AWAY_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
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

export const databaseUnavailable = (): FarmError =>
  new FarmError('database_unavailable', "the farm's database (PostgreSQL) cannot be reached now; retry in a few seconds");
