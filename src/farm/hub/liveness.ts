/**
 * The portal's side of the nodes' connections, liveness and the fault rule's trigger (docs/farm.md,
 * "Connections and liveness"). Liveness costs no database write per heartbeat: the time of each node's last
 * message is kept in memory (seen) and written for all nodes in ONE UPDATE every `flushSecs` (flush, and at
 * close). Only state changes (online, offline with the reason) are written as they happen. A node that misses
 * MISSED_HEARTBEATS_OFFLINE intervals, or whose socket closes, is offline (goOffline): its forwards fail, the hub
 * emits node.offline and hands the node's jobs to the fault rule (jobs.ts), retried at each flush while the
 * database is away. After a portal start, a node that had a running job has restartGraceMs to connect.
 * Uses the node table, forwarding (its pending requests fail) and intake (node.offline).
 */
import { MISSED_HEARTBEATS_OFFLINE, RECONNECT_CAP_MS } from '../protocol.js';
import type { Forwarding } from './forwarding.js';
import type { EventIntake } from './intake.js';
import type { Conn, Entry, NodeTable } from './nodes.js';
import type { PortalHubOptions } from './options.js';
import { tenureSql } from '../replicas/ownership.js';

/** The nodes' liveness of one flush, as the columns of its UPDATE. */
interface SeenBatch {
  ids: string[];
  times: string[];
  online: boolean[];
  reasons: (string | null)[];
  epochs: number[];
}

