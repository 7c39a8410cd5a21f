/**
 * The portal's side of the nodes' connections (docs/farm.md, "The portal and
 * the hub"): a WebSocket endpoint at CONNECT_PATH on the portal's HTTP server,
 * liveness, and forwarding of v2 requests to the node that owns them.
 *
 * Liveness costs no database write per heartbeat: the time of each node's
 * last message is kept in memory and written for all nodes in ONE UPDATE every
 * `flushSecs` (and at close). Only state changes (online, offline with the
 * reason) are written as they happen. A node that misses MISSED_HEARTBEATS_OFFLINE
 * intervals, or whose socket closes, is offline; the hub emits node.offline and
 * hands the node's jobs to the fault rule (jobs.ts).
 *
 * Per node, the database work (state changes, job events, the fault rule, the
 * reconciliation of a returning node) runs in order on one promise chain, so a
 * node that comes back is answered only after its going-away was recorded.
 */
import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { Readable } from 'node:stream';
import type pg from 'pg';
import { WebSocketServer, type RawData, type WebSocket } from 'ws';
import { FarmError } from '../core/errors.js';
import type { EventPayloads, EventType, FarmEvent } from '../core/events.js';
import { parseJobUid, parseResultId } from '../core/ids.js';
import type { Logger } from '../core/ports.js';
import type { EventOrigin, FarmHub, ForwardRequest, ForwardResponse, NodeCredentials, NodeEventRecorder, NodeLink } from './contract.js';
import {
  CLOSE_REPLACED,
  CONNECT_PATH,
  MISSED_HEARTBEATS_OFFLINE,
  PROTOCOL_VERSION,
  RECONNECT_CAP_MS,
  decodeChunk,
  encodeChunk,
  type Hello,
  type NodeMessage,
  type PortalMessage,
} from './protocol.js';
import { isDatabaseUnavailable } from './db/pool.js';

/**
 * The job and result ids of a node's event that are not the node's own (docs/farm.md, "What a node can do to the
 * portal"): every job_uid and result_id starts with its node's id (src/core/ids.ts), and a run's result_id with its
 * job_uid. Empty when the event names only the node's own (a key press of no run names result_id null).
 */
export function foreignIds(data: Record<string, unknown>, nodeId: string): string[] {
  const out: string[] = [];
  const show = (key: string, v: unknown) => `${key} ${JSON.stringify(v)?.slice(0, 200) ?? String(v)}`;
  if ('job_uid' in data && parseJobUid(data.job_uid)?.nodeId !== nodeId) out.push(show('job_uid', data.job_uid));
  if ('result_id' in data && data.result_id !== null) {
    const r = parseResultId(data.result_id);
    if (r?.job.nodeId !== nodeId) out.push(show('result_id', data.result_id));
    else if (typeof data.job_uid === 'string' && parseJobUid(data.job_uid) && `/${data.job_uid.replace(/^\//, '')}` !== r.jobUid) {
      out.push(`${show('result_id', data.result_id)} (not a run of ${show('job_uid', data.job_uid)})`);
    }
  }
  return out;
}

/** What the hub asks of the jobs table (jobs.ts's FarmJobs); each call runs on the node's chain. */
export interface HubJobs {
  /**
   * A node event (job.started, run.started, run.finished, job.exited; others are ignored). Resolves
   * false when the event is about a job the portal has ended itself (a stale node's late word): it
   * is then neither recorded nor published.
   */
  record(e: FarmEvent): Promise<boolean | void>;
  /** The node went offline: end its running job, record the run in flight as an error. */
  nodeOffline(nodeId: string, reason: string): Promise<void>;
  /** The node is back: the jobs of it the portal has ended (the welcome's ended_jobs). */
  reconcile(nodeId: string, job: Hello['job'], snapshotJob?: unknown): Promise<string[]>;
  /** Nodes with a job the portal still has as running (for the grace period after a portal restart). */
  nodesWithRunningJobs(): Promise<string[]>;
}

