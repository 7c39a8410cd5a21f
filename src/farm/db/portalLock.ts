/**
 * One portal per farm database, until portals can be many (issue 19, step 3; docs/farm.md, "One portal
 * per database"). A portal starting beside another on the same database would mark every node offline
 * and, a grace period later, end the running jobs of the nodes connected to the other one. So before a
 * portal touches anything, it takes a PostgreSQL session-level advisory lock (`pg_try_advisory_lock`)
 * on a fixed key, on a connection of its own held for the life of the process; a second portal finds
 * it taken and refuses to start, naming the holder.
 *
 * - The key is fixed: advisory locks are scoped to the database, and the database is the farm.
 * - The connection is not one of the pool's: the pool hands connections out and ends idle ones; a
 *   session lock lives exactly as long as its connection.
 * - `pg_try_advisory_lock`, not `pg_advisory_lock`: a second portal must refuse at once, not wait.
 * - The connection says who holds it through `application_name` (host, pid, a random instance id),
 *   readable by any role in `pg_stat_activity`; the refusal names it.
 * - If the connection drops (PostgreSQL restarted, the backend terminated, the network cut), the lock
 *   is gone with it: `held` turns false at once (`/readyz` answers 503) and the lock is taken again
 *   on a new connection, retried with a growing delay (0.5 s to 5 s). While the database is away the
 *   portal cannot write anyway. Found held by ANOTHER portal on retry (one started in that window),
 *   this portal gives the farm up: `onLost` is called, and `farmhand portal` exits at once (exit 1)
 *   without another database write, as a SIGKILLed portal would; the farm survives that
 *   (test/farm/portal-kill.test.ts). Found held by this same process's earlier connection (a backend
 *   not yet gone), it waits and retries.
 */
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '../../core/ports.js';

/** The advisory lock's key: 'fhportal' in ASCII as a bigint (the migrations' lock is 'farmhand', src/farm/db/migrate.ts). */
export const PORTAL_LOCK_KEY = Buffer.from('fhportal', 'ascii').readBigInt64BE().toString();

/** Who holds the lock, as far as PostgreSQL says. */
export interface LockHolder {
  pid: number;
  applicationName: string | null;
  clientAddr: string | null;
  backendStart: Date | null;
}

/** Thrown by PortalLock.acquire when another session holds the lock: its message is the one-line refusal. */
export class PortalLockHeld extends Error {
  override readonly name = 'PortalLockHeld';
  constructor(
    readonly holder: LockHolder | undefined,
    shared = false,
  ) {
    super(
      shared
        ? `a farmhand portal configured as the only one (replicas "single") runs on this database (it holds the portal lock: ${describeHolder(holder)}); ` +
            'a replica (replicas "many") cannot start beside it: stop it first, or configure it with replicas "many" too (docs/farm.md, "Many portals")'
        : `another farmhand portal already runs on this database (it holds the portal lock: ${describeHolder(holder)}); ` +
            'only one portal may run on a farm database: stop that one first, or give this one another database ' +
            `(if that portal's host is gone, PostgreSQL releases the lock within about a minute, or at once with SELECT pg_terminate_backend(${holder?.pid ?? '<pid>'}); docs/farm.md, "One portal per database"; ` +
            'for many portals on one database, configure every one with replicas "many": docs/farm.md, "Many portals")',
    );
  }
}

export function describeHolder(h: LockHolder | undefined): string {
  if (!h) return 'a session that ended before it could be named';
  const parts = [h.applicationName ? `"${h.applicationName}"` : 'an unnamed session', `backend pid ${h.pid}`];
  parts.push(h.clientAddr ? `from ${h.clientAddr}` : 'over the local socket');
  if (h.backendStart) parts.push(`connected since ${h.backendStart.toISOString()}`);
  return parts.join(', ');
}

export interface PortalLockOptions {
  connectionString: string;
  logger: Logger;
  /** Called once when the lock was lost and another session took it meanwhile: stop now, write nothing more. */
  onLost?: (holder: LockHolder | undefined) => void;
  /** A connection not made within this is a failure (default 10 s). */
  connectTimeoutMs?: number;
  /**
   * Replicas "many": the lock taken SHARED (`pg_try_advisory_lock_shared`): replicas never contend on it, but a
   * portal configured as the only one (exclusive) cannot start beside them, nor they beside it.
   */
  shared?: boolean;
}

const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 5000;

export class PortalLock {
  /** Put in `application_name`, so a refusal, `pg_stat_activity` and this process's own retry can tell the holder. */
  readonly instance = randomBytes(4).toString('hex');
  readonly applicationName: string;
  private client: pg.Client | undefined;
  private isHeld = false;
  private closed = false;
  private lost = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = RETRY_FIRST_MS;
  /** Times the lock was taken again after its connection dropped. */
  reacquired = 0;

  private constructor(private readonly o: PortalLockOptions) {
    // NAMEDATALEN: PostgreSQL keeps 63 bytes of it.
    this.applicationName = `farmhand-portal ${this.instance} pid ${process.pid} on ${hostname()}`.slice(0, 63);
  }