export class Liveness {
  /** Nodes that had a running job when the portal started, and when they must have connected by. */
  readonly grace = new Map<string, number>();
  private flushing: Promise<void> = Promise.resolve();
  /** Nodes whose fault rule failed (database away), retried at each flush while they stay offline. */
  private readonly faultRetry = new Map<string, string>();
  private sweepTimer: NodeJS.Timeout | undefined;
  private flushTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly o: PortalHubOptions,
    private readonly nodes: NodeTable,
    private readonly forwarding: Forwarding,
    private readonly intake: EventIntake,
    private readonly now: () => number,
  ) {}

  /** The offline limit in milliseconds: MISSED_HEARTBEATS_OFFLINE intervals. */
  get offlineAfterMs(): number {
    return MISSED_HEARTBEATS_OFFLINE * this.o.heartbeatSecs * 1000;
  }

  /**
   * How long after the portal starts a node that had a running job may take to connect before the
   * fault rule ends its job: the node's longest reconnect wait plus the offline limit. The portal's
   * own absence is no node fault: a node that kept running through it is back within this.
   */
  get restartGraceMs(): number {
    return this.o.restartGraceMs ?? RECONNECT_CAP_MS + this.offlineAfterMs;
  }

  startTimers(): void {
    const sweepMs = Math.max(20, Math.min(1000, (this.o.heartbeatSecs * 1000) / 4));
    this.sweepTimer = setInterval(() => this.sweep(), sweepMs);
    this.flushTimer = setInterval(() => void this.flush(), this.o.flushSecs * 1000);
    this.sweepTimer.unref();
    this.flushTimer.unref();
  }

  stopTimers(): void {
    clearInterval(this.sweepTimer);
    clearInterval(this.flushTimer);
  }

  /** The node's entry when `conn` is its current connection, marked seen now (any message counts as a heartbeat). */
  current(conn: Conn): Entry | undefined {
    const entry = this.nodes.get(conn.nodeId);
    if (!entry || entry.conn !== conn) return undefined;
    entry.lastSeenMs = this.now();
    entry.link.lastSeen = new Date(entry.lastSeenMs);
    entry.dirty = true;
    return entry;
  }

  /** Write every node's last_seen held in memory since the last flush, in one statement. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const batch = this.takeDirty();
      if (batch.ids.length > 0) await this.writeSeen(batch);
      // Fault rules that failed (the database was away) are applied now, unless the node came back meanwhile.
      for (const [nodeId, reason] of [...this.faultRetry]) {
        this.faultRetry.delete(nodeId);
        const entry = this.nodes.get(nodeId);
        if (entry && !entry.link.online) this.applyFault(entry, nodeId, reason);
      }
    });
    return this.flushing;
  }

  /** The nodes seen since the last flush, as columns, marked clean. */
  private takeDirty(): SeenBatch {
    const batch: SeenBatch = { ids: [], times: [], online: [], reasons: [], epochs: [] };
    for (const [id, e] of this.nodes.entries) {
      if (!e.dirty) continue;
      // Replicas "many": a node not yet taken here (its hello's write not yet done) waits for the next flush.
      if (this.nodes.replicaId !== undefined && e.epoch === undefined) continue;
      e.dirty = false;
      batch.epochs.push(e.epoch ?? -1);
      batch.ids.push(id);
      batch.times.push(new Date(e.lastSeenMs).toISOString());
      batch.online.push(e.link.online);
      batch.reasons.push(e.link.offlineReason);
    }
    return batch;
  }

  /** One UPDATE of the batch; on failure the nodes stay dirty for the next flush (a database restart loses no liveness). */
  private async writeSeen({ ids, times, online, reasons, epochs }: SeenBatch): Promise<void> {
    const many = this.nodes.replicaId;
    try {
      // The state goes too (the same values unless a state write was lost to a database restart): memory is the truth.
      // Replicas "many": only for the nodes still owned here at their epoch; the others moved (dropped below).
      const { rows } = await this.o.pool.query<{ node_id: string }>(
        `UPDATE nodes SET last_seen = CASE WHEN nodes.last_seen IS NULL OR nodes.last_seen < v.t THEN v.t ELSE nodes.last_seen END,
                          online = v.o, offline_reason = v.r
           FROM unnest($1::text[], $2::timestamptz[], $3::boolean[], $4::text[], $5::bigint[]) AS v(id, t, o, r, e)
          WHERE nodes.node_id = v.id${many === undefined ? '' : ' AND nodes.owner_replica = $6 AND nodes.owner_epoch = v.e'}
          RETURNING nodes.node_id`,
        [ids, times, online, reasons, epochs, ...(many === undefined ? [] : [many])],
      );
      if (many === undefined) return;
      const written = new Set(rows.map((r) => r.node_id));
      ids.forEach((id, i) => {
        const entry = this.nodes.get(id);
        if (!written.has(id) && entry) this.nodes.dropMoved(entry, { replica: many, epoch: epochs[i]! });
      });
    } catch (e) {
      for (const id of ids) {
        const entry = this.nodes.get(id);
        if (entry) entry.dirty = true;
      }
      this.o.logger.warn({ err: e, nodes: ids.length }, "flushing the nodes' last_seen failed; retried at the next flush");
    }
  }

  goOffline(nodeId: string, reason: string): void {
    const entry = this.nodes.get(nodeId);
    if (!entry || !entry.link.online) return;
    const conn = entry.conn;
    entry.conn = undefined;
    entry.link.online = false;
    entry.link.offlineReason = reason;
    entry.dirty = false; // last_seen goes with the state change
    if (conn) {
      this.forwarding.failPending(conn, `it went offline (${reason})`);
      // A node that stopped answering may still hold the socket open: cut it, so it reconnects and says hello.
      if (conn.ws.readyState !== conn.ws.CLOSED) conn.ws.terminate();
    }
    const seen = new Date(entry.lastSeenMs).toISOString();
    this.nodes.enqueue(
      entry,
      async () => {
        // Replicas "many": only while the node is still this replica's at its epoch (else it moved: nothing written).
        const t = tenureSql(this.nodes.tenure(entry), 4);
        await this.o.pool.query(
          `UPDATE nodes SET online = false, offline_reason = $2, last_seen = greatest(last_seen, $3::timestamptz) WHERE node_id = $1${t.sql}`,
          [nodeId, reason, seen, ...t.params],
        );
      },
      () => (entry.dirty = true), // the next flush writes the state
    );
    this.applyFault(entry, nodeId, reason);
    this.o.logger.warn({ node: nodeId, reason }, 'node offline');
    this.intake.emit('node.offline', nodeId, { online: false, reason });
  }

  private sweep(): void {
    const now = this.now();
    for (const [nodeId, e] of this.nodes.entries) {
      if (e.link.online && now - e.lastSeenMs > this.offlineAfterMs) this.goOffline(nodeId, `no heartbeat for ${secs(this.offlineAfterMs)} s`);
    }
    for (const [nodeId, deadline] of this.grace) {
      if (now <= deadline) continue;
      this.grace.delete(nodeId);
      if (this.nodes.get(nodeId)?.link.online) continue;
      // It had a job running when the portal stopped and has not come back since: the fault rule applies.
      this.applyFault(this.nodes.entryFor(nodeId), nodeId, `not connected for ${secs(this.restartGraceMs)} s after the portal started`);
    }
  }

  private applyFault(entry: Entry, nodeId: string, reason: string): void {
    if (!this.o.jobs) return;
    this.nodes.enqueue(
      entry,
      // Replicas "many": under the node's tenure, read when it runs (a node that moved is left alone).
      async () => void (await this.o.jobs!.nodeOffline(nodeId, reason, this.nodes.tenure(entry))),
      () => this.faultRetry.set(nodeId, reason),
    );
  }
}

/** Seconds, without trailing zeros: 15, 0.6. */
function secs(ms: number): string {
  return String(Math.round(ms) / 1000);
}
