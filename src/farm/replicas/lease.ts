/**
 * A replica's lease (docs/farm.md, "Many portals"; table `portal_replicas`, migration 10): a row per live replica,
 * inserted at start, renewed every lease_secs/3, deleted at a clean stop. Every time is the database's (`now()`):
 * replicas' clocks never meet. The replica's own view is stricter: it counts its lease as ending lease_secs after
 * it SENT the last renewal that succeeded (its monotonic clock), so it stops acting before any other replica can
 * see the lease lapsed.
 *
 * Lost (`onLost`, once): a renewal found no live row (the sweeper of another replica deleted it), or none succeeded
 * before the lease's end (the database away, the process stalled). The portal then stops acting (portal.ts).
 * Renewals go over a pool of their own (one connection), so a pool exhausted by requests cannot starve them.
 */
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type pg from 'pg';
import type { Logger } from '../../core/ports.js';
import { newPool } from '../db/pool.js';

export interface ReplicaLeaseOptions {
  connectionString: string;
  /** Default: a random id (`r-` and 8 hex digits). */
  replicaId?: string;
  /** Where the other replicas reach this one (portal_replicas.url). */
  url: string;
  leaseSecs: number;
  logger: Logger;
  /** Called once when the lease is lost: stop acting. */
  onLost?: (why: string) => void;
}

/** Thrown at start: a live replica holds this replica id (two processes configured with the same replica_id). */
export class ReplicaIdInUse extends Error {
  override readonly name = 'ReplicaIdInUse';
}

export class ReplicaLease {
  readonly replicaId: string;
  readonly leaseMs: number;
  private readonly pool: pg.Pool;
  private deadline = 0;
  private timer: NodeJS.Timeout | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  private isLost = false;
  private closed = false;
  /** Renewals that succeeded since start (tests, metrics). */
  renewals = 0;

  private constructor(private readonly o: ReplicaLeaseOptions) {
    this.replicaId = o.replicaId ?? `r-${randomBytes(4).toString('hex')}`;
    this.leaseMs = o.leaseSecs * 1000;
    const step = Math.max(100, Math.floor(this.leaseMs / 3));
    this.pool = newPool({ connectionString: o.connectionString, max: 1, connectTimeoutMs: step, queryTimeoutMs: step, logger: o.logger });
  }

  /**
   * Insert this replica's row. A row of the same id whose lease has not lapsed (this id's previous process, killed
   * a moment ago, or another process with the same replica_id) is waited for, up to twice the lease; then
   * ReplicaIdInUse.
   */
  static async take(o: ReplicaLeaseOptions): Promise<ReplicaLease> {
    const lease = new ReplicaLease(o);
    try {
      const until = performance.now() + 2 * lease.leaseMs + 1000;
      for (;;) {
        const sent = performance.now();
        const { rowCount } = await lease.pool.query(
          `INSERT INTO portal_replicas (replica_id, url, lease_until) VALUES ($1, $2, now() + $3 * interval '1 millisecond')
           ON CONFLICT (replica_id) DO UPDATE SET url = EXCLUDED.url, started_at = now(), lease_until = EXCLUDED.lease_until
            WHERE portal_replicas.lease_until <= now()`,
          [lease.replicaId, o.url, lease.leaseMs],
        );
        if ((rowCount ?? 0) > 0) {
          lease.deadline = sent + lease.leaseMs;
          break;
        }
        if (performance.now() > until) {
          throw new ReplicaIdInUse(
            `another live portal replica holds the replica id "${lease.replicaId}" (its lease in portal_replicas is being renewed): give each replica its own replicas.replica_id, or leave it out for a random one`,
          );
        }
        await new Promise((r) => setTimeout(r, Math.max(100, lease.leaseMs / 3)));
      }
    } catch (e) {
      await lease.pool.end().catch(() => undefined);
      throw e;
    }
    lease.schedule();
    o.logger.info({ replica: lease.replicaId, lease_secs: o.leaseSecs }, 'portal replica lease taken');
    return lease;
  }

  /** Whether this replica holds its lease now (by its own, stricter, clock). */
  get held(): boolean {
    return !this.isLost && !this.closed && performance.now() < this.deadline;
  }

  get lost(): boolean {
    return this.isLost;
  }

  /** Live replicas (rows whose lease has not lapsed), for /metrics. */
  async liveReplicas(): Promise<number> {
    const { rows } = await this.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM portal_replicas WHERE lease_until > now()');
    return rows[0]?.n ?? 0;
  }

  /** A clean stop: the row goes (the others' sweepers need not wait for it to lapse). */
  async release(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.watchdog);
    if (!this.isLost) {
      await this.pool
        .query('DELETE FROM portal_replicas WHERE replica_id = $1', [this.replicaId])
        .catch((e: unknown) => this.o.logger.warn({ err: e }, "could not delete this replica's lease row; it lapses by itself"));
    }
    await this.pool.end().catch(() => undefined);
  }

  /** Stop renewing without a database write (the replica stops acting, or dies in a test). */
  abandon(): void {
    this.closed = true;
    clearTimeout(this.timer);
    clearTimeout(this.watchdog);
    void this.pool.end().catch(() => undefined);
  }

  private schedule(): void {
    if (this.closed || this.isLost) return;
    this.timer = setTimeout(() => void this.renew(), this.leaseMs / 3);
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => this.lose('no renewal succeeded before the lease ended'), Math.max(0, this.deadline - performance.now()));
  }

  private async renew(): Promise<void> {
    if (this.closed || this.isLost) return;
    const sent = performance.now();
    try {
      const { rowCount } = await this.pool.query(
        `UPDATE portal_replicas SET lease_until = now() + $2 * interval '1 millisecond' WHERE replica_id = $1 AND lease_until > now()`,
        [this.replicaId, this.leaseMs],
      );
      if ((rowCount ?? 0) === 0) return this.lose('its row in portal_replicas had lapsed or was deleted');
      if (this.closed || this.isLost) return;
      this.deadline = Math.max(this.deadline, sent + this.leaseMs);
      this.renewals++;
    } catch (e) {
      this.o.logger.warn({ err: e, replica: this.replicaId }, 'renewing the portal replica lease failed; retrying');
    }
    this.schedule();
  }

  private lose(why: string): void {
    if (this.isLost || this.closed) return;
    this.isLost = true;
    clearTimeout(this.timer);
    clearTimeout(this.watchdog);
    this.o.logger.error({ replica: this.replicaId, why }, 'this portal replica lost its lease: it stops acting (its nodes reconnect to another replica)');
    this.o.onLost?.(why);
  }
}