  /** Take the lock or throw PortalLockHeld (another session holds it) or the connection's error (database away). */
  static async acquire(o: PortalLockOptions): Promise<PortalLock> {
    const lock = new PortalLock(o);
    const holder = await lock.tryTake();
    if (holder !== true) throw new PortalLockHeld(holder, o.shared);
    return lock;
  }

  /** Whether this process holds the lock now (false from the moment its connection dropped until it is taken again). */
  get held(): boolean {
    return this.isHeld && !this.closed;
  }

  /** Whether the lock was lost to another session (the portal must stop). */
  get lostToAnother(): boolean {
    return this.lost;
  }

  /** The backend pid of the connection holding the lock (tests terminate it). */
  get backendPid(): number | undefined {
    // pg's Client has it at run time; its types do not declare it.
    return (this.client as unknown as { processID?: number } | undefined)?.processID;
  }

  /** Release the lock (end its connection). */
  async release(): Promise<void> {
    this.closed = true;
    this.isHeld = false;
    clearTimeout(this.retryTimer);
    const c = this.client;
    this.client = undefined;
    await c?.end().catch(() => undefined);
  }

  /** true when taken; else who holds it (undefined when the holder could not be named). */
  private async tryTake(): Promise<true | LockHolder | undefined> {
    const client = new pg.Client({
      connectionString: this.o.connectionString,
      application_name: this.applicationName,
      connectionTimeoutMillis: this.o.connectTimeoutMs ?? 10_000,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      // The server's side: if this portal's host dies (no FIN, no RST), PostgreSQL probes the idle session
      // and ends it, releasing the lock, after about 30 + 3 x 10 s instead of the kernel's default 2 hours.
      // A standby portal can then start. (Ignored over a Unix socket, where a dead peer is seen at once.)
      options: '-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3',
    });
    // Without a listener, the connection's error would end the process; its 'end' says the rest.
    client.on('error', (e) => this.o.logger.warn({ err: e }, "the portal lock's database connection failed"));
    try {
      await client.connect();
      const take = this.o.shared ? 'pg_try_advisory_lock_shared' : 'pg_try_advisory_lock';
      const { rows } = await client.query<{ ok: boolean }>(`SELECT ${take}($1::bigint) AS ok`, [PORTAL_LOCK_KEY]);
      if (!rows[0]?.ok) {
        const holder = await holderOf(client);
        await client.end().catch(() => undefined);
        return holder;
      }
    } catch (e) {
      await client.end().catch(() => undefined);
      throw e;
    }
    if (this.closed) {
      await client.end().catch(() => undefined);
      return true;
    }
    this.client = client;
    this.isHeld = true;
    this.retryMs = RETRY_FIRST_MS;
    client.on('end', () => this.onEnd(client));
    return true;
  }

  private onEnd(client: pg.Client): void {
    if (this.client !== client || this.closed) return;
    this.client = undefined;
    this.isHeld = false;
    this.o.logger.error('the portal lock was lost with its database connection; the portal is not ready until it takes it again');
    this.scheduleRetry();
  }

  private scheduleRetry(): void {
    if (this.closed || this.lost) return;
    const wait = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, RETRY_MAX_MS);
    this.retryTimer = setTimeout(() => void this.retry(), wait);
  }

  private async retry(): Promise<void> {
    if (this.closed || this.lost) return;
    let got: true | LockHolder | undefined;
    try {
      got = await this.tryTake();
    } catch (e) {
      this.o.logger.warn({ err: e }, 'the portal lock cannot be taken again yet (the database is away); retrying');
      this.scheduleRetry();
      return;
    }
    if (got === true) {
      if (!this.closed) {
        this.reacquired++;
        this.o.logger.info('the portal lock is held again');
      }
      return;
    }
    // This process's own earlier connection, its backend not gone yet: wait for it. (Shared: only an exclusive
    // holder refuses a shared take, so whoever holds it is a portal configured as the only one.)
    if (got?.applicationName?.includes(this.instance)) {
      this.scheduleRetry();
      return;
    }
    this.lost = true;
    this.o.logger.error({ holder: describeHolder(got) }, 'another portal took the portal lock while this one had lost it; this portal stops');
    this.o.onLost?.(got);
  }
}

/** The session holding the portal lock in this database, from pg_locks and pg_stat_activity. */
async function holderOf(client: pg.Client): Promise<LockHolder | undefined> {
  const { rows } = await client
    .query<{ pid: number; application_name: string | null; client_addr: string | null; backend_start: Date | null }>(
      `SELECT l.pid, a.application_name, host(a.client_addr) AS client_addr, a.backend_start
         FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
        WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND ((l.classid::bigint << 32) | l.objid::bigint) = $1::bigint`,
      [PORTAL_LOCK_KEY],
    )
    .catch(() => ({ rows: [] }));
  const r = rows[0];
  if (!r) return undefined;
  return { pid: r.pid, applicationName: r.application_name || null, clientAddr: r.client_addr, backendStart: r.backend_start };
}