export interface PortalHubOptions {
  pool: pg.Pool;
  credentials: NodeCredentials;
  logger: Logger;
  /** Told to nodes in the welcome; offline after MISSED_HEARTBEATS_OFFLINE of them. */
  heartbeatSecs: number;
  /** How often last_seen is flushed (one UPDATE for every node seen since the last flush). */
  flushSecs: number;
  jobs?: HubJobs;
  /** A forwarded response with more than this buffered on the portal (its client reads too slowly) is cancelled. */
  maxBufferedBytes?: number;
  /** After a portal start, how long a node that had a running job has to connect (default: restartGraceMs). */
  restartGraceMs?: number;
  /** Milliseconds since the epoch; tests may pass another clock. */
  now?: () => number;
}

export const DEFAULT_MAX_BUFFERED_BYTES = 64 * 1024 * 1024;
/** Body bytes per binary frame of a forwarded request. */
const CHUNK_BYTES = 256 * 1024;
/** Largest frame a node may send (a response chunk, a snapshot). */
const MAX_FRAME_BYTES = 16 * 1024 * 1024;
/** A connection that has not said hello by then is closed. */
const HELLO_TIMEOUT_MS = 10_000;
const NODE_ID_RE = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** Close codes the portal uses (4000-4999 are the application's). */
export { CLOSE_REPLACED };
export const CLOSE_PROTOCOL = 4002;
export const CLOSE_OFFLINE = 4003;

interface Pending {
  resolve(r: ForwardResponse): void;
  reject(e: Error): void;
  /** Set once the node answered `res`. */
  body?: Readable;
  /** Set when the node ends it before the consumer started reading. */
  done: boolean;
  unlisten(): void;
}

class Conn {
  nextId = 1;
  readonly pending = new Map<number, Pending>();
  hello: Hello | undefined;
  constructor(
    readonly ws: WebSocket,
    readonly nodeId: string,
    readonly ip: string | null,
  ) {}

  send(m: PortalMessage): void {
    if (this.ws.readyState === this.ws.OPEN) this.ws.send(JSON.stringify(m));
  }

  newId(): number {
    const id = this.nextId;
    this.nextId = this.nextId >= 0xffffffff ? 1 : this.nextId + 1;
    return id;
  }
}

interface Entry {
  link: NodeLink;
  conn: Conn | undefined;
  /** Milliseconds of the last message (the in-memory last_seen). */
  lastSeenMs: number;
  /** Seen since the last flush. */
  dirty: boolean;
  /** The node's database work, in order. */
  chain: Promise<void>;
}

export class PortalHub implements FarmHub {
  private readonly wss: WebSocketServer;
  private readonly entries = new Map<string, Entry>();
  /** Node events refused because they name another node's job or result (foreignIds). */
  readonly stats = { foreignEventsRefused: 0, forwards: 0 };
  private readonly listeners = new Set<(e: FarmEvent, from: EventOrigin) => void>();
  private recorder: NodeEventRecorder | undefined;
  private readonly now: () => number;
  private readonly maxBuffered: number;
  private readonly boot: string;
  private seq = 0;
  private sweepTimer: NodeJS.Timeout | undefined;
  private flushTimer: NodeJS.Timeout | undefined;
  /** Nodes that had a running job when the portal started, and when they must have connected by. */
  private readonly grace = new Map<string, number>();
  private flushing: Promise<void> = Promise.resolve();
  /** Nodes whose fault rule failed (database away), retried at each flush while they stay offline. */
  private readonly faultRetry = new Map<string, string>();
  private closed = false;
  private server: Server | undefined;
  private readonly onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket, head);

  constructor(private readonly o: PortalHubOptions) {
    this.now = o.now ?? Date.now;
    this.maxBuffered = o.maxBufferedBytes ?? DEFAULT_MAX_BUFFERED_BYTES;
    this.boot = this.now().toString(36);
    this.wss = new WebSocketServer({ noServer: true, maxPayload: MAX_FRAME_BYTES, perMessageDeflate: false });
  }

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

  /**
   * Take the connections arriving at CONNECT_PATH on `server` and start the timers. Nodes the database
   * still has as online (the portal stopped without saying so) are marked offline until they connect.
   */
  async start(server: Server): Promise<void> {
    await this.o.pool.query(`UPDATE nodes SET online = false, offline_reason = 'not connected since the portal started' WHERE online`);
    const deadline = this.now() + this.restartGraceMs;
    for (const nodeId of (await this.o.jobs?.nodesWithRunningJobs()) ?? []) this.grace.set(nodeId, deadline);
    this.server = server;
    server.on('upgrade', this.onUpgrade);
    const sweepMs = Math.max(20, Math.min(1000, (this.o.heartbeatSecs * 1000) / 4));
    this.sweepTimer = setInterval(() => this.sweep(), sweepMs);
    this.flushTimer = setInterval(() => void this.flush(), this.o.flushSecs * 1000);
    this.sweepTimer.unref();
    this.flushTimer.unref();
  }

  link(nodeId: string): NodeLink | undefined {
    const e = this.entries.get(nodeId);
    return e && { ...e.link };
  }

  links(): NodeLink[] {
    return [...this.entries.values()].map((e) => ({ ...e.link }));
  }

  onEvent(listener: (e: FarmEvent, from: EventOrigin) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * Where the node events are recorded (the outbox): from then on each welcome carries `last_event_id`, the
   * last of the node's events recorded, and the node passes on its events after it (at least once; the outbox
   * stores a node event once). Without one (a portal with no outbox) the welcome has no such field.
   */
  useRecorder(recorder: NodeEventRecorder): void {
    this.recorder = recorder;
  }

  jobExited(nodeId: string, jobUid: string): void {
    const link = this.entries.get(nodeId)?.link;
    if (link?.job?.job_uid === jobUid) link.job = { job_uid: jobUid, status: 'exited' };
  }

  folded(nodeId: string): Promise<void> {
    return this.entries.get(nodeId)?.chain ?? Promise.resolve();
  }

  /** Resolves when every node's pending database work is done (tests, close). */
  async idle(): Promise<void> {
    for (;;) {
      const chains = [...this.entries.values()].map((e) => e.chain);
      await Promise.all(chains);
      if ([...this.entries.values()].every((e, i) => e.chain === chains[i])) return;
    }
  }

  forward(nodeId: string, req: ForwardRequest, signal?: AbortSignal): Promise<ForwardResponse> {
    const entry = this.entries.get(nodeId);
    const conn = entry?.conn;
    if (!entry || !conn || !entry.link.online) {
      const why = entry?.link.offlineReason ?? 'it has not connected to the portal';
      return Promise.reject(new FarmError('device_unavailable', `node ${nodeId} is offline (${why}); try again when it is back`));
    }
    if (signal?.aborted) return Promise.reject(abortError());
    this.stats.forwards++;
    const id = conn.newId();
    return new Promise<ForwardResponse>((resolve, reject) => {
      const onAbort = () => {
        const p = conn.pending.get(id);
        if (!p) return;
        conn.send({ t: 'cancel', id });
        this.settle(conn, id, abortError());
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      conn.pending.set(id, { resolve, reject, done: false, unlisten: () => signal?.removeEventListener('abort', onAbort) });
      const hasBody = req.body !== undefined && req.body.length > 0;
      conn.send({ t: 'req', id, method: req.method, path: req.path, headers: req.headers, user: req.user, base_url: req.baseUrl, has_body: hasBody });
      if (hasBody) {
        for (let at = 0; at < req.body!.length; at += CHUNK_BYTES) conn.ws.send(encodeChunk(id, req.body!.subarray(at, at + CHUNK_BYTES)));
        conn.send({ t: 'req_end', id });
      }
    });
  }

  /** Forwarded requests not yet answered in full, over every connection (/metrics). */
  forwardsInFlight(): number {
    let n = 0;
    for (const e of this.entries.values()) n += e.conn?.pending.size ?? 0;
    return n;
  }

  /** Write every node's last_seen held in memory since the last flush, in one statement. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(async () => {
      const ids: string[] = [];
      const times: string[] = [];
      const online: boolean[] = [];
      const reasons: (string | null)[] = [];
      for (const [id, e] of this.entries) {
        if (!e.dirty) continue;
        e.dirty = false;
        ids.push(id);
        times.push(new Date(e.lastSeenMs).toISOString());
        online.push(e.link.online);
        reasons.push(e.link.offlineReason);
      }
      if (ids.length > 0) {
        try {
          // The state goes too (the same values unless a state write was lost to a database restart): memory is the truth.
          await this.o.pool.query(
            `UPDATE nodes SET last_seen = CASE WHEN nodes.last_seen IS NULL OR nodes.last_seen < v.t THEN v.t ELSE nodes.last_seen END,
                              online = v.o, offline_reason = v.r
               FROM unnest($1::text[], $2::timestamptz[], $3::boolean[], $4::text[]) AS v(id, t, o, r)
              WHERE nodes.node_id = v.id`,
            [ids, times, online, reasons],
          );
        } catch (e) {
          // Kept dirty for the next flush: a database restart loses no liveness.
          for (const id of ids) {
            const entry = this.entries.get(id);
            if (entry) entry.dirty = true;
          }
          this.o.logger.warn({ err: e, nodes: ids.length }, "flushing the nodes' last_seen failed; retried at the next flush");
        }
      }
      // Fault rules that failed (the database was away) are applied now, unless the node came back meanwhile.
      for (const [nodeId, reason] of [...this.faultRetry]) {
        this.faultRetry.delete(nodeId);
        const entry = this.entries.get(nodeId);
        if (entry && !entry.link.online) this.applyFault(entry, nodeId, reason);
      }
    });
    return this.flushing;
  }

  private applyFault(entry: Entry, nodeId: string, reason: string): void {
    if (!this.o.jobs) return;
    this.enqueue(
      entry,
      () => this.o.jobs!.nodeOffline(nodeId, reason),
      () => this.faultRetry.set(nodeId, reason),
    );
  }

  /** Stop taking connections, close every node's (they reconnect to the next portal), flush, record them offline. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweepTimer);
    clearInterval(this.flushTimer);
    this.server?.off('upgrade', this.onUpgrade);
    const online: string[] = [];
    for (const [nodeId, e] of this.entries) {
      if (!e.conn) continue;
      const conn = e.conn;
      e.conn = undefined;
      if (e.link.online) online.push(nodeId);
      e.link.online = false;
      e.link.offlineReason = 'the portal stopped';
      this.failPending(conn, 'the portal is stopping');
      conn.ws.close(1001, 'portal stopping');
    }
    await this.idle();
    await this.flush();
    if (online.length > 0) {
      await this.o.pool
        .query(`UPDATE nodes SET online = false, offline_reason = 'the portal stopped' WHERE node_id = ANY($1::text[])`, [online])
        .catch((e: unknown) => this.o.logger.warn({ err: e }, 'could not record the nodes offline at portal stop'));
    }
    for (const ws of this.wss.clients) ws.terminate();
    await new Promise<void>((resolve) => this.wss.close(() => resolve()));
  }

  // ---- connections ---------------------------------------------------------------------------

  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    socket.on('error', () => socket.destroy());
    const path = (req.url ?? '').split('?')[0];
    if (path !== CONNECT_PATH || this.closed) {
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
    if (this.closed) {
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
        if (isBinary) this.onChunk(conn, toBuffer(data));
        else this.onMessage(conn, JSON.parse(toBuffer(data).toString('utf8')) as NodeMessage, helloTimer);
      } catch (e) {
        this.o.logger.warn({ err: e, node: nodeId }, 'a node sent a message the portal cannot read; closing its connection');
        ws.close(CLOSE_PROTOCOL, 'unreadable message');
      }
    });
    ws.on('error', (e) => this.o.logger.debug({ err: e, node: nodeId }, 'node connection error'));
    ws.on('close', () => {
      clearTimeout(helloTimer);
      const entry = this.entries.get(nodeId);
      if (entry?.conn === conn) this.goOffline(nodeId, 'connection closed');
      else this.failPending(conn, 'its connection closed');
    });
  }

  private onMessage(conn: Conn, m: NodeMessage, helloTimer: NodeJS.Timeout): void {
    if (!conn.hello) {
      if (m.t !== 'hello') throw new Error(`expected hello first, got ${String((m as { t?: unknown }).t)}`);
      clearTimeout(helloTimer);
      this.onHello(conn, m);
      return;
    }
    const entry = this.current(conn);
    if (!entry) return; // replaced or declared offline: its words no longer count
    switch (m.t) {
      case 'hb':
        return;
      case 'snapshot':
        entry.link.snapshot = m.snapshot;
        return;
      case 'event':
        this.onNodeEvent(entry, conn.nodeId, m.event);
        return;
      case 'res':
        this.onResponseHead(conn, m.id, m.status, m.headers);
        return;
      case 'end':
        this.onEnd(conn, m.id, m.error);
        return;
      case 'hello':
        throw new Error('a second hello on one connection');
      default:
        throw new Error(`unknown message type ${String((m as { t?: unknown }).t)}`);
    }
  }

  /** The node's entry when `conn` is its current connection, marked seen now (any message counts as a heartbeat). */
  private current(conn: Conn): Entry | undefined {
    const entry = this.entries.get(conn.nodeId);
    if (!entry || entry.conn !== conn) return undefined;
    entry.lastSeenMs = this.now();
    entry.link.lastSeen = new Date(entry.lastSeenMs);
    entry.dirty = true;
    return entry;
  }

  private onHello(conn: Conn, hello: Hello): void {
    const nodeId = conn.nodeId;
    if (hello.node_id !== nodeId) throw new Error(`hello names node ${hello.node_id} on ${nodeId}'s connection`);
    if (hello.protocol !== PROTOCOL_VERSION) {
      this.o.logger.warn({ node: nodeId, protocol: hello.protocol }, 'a node speaks another protocol version; closing');
      conn.ws.close(CLOSE_PROTOCOL, `protocol ${PROTOCOL_VERSION} expected`);
      return;
    }
    conn.hello = hello;
    this.grace.delete(nodeId);
    let entry = this.entries.get(nodeId);
    const wasOnline = entry?.link.online ?? false;
    const replaced = entry?.conn;
    if (entry?.conn) {
      // A second connection of the same node replaces the first (the node restarted, or a NAT dropped the old one silently).
      const old = entry.conn;
      entry.conn = undefined;
      this.failPending(old, 'it connected again');
      old.ws.close(CLOSE_REPLACED, 'replaced by a new connection');
    }
    const now = this.now();
    if (!entry) {
      entry = {
        link: { nodeId, online: false, offlineReason: null, version: null, externalIp: null, lastSeen: null, snapshot: null, job: null },
        conn: undefined,
        lastSeenMs: now,
        dirty: false,
        chain: Promise.resolve(),
      };
      this.entries.set(nodeId, entry);
    }
    entry.conn = conn;
    entry.lastSeenMs = now;
    entry.dirty = false; // written with the state change below
    Object.assign(entry.link, {
      online: true,
      offlineReason: null,
      version: hello.version,
      externalIp: conn.ip,
      lastSeen: new Date(now),
      snapshot: hello.snapshot,
      job: validJob(hello.job) ?? null,
    });
    const seen = new Date(now).toISOString();
    this.enqueue(entry, async () => {
      await this.o.pool.query(`UPDATE nodes SET online = true, offline_reason = NULL, version = $2, last_seen = $3 WHERE node_id = $1`, [nodeId, hello.version, seen]);
      const ended = (await this.o.jobs?.reconcile(nodeId, hello.job, hello.snapshot.job)) ?? [];
      // Read after the node's earlier events on this chain were handled: events of them still on their way to the
      // outbox are sent again by the node and stored once (the unique key).
      const last = this.recorder ? { last_event_id: await this.recorder.lastRecorded(nodeId) } : {};
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
    if (!wasOnline) this.emit('node.online', nodeId, { online: true, reason: null });
  }

  private onNodeEvent(entry: Entry, nodeId: string, event: FarmEvent): void {
    // A node speaks for itself only: its node_id, and only its own jobs and results.
    const e = { ...event, data: { ...event.data, node_id: nodeId } } as FarmEvent;
    const foreign = foreignIds(e.data as unknown as Record<string, unknown>, nodeId);
    if (foreign.length > 0) {
      this.stats.foreignEventsRefused++;
      this.o.logger.warn({ node: nodeId, type: e.type, ids: foreign }, "refused a node's event naming a job or result that is not the node's own (dropped: not stored, not sent)");
      // Handled all the same, in the node's order: the node is not asked for it again.
      this.enqueue(entry, () => {
        this.recorder?.dropped(e);
        return Promise.resolve();
      });
      return;
    }
    this.followJob(entry, e);
    const jobs = this.o.jobs;
    if (!jobs) {
      this.publish(e, 'node');
      return;
    }
    // Recorded first, then published (in the node's order, on its chain): the late events of a job the portal
    // ended (a node paused past the limit) go nowhere. Retried while the database is away: a run.finished or
    // job.exited lost to a PostgreSQL restart would leave the job running here.
    this.enqueue(entry, async () => {
      let current = true;
      try {
        current = (await this.untilDatabaseBack(() => jobs.record(e))) !== false;
      } finally {
        if (current) this.publish(e, 'node');
        else {
          this.o.logger.info({ node: nodeId, type: e.type, job: (e.data as { job_uid?: string }).job_uid }, 'dropped a late event of a job the portal ended');
          // Handled all the same: the node is not asked for it again.
          this.recorder?.dropped(e);
        }
      }
    });
  }

  /**
   * The node's job as its ordered events say (NodeLink.job), at once, before the event is folded into the
   * database: a job.exited arrives before the node's answer to the stop that ended it. A job.exited of another
   * job than the one held (an old event replayed after the hello) changes nothing.
   */
  private followJob(entry: Entry, e: FarmEvent): void {
    const uid = (e.data as { job_uid?: unknown }).job_uid;
    if (typeof uid !== 'string') return;
    if (e.type === 'job.started') entry.link.job = { job_uid: uid, status: 'running' };
    else if (e.type === 'job.exited' && (entry.link.job === null || entry.link.job.job_uid === uid)) entry.link.job = { job_uid: uid, status: 'exited' };
  }

  // ---- liveness ------------------------------------------------------------------------------

  private sweep(): void {
    const now = this.now();
    for (const [nodeId, e] of this.entries) {
      if (e.link.online && now - e.lastSeenMs > this.offlineAfterMs) this.goOffline(nodeId, `no heartbeat for ${secs(this.offlineAfterMs)} s`);
    }
    for (const [nodeId, deadline] of this.grace) {
      if (now <= deadline) continue;
      this.grace.delete(nodeId);
      if (this.entries.get(nodeId)?.link.online) continue;
      // It had a job running when the portal stopped and has not come back since: the fault rule applies.
      this.applyFault(this.entryFor(nodeId), nodeId, `not connected for ${secs(this.restartGraceMs)} s after the portal started`);
    }
  }

  private goOffline(nodeId: string, reason: string): void {
    const entry = this.entries.get(nodeId);
    if (!entry || !entry.link.online) return;
    const conn = entry.conn;
    entry.conn = undefined;
    entry.link.online = false;
    entry.link.offlineReason = reason;
    entry.dirty = false; // last_seen goes with the state change
    if (conn) {
      this.failPending(conn, `it went offline (${reason})`);
      // A node that stopped answering may still hold the socket open: cut it, so it reconnects and says hello.
      if (conn.ws.readyState !== conn.ws.CLOSED) conn.ws.terminate();
    }
    const seen = new Date(entry.lastSeenMs).toISOString();
    this.enqueue(
      entry,
      async () => {
        await this.o.pool.query(
          `UPDATE nodes SET online = false, offline_reason = $2, last_seen = greatest(last_seen, $3::timestamptz) WHERE node_id = $1`,
          [nodeId, reason, seen],
        );
      },
      () => (entry.dirty = true), // the next flush writes the state
    );
    this.applyFault(entry, nodeId, reason);
    this.o.logger.warn({ node: nodeId, reason }, 'node offline');
    this.emit('node.offline', nodeId, { online: false, reason });
  }

  private entryFor(nodeId: string): Entry {
    let entry = this.entries.get(nodeId);
    if (!entry) {
      entry = {
        link: { nodeId, online: false, offlineReason: 'not connected since the portal started', version: null, externalIp: null, lastSeen: null, snapshot: null, job: null },
        conn: undefined,
        lastSeenMs: 0,
        dirty: false,
        chain: Promise.resolve(),
      };
      this.entries.set(nodeId, entry);
    }
    return entry;
  }

  /**
   * Run `work`, again and again (back-off 250 ms doubling to 5 s) while it fails because the database cannot be
   * reached, until it succeeds, fails otherwise, or the hub closes. On a node's chain it holds that node's later
   * work, so its events are still recorded in the order they came.
   */
  private async untilDatabaseBack<T>(work: () => Promise<T>): Promise<T> {
    for (let wait = 250; ; wait = Math.min(wait * 2, 5000)) {
      try {
        return await work();
      } catch (e) {
        if (!isDatabaseUnavailable(e) || this.closed) throw e;
        this.o.logger.warn({ err: e, retry_in_ms: wait }, 'the database is away: recording a node event again in a moment');
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  private enqueue(entry: Entry, work: () => Promise<void>, onError?: () => void): void {
    entry.chain = entry.chain.then(work).catch((e: unknown) => {
      this.o.logger.error({ err: e, node: entry.link.nodeId }, 'recording a node\'s state in the database failed');
      onError?.();
    });
  }

  // ---- forwarding ----------------------------------------------------------------------------

  private onResponseHead(conn: Conn, id: number, status: number, headers: Record<string, string>): void {
    const p = conn.pending.get(id);
    if (!p || p.body) return;
    const body = new Readable({ read: () => undefined });
    p.body = body;
    body.once('close', () => {
      // The consumer went away before the end: the node stops sending.
      if (conn.pending.get(id) === p) {
        conn.send({ t: 'cancel', id });
        conn.pending.delete(id);
        p.unlisten();
      }
    });
    p.resolve({ status, headers, body });
  }

  private onChunk(conn: Conn, frame: Buffer): void {
    if (!this.current(conn)) return;
    const { id, bytes } = decodeChunk(frame);
    const p = conn.pending.get(id);
    if (!p?.body) return; // cancelled, or a chunk before its head: dropped
    p.body.push(bytes);
    if (p.body.readableLength > this.maxBuffered) {
      conn.send({ t: 'cancel', id });
      this.settle(
        conn,
        id,
        new FarmError(
          'device_unavailable',
          `the response from node ${conn.nodeId} was cancelled: more than ${this.maxBuffered} bytes waited on the portal for a client reading too slowly`,
        ),
      );
    }
  }

  private onEnd(conn: Conn, id: number, error: string | undefined): void {
    const p = conn.pending.get(id);
    if (!p) return;
    if (!p.body) {
      this.settle(conn, id, new FarmError('device_unavailable', `node ${conn.nodeId} could not answer: ${error ?? 'it ended the request without a response'}`));
      return;
    }
    conn.pending.delete(id);
    p.unlisten();
    if (error) p.body.destroy(new Error(`node ${conn.nodeId} broke off the response: ${error}`));
    else p.body.push(null);
  }

  /** End one forward with an error: rejects it before `res`, destroys its stream after. */
  private settle(conn: Conn, id: number, err: Error): void {
    const p = conn.pending.get(id);
    if (!p) return;
    conn.pending.delete(id);
    p.unlisten();
    if (p.body) p.body.destroy(err);
    else p.reject(err);
  }

  private failPending(conn: Conn, why: string): void {
    for (const id of [...conn.pending.keys()]) {
      this.settle(conn, id, new FarmError('device_unavailable', `node ${conn.nodeId} cannot answer: ${why}`));
    }
  }

  // ---- events --------------------------------------------------------------------------------

  /** Publish an event of the portal's own making about a node (the fault rule's run.finished and job.exited). */
  emitPortalEvent<T extends EventType>(type: T, nodeId: string, data: EventPayloads[T]): void {
    this.emit(type, nodeId, data);
  }

  private emit<T extends EventType>(type: T, nodeId: string, data: EventPayloads[T]): void {
    this.publish({ id: `${this.boot}-${++this.seq}`, type, time: new Date(this.now()).toISOString(), data: { ...data, node_id: nodeId } }, 'portal');
  }

  private publish(e: FarmEvent, from: EventOrigin): void {
    for (const fn of [...this.listeners]) {
      try {
        fn(e, from);
      } catch (err) {
        this.o.logger.error({ err, event: e.id }, 'a hub event listener failed');
      }
    }
  }
}

/** A hello's job, if it is one (a node's word is checked, never trusted to be well formed). */
function validJob(job: unknown): NodeLink['job'] | undefined {
  const j = job as { job_uid?: unknown; status?: unknown } | null | undefined;
  if (!j || typeof j.job_uid !== 'string' || (j.status !== 'running' && j.status !== 'exited')) return undefined;
  return { job_uid: j.job_uid, status: j.status };
}

function abortError(): Error {
  const e = new Error('the request was aborted');
  e.name = 'AbortError';
  return e;
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

/** Seconds, without trailing zeros: 15, 0.6. */
function secs(ms: number): string {
  return String(Math.round(ms) / 1000);
}
