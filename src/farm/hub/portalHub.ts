/**
 * The portal's side of the nodes' connections (docs/farm.md, "The portal and the hub"): `PortalHub`, the
 * FarmHub the portal's routes use, composed of one part per concern and answering for their life (start,
 * close). Its parts, each told what it needs at construction (dependencies go one way, no cycles):
 *
 * - nodes.ts: the table of nodes (NodeLink, current connection, last_seen) and each node's ordered database work;
 * - forwarding.ts, h2Client.ts: v2 requests forwarded as HTTP/2 streams in a node's socket, flow-controlled, bounded;
 * - intake.ts: the node's events checked, recorded in order, published; the hub's own events;
 * - liveness.ts: last_seen in memory and flushed, offline after missed heartbeats, the fault rule's trigger;
 * - connections.ts: the WebSocket endpoint, credentials, hello and welcome, each message to its part.
 *
 * connections -> liveness -> intake, forwarding -> nodes -> options.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { EventPayloads, EventType, FarmEvent } from '../../core/events.js';
import type { EventOrigin, FarmHub, ForwardRequest, ForwardResponse, NodeLink } from '../contract.js';
import { Connections } from './connections.js';
import { Forwarding } from './forwarding.js';
import { EventIntake } from './intake.js';
import { Liveness } from './liveness.js';
import { NodeTable } from './nodes.js';
import { CLOSE_MOVED, type PortalHubOptions } from './options.js';
import { releaseNodes, releaseOwnedAtStart } from '../replicas/ownership.js';

export class PortalHub implements FarmHub {
  /** Node events refused because they name another node's job or result (foreignIds); forwards made. */
  readonly stats = { foreignEventsRefused: 0, forwards: 0, eventsDeferred: 0, inboxPeak: 0 };
  private readonly nodes: NodeTable;
  private readonly forwarding: Forwarding;
  private readonly intake: EventIntake;
  private readonly liveness: Liveness;
  private readonly connections: Connections;
  private readonly now: () => number;
  private closed = false;
  private server: Server | undefined;
  private readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.connections.upgrade(req, socket, head);

  constructor(private readonly o: PortalHubOptions) {
    const now = (this.now = o.now ?? Date.now);
    const closed = () => this.closed;
    this.nodes = new NodeTable(o.logger, closed, o.replicaId);
    this.intake = new EventIntake(o, this.nodes, now, this.stats);
    this.forwarding = new Forwarding(this.nodes, this.stats);
    this.liveness = new Liveness(o, this.nodes, this.forwarding, this.intake, now);
    this.connections = new Connections(o, this.nodes, this.liveness, this.intake, this.forwarding, closed, now);
  }

  /** The offline limit in milliseconds: MISSED_HEARTBEATS_OFFLINE intervals. */
  get offlineAfterMs(): number {
    return this.liveness.offlineAfterMs;
  }

  /** How long after the portal starts a node that had a running job may take to connect (liveness.ts). */
  get restartGraceMs(): number {
    return this.liveness.restartGraceMs;
  }

  /**
   * Take the connections arriving at CONNECT_PATH on `server` and start the timers. Nodes the database
   * still has as online (the portal stopped without saying so) are marked offline until they connect.
   */
  async start(server: Server): Promise<void> {
    if (this.o.replicaId !== undefined) {
      // Replicas "many": only this replica's own nodes (left by a previous process of a fixed replica_id) become no
      // one's; the sweeper gives their running jobs the restart grace, as it does for every gone replica's nodes.
      await releaseOwnedAtStart(this.o.pool, this.o.replicaId);
    } else {
      await this.o.pool.query(`UPDATE nodes SET online = false, offline_reason = 'not connected since the portal started' WHERE online`);
      const deadline = this.now() + this.restartGraceMs;
      for (const nodeId of (await this.o.jobs?.nodesWithRunningJobs()) ?? []) this.liveness.grace.set(nodeId, deadline);
    }
    this.server = server;
    server.on('upgrade', this.onUpgrade);
    this.liveness.startTimers();
  }

  link(nodeId: string): NodeLink | undefined {
    const e = this.nodes.get(nodeId);
    return e && { ...e.link };
  }

  links(): NodeLink[] {
    return [...this.nodes.entries.values()].map((e) => ({ ...e.link }));
  }

  onEvent(listener: (e: FarmEvent, from: EventOrigin) => void): () => void {
    return this.intake.onEvent(listener);
  }

  onAvailabilityChange(listener: (nodeId: string) => void): () => void {
    return this.intake.onAvailabilityChange(listener);
  }

  jobExited(nodeId: string, jobUid: string): void {
    const link = this.nodes.get(nodeId)?.link;
    if (link?.job?.job_uid === jobUid) this.intake.jobEnded(link, jobUid);
  }

  folded(nodeId: string): Promise<void> {
    return this.nodes.get(nodeId)?.chain ?? Promise.resolve();
  }

  /** Resolves when every node's pending database work is done (tests, close). */
  idle(): Promise<void> {
    return this.nodes.idle();
  }

  forward(nodeId: string, req: ForwardRequest, signal?: AbortSignal): Promise<ForwardResponse> {
    return this.forwarding.forward(nodeId, req, signal);
  }

  /** Forwarded requests not yet answered in full, over every connection (/metrics). */
  forwardsInFlight(): number {
    return this.forwarding.inFlight();
  }

  /** Write every node's last_seen held in memory since the last flush, in one statement. */
  flush(): Promise<void> {
    return this.liveness.flush();
  }

  /** Publish an event of the portal's own making about a node (the fault rule's run.finished and job.exited). */
  emitPortalEvent<T extends EventType>(type: T, nodeId: string, data: EventPayloads[T]): void {
    this.intake.emit(type, nodeId, data);
  }

  /**
   * Replicas "many", the lease lost (src/farm/replicas/lease.ts): stop acting at once, without another database
   * write. No more connections are taken; every node's is closed with CLOSE_MOVED so it reconnects to another
   * replica, and no offline state or fault rule is written (the node is not at fault, and it is not ours anymore).
   */
  abandon(why: string): void {
    if (this.closed) return;
    this.closed = true;
    this.liveness.stopTimers();
    this.server?.off('upgrade', this.onUpgrade);
    for (const e of this.nodes.entries.values()) {
      const conn = e.conn;
      e.conn = undefined;
      e.epoch = undefined;
      e.dirty = false;
      e.inbox.length = 0;
      e.link.online = false;
      e.link.offlineReason = why;
      if (conn) {
        this.forwarding.failPending(conn, why);
        conn.ws.close(CLOSE_MOVED, why.slice(0, 120));
      }
    }
  }

  /** Stop taking connections, close every node's (they reconnect to the next portal), flush, record them offline. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.liveness.stopTimers();
    this.server?.off('upgrade', this.onUpgrade);
    const online: string[] = [];
    for (const [nodeId, e] of this.nodes.entries) {
      if (!e.conn) continue;
      const conn = e.conn;
      e.conn = undefined;
      if (e.link.online) online.push(nodeId);
      e.link.online = false;
      e.link.offlineReason = 'the portal stopped';
      this.forwarding.failPending(conn, 'the portal is stopping');
      conn.ws.close(1001, 'portal stopping');
    }
    await this.idle();
    await this.flush();
    if (this.o.replicaId !== undefined) {
      // Replicas "many": its nodes become no one's (they reconnect to another replica; the sweepers give the grace).
      const held = online.flatMap((nodeId) => {
        const epoch = this.nodes.get(nodeId)?.epoch;
        return epoch === undefined ? [] : [{ nodeId, epoch }];
      });
      await releaseNodes(this.o.pool, this.o.replicaId, held, 'the portal stopped').catch((e: unknown) =>
        this.o.logger.warn({ err: e }, 'could not record the nodes offline at portal stop'),
      );
    } else if (online.length > 0) {
      await this.o.pool
        .query(`UPDATE nodes SET online = false, offline_reason = 'the portal stopped' WHERE node_id = ANY($1::text[])`, [online])
        .catch((e: unknown) => this.o.logger.warn({ err: e }, 'could not record the nodes offline at portal stop'));
    }
    const wss = this.connections.wss;
    for (const ws of wss.clients) ws.terminate();
    await new Promise<void>((resolve) => wss.close(() => resolve()));
  }
}
