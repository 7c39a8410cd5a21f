/**
 * The sweeper (docs/farm.md, "Many portals"): every replica, every lease_secs while it holds its lease, applies to
 * the nodes of replicas that are gone what a single portal applies to its own after a restart:
 *
 * 1. A node owned by a replica with no row or a lapsed lease (and a node no replica owns still marked online: a
 *    farm moving from "single") is taken, with an epoch raise, to `owner_replica = NULL` and offline. The raise
 *    makes every write the gone replica still had queued match nothing.
 * 2. Lapsed rows of `portal_replicas` are deleted (a replica that comes back finds its lease lost and stops).
 * 3. A node no replica owns with a running job gets the restart grace from when this replica first saw it so, at
 *    that epoch; if it is still no one's at that epoch when the grace ends, the fault rule ends its job, under the
 *    same condition (two sweepers doing it: the second finds no running job). A node that reconnects to any
 *    replica meanwhile raises the epoch, and its job is left alone.
 */
import type pg from 'pg';
import type { Logger } from '../../core/ports.js';
import type { Tenure } from './ownership.js';

export interface SweeperOptions {
  pool: pg.Pool;
  replicaId: string;
  periodMs: number;
  graceMs: number;
  logger: Logger;
  /** Whether this replica holds its lease (no lease: no sweep). */
  held: () => boolean;
  /** The fault rule under a tenure (jobs.ts FarmJobs.nodeOffline). */
  fault: (nodeId: string, reason: string, t: Tenure) => Promise<unknown>;
  /** A node taken offline by the sweep (the hub publishes node.offline). */
  onOffline?: (nodeId: string, reason: string) => void;
  now?: () => number;
}

export class Sweeper {
  /** Nodes no replica owns with a running job: the epoch seen and when the grace ends. */
  readonly grace = new Map<string, { epoch: number; deadline: number }>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = false;
  /** Sweeps done (each a look at every gone replica's nodes), for /metrics. */
  sweeps = 0;
  private readonly now: () => number;

  constructor(private readonly o: SweeperOptions) {
    this.now = o.now ?? Date.now;
  }

  start(): void {
    this.timer = setInterval(() => void this.sweep(), this.o.periodMs);
    this.timer.unref();
    void this.sweep();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    await this.running;
  }

  /** One sweep (serialised: a slow one is not overlapped by the next). */
  sweep(): Promise<void> {
    this.running = this.running.then(() => this.once()).catch((e: unknown) => this.o.logger.warn({ err: e }, 'the replica sweep failed; retried at the next period'));
    return this.running;
  }

  private async once(): Promise<void> {
    if (this.stopped || !this.o.held()) return;
    const { pool, replicaId } = this.o;
    const { rows: taken } = await pool.query<{ node_id: string; offline_reason: string }>(
      `UPDATE nodes SET owner_replica = NULL, owner_epoch = owner_epoch + 1, online = false,
              offline_reason = CASE WHEN owner_replica IS NULL THEN 'not connected to a live portal replica'
                                    ELSE 'its portal replica ' || owner_replica || ' stopped renewing its lease' END
        WHERE (owner_replica IS NULL AND online)
           OR (owner_replica IS NOT NULL AND owner_replica <> $1
               AND NOT EXISTS (SELECT 1 FROM portal_replicas r WHERE r.replica_id = nodes.owner_replica AND r.lease_until > now()))
        RETURNING node_id, offline_reason`,
      [replicaId],
    );
    for (const t of taken) {
      this.o.logger.warn({ node: t.node_id, reason: t.offline_reason }, 'node taken from a gone portal replica: offline until it connects');
      this.o.onOffline?.(t.node_id, t.offline_reason);
    }
    const { rows: gone } = await pool.query<{ replica_id: string }>(
      'DELETE FROM portal_replicas WHERE lease_until <= now() AND replica_id <> $1 RETURNING replica_id',
      [replicaId],
    );
    if (gone.length > 0) this.o.logger.warn({ replicas: gone.map((g) => g.replica_id) }, 'deleted the rows of portal replicas whose lease lapsed');
    const { rows: orphans } = await pool.query<{ node_id: string; owner_epoch: string }>(
      `SELECT n.node_id, n.owner_epoch FROM nodes n
        WHERE n.owner_replica IS NULL AND EXISTS (SELECT 1 FROM jobs j WHERE j.node_id = n.node_id AND j.state = 'running')`,
    );
    const now = this.now();
    const seen = new Set<string>();
    for (const r of orphans) {
      const epoch = Number(r.owner_epoch);
      seen.add(r.node_id);
      const g = this.grace.get(r.node_id);
      if (!g || g.epoch !== epoch) {
        this.grace.set(r.node_id, { epoch, deadline: now + this.o.graceMs });
        continue;
      }
      if (now < g.deadline || this.stopped || !this.o.held()) continue;
      this.grace.delete(r.node_id);
      const reason = `not connected to any portal replica for ${Math.round(this.o.graceMs) / 1000} s`;
      await this.o.fault(r.node_id, reason, { replica: null, epoch });
    }
    for (const id of [...this.grace.keys()]) if (!seen.has(id)) this.grace.delete(id);
    this.sweeps++;
  }
}
