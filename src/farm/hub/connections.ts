/**
 * The portal's side of the nodes' connections, the connections themselves (docs/farm.md, "Connections and
 * liveness"): the WebSocket endpoint at CONNECT_PATH (the upgrade, checked against NodeCredentials and refused
 * with a JSON body), the hello and its welcome (a second connection of a node replaces the first), and the
 * dispatch of each message to the file whose concern it is: liveness.ts (any message is a heartbeat), intake.ts
 * (events), the HTTP/2 byte stream (forwarded requests: forwarding.ts, h2Client.ts). Uses all of those; none of them uses this file.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import type { NodeLink } from '../contract.js';
import { CONNECT_PATH, PROTOCOL_VERSION, protocolMismatch, type Hello, type NodeMessage } from '../protocol.js';
import { takeNode } from '../replicas/ownership.js';
import { nodeState } from './availability.js';
import type { Forwarding } from './forwarding.js';
import { H2LinkClient } from './h2Client.js';
import type { EventIntake } from './intake.js';
import type { Liveness } from './liveness.js';
import { Conn, type NodeTable } from './nodes.js';
import { CLOSE_PROTOCOL, CLOSE_REPLACED, type PortalHubOptions } from './options.js';

/** Largest frame a node may send (an event with its record, bytes of its HTTP/2 connection). */
const MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** HTTP/2 bytes a node may send before its hello is taken (its server's preface is a few dozen). */
const MAX_BYTES_BEFORE_HELLO = 64 * 1024;
/** A connection that has not said hello by then is closed. */
const HELLO_TIMEOUT_MS = 10_000;
const NODE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

export class Connections {
  readonly wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false });

  constructor(
    private readonly o: PortalHubOptions,
    private readonly nodes: NodeTable,
    private readonly liveness: Liveness,
    private readonly intake: EventIntake,
    private readonly forwarding: Forwarding,
    private readonly closed: () => boolean,
    private readonly now: () => number,
  ) {}

  async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const path = (req.url ?? '').split('?')[0];
    if (path !== CONNECT_PATH || this.closed()) {
      refuse(socket, 404, `no WebSocket endpoint here; nodes connect to ${CONNECT_PATH}`);
      return;
    }
    const nodeId = headerOf(req, 'x-farmhand-node');
    const auth = /^\s*node\s+(\S+)\s*$/i.exec(headerOf(req, 'authorization') ?? '');
    if (!nodeId || !NODE_ID_RE.test(nodeId) || !auth) {
      refuse(socket, 401, "a node connects with the headers 'Authorization: node <credential>' and 'X-Farmhand-Node: <node_id>'");
      return;
    }
    let ok = false;
    try {
      ok = await this.o.credentials.verify(nodeId, auth[1]!);
    } catch (e) {
      this.o.logger.error({ err: e, node: nodeId }, 'checking a node credential failed');
      refuse(socket, 503, 'the portal cannot check node credentials now; retry later');
      return;
    }
    if (!ok) {
      this.o.logger.warn({ node: nodeId, ip: req.socket.remoteAddress }, 'a node connection was refused: unknown node or wrong credential');
      refuse(socket, 403, `node ${nodeId} is not registered on this portal or its credential is wrong ('farmhand farm node add ${nodeId}' prints a new one)`);
      return;
    }
    if (this.closed()) {
      refuse(socket, 503, 'the portal is stopping');
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws, nodeId, stripV4Mapped(req.socket.remoteAddress)));
  }

  private accept(ws: WebSocket, nodeId: string, ip: string | null): void {
    const conn = new Conn(ws, nodeId, ip);
    const helloTimer = setTimeout(() => ws.close(CLOSE_PROTOCOL, 'no hello'), HELLO_TIMEOUT_MS);
    ws.on('message', (data: RawData, isBinary: boolean) => {
      try {
        if (isBinary) {
          // The node's HTTP/2 bytes (its answers), read by the session made at the hello.
          conn.tunnel.deliver(toBuffer(data));
          if (!conn.h2 && conn.tunnel.readableLength > MAX_BYTES_BEFORE_HELLO) throw new Error('HTTP/2 bytes before the hello');
        } else {
          const text = toBuffer(data);
          this.onMessage(conn, JSON.parse(text.toString('utf8')) as NodeMessage, helloTimer, text.length);
        }
      } catch (e) {
        this.o.logger.warn({ err: e, node: nodeId }, 'a node sent a message the portal cannot read; closing its connection');
        ws.close(CLOSE_PROTOCOL, 'unreadable message');
      }
    });
    ws.on('error', (e) => this.o.logger.debug({ err: e, node: nodeId }, 'node connection error'));
    ws.on('close', () => {
      clearTimeout(helloTimer);
      const entry = this.nodes.get(nodeId);
      if (entry?.conn === conn) this.liveness.goOffline(nodeId, 'connection closed');
      else this.forwarding.failPending(conn, 'its connection closed');
      conn.tunnel.destroy();
    });
  }

  private onMessage(conn: Conn, m: NodeMessage, helloTimer: NodeJS.Timeout, bytes: number): void {
    if (!conn.hello) {
      if (m.t !== 'hello') throw new Error(`expected hello first, got ${String((m as { t?: unknown }).t)}`);
      clearTimeout(helloTimer);
      this.onHello(conn, m);
      return;
    }
    const entry = this.liveness.current(conn);
    if (!entry) return; // replaced or declared offline: its words no longer count
    switch (m.t) {
      case 'hb':
        return;
      case 'event':
        this.intake.onNodeEvent(entry, conn.nodeId, m.event, m.record, bytes);
        return;
      case 'replay':
        this.intake.onReplay(entry, m.after);
        return;
      case 'hello':
        throw new Error('a second hello on one connection');
      default:
        throw new Error(`unknown message type ${String((m as { t?: unknown }).t)}`);
    }
  }

  private onHello(conn: Conn, hello: Hello): void {
    const nodeId = conn.nodeId;
    if (hello.node_id !== nodeId) throw new Error(`hello names node ${hello.node_id} on ${nodeId}'s connection`);
    if (hello.protocol !== PROTOCOL_VERSION) {
      this.o.logger.warn({ node: nodeId, protocol: hello.protocol }, `a node speaks another protocol version; closing: ${protocolMismatch(hello.protocol)}`);
      conn.ws.close(CLOSE_PROTOCOL, protocolMismatch(hello.protocol));
      return;
    }
    conn.hello = hello;
    // Forwarded requests: the streams of an HTTP/2 session over the socket; a node that breaks it loses its link.
    conn.h2 = {
      client: new H2LinkClient(conn.tunnel, nodeId, (why) => {
        this.o.logger.warn({ node: nodeId, why }, 'a node broke the HTTP/2 session of its forwarded requests; closing its connection');
        conn.ws.close(CLOSE_PROTOCOL, 'HTTP/2 session broken');
      }),
    };
    this.liveness.grace.delete(nodeId);
    const known = this.nodes.get(nodeId);
    const wasOnline = known?.link.online ?? false;
    const replaced = known?.conn;
    if (known?.conn) {
      // A second connection of the same node replaces the first (the node restarted, or a NAT dropped the old one silently).
      const old = known.conn;
      known.conn = undefined;
      this.forwarding.failPending(old, 'it connected again');
      old.ws.close(CLOSE_REPLACED, 'replaced by a new connection');
    }
    const now = this.now();
    const entry = this.nodes.entryFor(nodeId, null, now);
    entry.conn = conn;
    entry.lastSeenMs = now;
    entry.dirty = false; // written with the state change below
    Object.assign(entry.link, {
      online: true,
      offlineReason: null,
      version: hello.version,
      externalIp: conn.ip,
      lastSeen: new Date(now),
      job: validJob(hello.job) ?? null,
    });
    // The node's state is its stream's (node.state): kept from its last connection, else read below, then the replay's.
    entry.deferring = undefined; // the welcome's replay starts after the cursor
    const seen = new Date(now).toISOString();
    this.nodes.enqueue(entry, async () => {
      // Replicas "many": the node is this replica's from now, at a new epoch (src/farm/replicas/ownership.ts).
      if (this.o.replicaId !== undefined) entry.epoch = await takeNode(this.o.pool, this.o.replicaId, nodeId, hello.version, seen, conn.ip);
      else await this.o.pool.query(`UPDATE nodes SET online = true, offline_reason = NULL, version = $2, last_seen = $3 WHERE node_id = $1`, [nodeId, hello.version, seen]);
      const ended = (await this.o.jobs?.reconcile(nodeId)) ?? [];
      // Read after the node's earlier events on this chain were folded: the node sends those after it (docs/farm.md,
      // "The node stream"); one folded but not acknowledged is not sent again.
      const fold = this.o.fold;
      const last = fold ? { last_event_id: await fold.cursor(nodeId) } : {};
      if (fold && entry.link.snapshot === null) {
        // Not known to this process (it started since): the last state folded, until the stream brings a newer one.
        const kept = await fold.state(nodeId);
        const s = kept && nodeState(kept.data);
        if (s && entry.stateAt === null) Object.assign(entry.link, { snapshot: s.snapshot, availability: s.availability });
      }
      if (entry.conn === conn) conn.send({ t: 'welcome', protocol: PROTOCOL_VERSION, heartbeat_secs: this.o.heartbeatSecs, ended_jobs: ended, ...last });
    }, () => {
      entry.dirty = true; // the next flush writes the state
      conn.ws.close(1011, 'the portal could not record the connection');
    });
    if (replaced) {
      this.o.logger.warn(
        { node: nodeId, version: hello.version, ip: conn.ip, replaced_ip: replaced.ip },
        'node connected again while its connection was open: the newer connection replaces the older (a restarted node, or two nodes with the same node id: the older one stops reconnecting)',
      );
    } else this.o.logger.info({ node: nodeId, version: hello.version, ip: conn.ip }, wasOnline ? 'node reconnected' : 'node online');
    if (!wasOnline) this.intake.emit('node.online', nodeId, { online: true, reason: null });
  }
}

/** A hello's job, if it is one (a node's word is checked, never trusted to be well formed). */
function validJob(job: unknown): NodeLink['job'] | undefined {
  const j = job as { job_uid?: unknown; status?: unknown } | null | undefined;
  if (!j || typeof j.job_uid !== 'string' || (j.status !== 'running' && j.status !== 'exited')) return undefined;
  return { job_uid: j.job_uid, status: j.status };
}

function headerOf(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

function refuse(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: status === 404 ? 'not_found' : status === 503 ? 'device_unavailable' : 'forbidden', message });
  const text = { 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 503: 'Service Unavailable' }[status] ?? 'Error';
  socket.end(
    `HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

function stripV4Mapped(ip: string | undefined): string | null {
  if (!ip) return null;
  return ip.startsWith('::ffff:') ? ip.slice(7) : ip;
}
