/**
 * The node's side of the node <-> portal connection (protocol.ts; docs/farm.md,
 * "The node's connection"). `PortalLink` keeps ONE outbound WebSocket to the
 * portal, so a node behind NAT joins a portal it can reach and the portal
 * never reaches into the lab:
 *
 * - connects to `<portal>/farm/v1/connect` with the node's credential and
 *   reconnects with jittered exponential back-off (full jitter);
 * - says hello with its v2 Node object, heartbeats as the welcome asks,
 *   passes on every event of the node's hub and a new Node object when the
 *   state changes;
 * - answers forwarded requests by making them to the node's own HTTP server
 *   on loopback, as the portal's user (the delegate secret, http/auth.ts),
 *   and streams the answers back within the socket's backpressure;
 * - stops the jobs the portal says it has already ended.
 *
 * It imports neither Koa nor the daemon: everything it reads comes in as a
 * function (the composition root, src/daemon.ts, wires them).
 */
import http, { type IncomingMessage } from 'node:http';
import WebSocket from 'ws';
import type { EventHub, FarmEvent } from '../core/events.js';
import type { Logger } from '../core/ports.js';
import {
  BASE_URL_HEADER,
  CLOSE_REPLACED,
  CONNECT_PATH,
  decodeChunk,
  DEFAULT_HEARTBEAT_SECS,
  DELEGATE_HEADER,
  encodeChunk,
  MISSED_HEARTBEATS_OFFLINE,
  nodeEventOrder,
  ON_BEHALF_HEADER,
  PROTOCOL_VERSION,
  RECONNECT_CAP_MS,
  type NodeMessage,
  type PortalMessage,
  type RequestHead,
  type Welcome,
} from './protocol.js';

export interface BackoffSettings {
  /** The first retry waits up to this long. */
  baseMs: number;
  /** No wait is longer. */
  capMs: number;
  /** A connection that lasts this long (after the welcome) resets the back-off. */
  stableMs: number;
}

export const DEFAULT_BACKOFF: BackoffSettings = { baseMs: 500, capMs: RECONNECT_CAP_MS, stableMs: 10_000 };

/**
 * "Full jitter" (AWS architecture blog, "Exponential Backoff And Jitter"): a uniform wait in
 * [0, min(cap, base * 2^attempt)). Spreads a lab full of nodes reconnecting after a portal restart.
 */
export function backoffDelay(attempt: number, b: Pick<BackoffSettings, 'baseMs' | 'capMs'>, random: () => number = Math.random): number {
  const ceiling = Math.min(b.capMs, b.baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}

export interface PortalLinkOptions {
  /** The portal's URL as configured (`http(s)://` or `ws(s)://`). */
  portalUrl: string;
  credential: string;
  nodeId: string;
  version: string;
  /** The node's own HTTP server (`http://127.0.0.1:8080`); forwarded requests are made there. */
  localUrl: string;
  /** The secret that makes the node's server believe the on-behalf headers (http/auth.ts DelegateRule). */
  delegateSecret: string;
  /** The node's v2 Node object now (what GET /api/v2/nodes/<id> answers). */
  snapshot: () => Promise<Record<string, unknown>>;
  /** The current job, or the last one. */
  job: () => { job_uid: string; status: 'running' | 'exited' } | null;
  /** Stop a job the portal has ended (resolves when it stopped or stopping was given up). */
  stopJob: (jobUid: string) => Promise<unknown>;
  events: Pick<EventHub, 'subscribe' | 'since' | 'buffered'>;
  logger: Logger;
  /** Told each time the link comes up or goes down (metrics). */
  onState?: (connected: boolean) => void;
  backoff?: Partial<BackoffSettings>;
  random?: () => number;
  /** Snapshots are sent at most this often after a change (default 250 ms). */
  snapshotDebounceMs?: number;
  /** A snapshot is also compared this often, for changes no event announces (default 30 s). */
  snapshotRefreshMs?: number;
}

/** Past this many bytes queued on the socket, forwarded answers pause until it drains below LOW_WATER. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
/** A portal that leaves this much unsent (events, snapshots) is not keeping up: reconnect (events are replayed). */
const MAX_QUEUED_BYTES = 64 * 1024 * 1024;
/**
 * The node gives up on a silent portal after 3 heartbeat intervals, but never sooner than this: a
 * portal busy with a large forwarded answer is not mistaken for a dead one.
 */
const SILENCE_MIN_SECS = 15;
/** Hop-by-hop and identity headers never passed from the portal to the node's server. */
const DROPPED_REQUEST_HEADERS = new Set([
  'host',
  'connection',
  'keep-alive',
  'transfer-encoding',
  'content-length',
  'upgrade',
  'te',
  'trailer',
  'proxy-authorization',
  'authorization',
  'cookie',
  DELEGATE_HEADER,
  ON_BEHALF_HEADER,
  BASE_URL_HEADER,
]);
const DROPPED_RESPONSE_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'trailer']);

/** A forwarded request in flight. */
interface Forwarded {
  req: http.ClientRequest;
  res?: IncomingMessage;
}

export class PortalLink {
  private readonly backoff: BackoffSettings;
  private readonly connectUrl: string;
  /** The URL as logs show it (no user info). */
  private readonly shownUrl: string;
  private readonly local: URL;
  private readonly agent = new http.Agent({ keepAlive: true });
  private ws: WebSocket | undefined;
  private stopped = true;
  private attempt = 0;
  /** Welcome received on the current socket. */
  private live = false;
  private heartbeatSecs = DEFAULT_HEARTBEAT_SECS;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private stableTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  private snapshotTimer: NodeJS.Timeout | undefined;
  private snapshotBuilding = false;
  private snapshotAgain = false;
  private refreshTimer: NodeJS.Timeout | undefined;
  /** Heartbeat ticks since the portal was last heard from (any message or pong). */
  private silentTicks = 0;
  private lastSnapshot: string | undefined;
  /**
   * The last event handed to a socket: the next connection resumes after it when the portal's welcome does
   * not say which of the node's events it has recorded (an older portal).
   */
  private lastEventId: string | undefined;
  /** Events gone from the buffer before a portal recorded them (the portal was away longer than the buffer holds). */
  private lostCount = 0;
  /** The last failure logged at warn level; repeats go to debug (a portal down for a day is one line, not thousands). */
  private lastFailure: string | undefined;
  private readonly inflight = new Map<number, Forwarded>();
  private readonly paused = new Set<IncomingMessage>();
  private unsubscribe: (() => void) | undefined;
  private connectedCount = 0;
  private pausedCount = 0;
  private replacedBy: string | undefined;

  constructor(private readonly o: PortalLinkOptions) {
    this.backoff = { ...DEFAULT_BACKOFF, ...o.backoff };
    const u = new URL(o.portalUrl);
    u.protocol = u.protocol === 'https:' || u.protocol === 'wss:' ? 'wss:' : 'ws:';
    u.pathname = u.pathname.replace(/\/+$/, '') + CONNECT_PATH;
    u.search = '';
    u.hash = '';
    this.connectUrl = u.toString();
    u.username = u.password = '';
    this.shownUrl = u.toString();
    this.local = new URL(o.localUrl);
  }

  /** Whether the portal has welcomed the node on the current connection. */
  get connected(): boolean {
    return this.live;
  }

  /** Welcomes received since start (tests wait on a reconnection with it). */
  get connections(): number {
    return this.connectedCount;
  }

  /**
   * Set when the portal closed this node's current connection for a newer one of the same node id: another
   * process uses this node's id and credential. The link then stays down (it would take the id back and be
   * taken again, forever) until the node is restarted.
   */
  get replaced(): string | undefined {
    return this.replacedBy;
  }

  /** Events the portal never got: gone from the node's buffer (events.buffer_size) before it recorded them. */
  get eventsLost(): number {
    return this.lostCount;
  }

  /** Times a forwarded answer was paused because the socket's queue was full (backpressure engaged). */
  get answersPaused(): number {
    return this.pausedCount;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    const sub = this.o.events.subscribe((e) => this.passOn(e));
    this.unsubscribe = () => sub.close();
    this.o.logger.info({ portal: this.shownUrl }, 'connecting to the portal');
    this.connect();
  }

  /** Send nothing more, abort forwarded requests, close the socket. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.unsubscribe?.();
    clearTimeout(this.retryTimer);
    const ws = this.ws;
    this.teardown();
    this.agent.destroy();
    if (!ws || ws.readyState === WebSocket.CLOSED) return;
    const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
    if (ws.readyState === WebSocket.CONNECTING) ws.terminate();
    else ws.close(1001, 'node shutting down');
    // A portal that never answers the close frame does not hold the shutdown.
    const late = setTimeout(() => ws.terminate(), 2000);
    await closed;
    clearTimeout(late);
  }

  // ------------------------------------------------------------ the connection

  private connect(): void {
    if (this.stopped) return;
    const ws = new WebSocket(this.connectUrl, {
      headers: { Authorization: `node ${this.o.credential}`, 'X-Farmhand-Node': this.o.nodeId },
      handshakeTimeout: 15_000,
      perMessageDeflate: false,
      maxPayload: 64 * 1024 * 1024,
    });
    this.ws = ws;
    let why = '';
    ws.on('open', () => void this.hello(ws));
    ws.on('message', (data, isBinary) => {
      if (ws !== this.ws) return;
      this.silentTicks = 0;
      this.onMessage(ws, data as Buffer, isBinary);
    });
    ws.on('pong', () => (this.silentTicks = 0));
    ws.on('error', (e) => (why = describeError(e)));
    ws.on('close', (code, reason) => this.onClose(ws, code, reason.toString() || why));
  }

  private async hello(ws: WebSocket): Promise<void> {
    let snapshot: Record<string, unknown>;
    try {
      snapshot = await this.o.snapshot();
    } catch (e) {
      this.o.logger.error({ err: e }, 'could not build the node snapshot for the portal; reconnecting');
      ws.terminate();
      return;
    }
    if (ws !== this.ws || ws.readyState !== WebSocket.OPEN) return;
    this.lastSnapshot = JSON.stringify(snapshot);
    const localIp = typeof snapshot.local_ip_address === 'string' ? snapshot.local_ip_address : null;
    this.send(ws, { t: 'hello', protocol: PROTOCOL_VERSION, node_id: this.o.nodeId, version: this.o.version, snapshot, local_ip: localIp, job: this.o.job() });
  }

  private onClose(ws: WebSocket, code: number, reason: string): void {
    if (ws !== this.ws) return;
    const wasLive = this.live;
    this.teardown();
    if (this.stopped) return;
    if (code === CLOSE_REPLACED) {
      // Only this socket is ours, so a newer connection with our id is another process: two nodes share an id.
      this.replacedBy = reason || 'replaced by a new connection';
      this.o.logger.error(
        { code, reason },
        `the portal took this node's connection for a newer one with the same node id (${this.o.nodeId}): another node uses this node's id and credential. Not reconnecting: give each node its own node_id and credential ('farmhand farm node add <node_id>'), then restart this one`,
      );
      return;
    }
    const delay = backoffDelay(this.attempt++, this.backoff, this.o.random);
    const detail = { code, reason: reason || closeMeaning(code), retry_in_ms: delay };
    if (wasLive) {
      this.o.logger.warn(detail, 'disconnected from the portal');
      this.lastFailure = undefined;
    } else {
      const failure = refusal(reason) ?? `could not connect to the portal: ${reason || closeMeaning(code)}`;
      if (failure !== this.lastFailure) this.o.logger.warn(detail, failure);
      else this.o.logger.debug(detail, failure);
      this.lastFailure = failure;
    }
    this.retryTimer = setTimeout(() => this.connect(), delay);
  }

  /** Forget the current socket: timers, in-flight requests (aborted, nothing sent). */
  private teardown(): void {
    if (this.live) this.o.onState?.(false);
    this.live = false;
    this.ws = undefined;
    clearInterval(this.heartbeatTimer);
    clearInterval(this.refreshTimer);
    clearTimeout(this.stableTimer);
    clearTimeout(this.snapshotTimer);
    this.heartbeatTimer = this.refreshTimer = this.stableTimer = this.snapshotTimer = undefined;
    this.snapshotBuilding = this.snapshotAgain = false;
    for (const [id, f] of this.inflight) this.abortForwarded(id, f);
    this.paused.clear();
  }

  private onMessage(ws: WebSocket, data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      this.requestBody(data);
      return;
    }
    let m: PortalMessage;
    try {
      m = JSON.parse(data.toString('utf8')) as PortalMessage;
    } catch {
      this.o.logger.warn({ bytes: data.length }, 'the portal sent a text frame that is not JSON; ignored');
      return;
    }
    switch (m.t) {
      case 'welcome':
        this.welcome(ws, m);
        break;
      case 'req':
        this.forward(ws, m);
        break;
      case 'req_end':
        this.inflight.get(m.id)?.req.end();
        break;
      case 'cancel': {
        const f = this.inflight.get(m.id);
        if (f) this.abortForwarded(m.id, f);
        break;
      }
      default:
        // A newer portal's message: ignored, so the protocol can grow.
        this.o.logger.debug({ type: (m as { t?: unknown }).t }, 'unknown message from the portal; ignored');
    }
  }

  private welcome(ws: WebSocket, w: Welcome): void {
    if (this.live) return; // one welcome per connection; a second would start a second heartbeat
    if (w.protocol !== PROTOCOL_VERSION) {
      this.o.logger.error({ portal_protocol: w.protocol, node_protocol: PROTOCOL_VERSION }, 'the portal speaks another protocol version; upgrade the older of the two');
      ws.close(1002, 'protocol version mismatch');
      return;
    }
    this.live = true;
    this.connectedCount++;
    this.lastFailure = undefined;
    this.heartbeatSecs = w.heartbeat_secs > 0 ? w.heartbeat_secs : DEFAULT_HEARTBEAT_SECS;
    this.o.logger.info({ portal: this.shownUrl, heartbeat_secs: this.heartbeatSecs }, 'connected to the portal');
    this.o.onState?.(true);
    this.stableTimer = setTimeout(() => (this.attempt = 0), this.backoff.stableMs);
    this.silentTicks = 0;
    this.heartbeatTimer = setInterval(() => this.heartbeat(ws), this.heartbeatSecs * 1000);
    this.refreshTimer = setInterval(() => this.scheduleSnapshot(), this.o.snapshotRefreshMs ?? 30_000);
    this.replayEvents(ws, w.last_event_id);
    for (const uid of w.ended_jobs ?? []) void this.endJob(uid);
  }

  private heartbeat(ws: WebSocket): void {
    // A portal silent for 3 intervals, and at least SILENCE_MIN_SECS (a half-open TCP connection, a stopped
    // process), is gone: reconnect. Each heartbeat carries a ping, which any live WebSocket peer answers.
    const limit = Math.max(MISSED_HEARTBEATS_OFFLINE, Math.ceil(SILENCE_MIN_SECS / this.heartbeatSecs));
    if (++this.silentTicks > limit) {
      this.o.logger.warn({ silent_secs: Math.round(limit * this.heartbeatSecs) }, 'the portal stopped answering; reconnecting');
      ws.terminate();
      return;
    }
    this.send(ws, { t: 'hb' });
    ws.ping();
  }

  /** The portal has ended this job (it had marked the node offline): stop it here too. */
  private async endJob(uid: string): Promise<void> {
    const job = this.o.job();
    if (!job || job.job_uid !== uid || job.status !== 'running') return;
    this.o.logger.warn({ job: uid }, 'the portal ended this job while the node was disconnected from it: stopping it');
    try {
      await this.o.stopJob(uid);
    } catch (e) {
      this.o.logger.error({ err: e, job: uid }, 'could not stop the job the portal ended');
    }
  }

  // ------------------------------------------------------------ events and snapshots

  private passOn(e: FarmEvent): void {
    if (!this.live || !this.ws) return; // the next connection replays it from the hub's buffer
    this.sendEvent(this.ws, e);
    this.scheduleSnapshot();
  }

  /**
   * Every event the portal has not recorded, from the hub's buffer (bounded: the oldest may be gone). The welcome
   * names the last event the portal recorded (`recorded`): the node sends those after it, so an event handed to a
   * socket in the instant the portal died is sent again (the portal stores it once). An older portal says
   * nothing (undefined): the node resumes after the last event it handed to a socket.
   */
  private replayEvents(ws: WebSocket, recorded: string | null | undefined): void {
    const from = recorded === undefined ? this.lastEventId : recorded ?? undefined;
    // None recorded, or a first connection to an older portal: every event since the node started (start-up's recovery too).
    const r = from === undefined ? { events: this.o.events.buffered(), missed: null } : this.o.events.since(from);
    if (r.missed?.reason === 'restarted') {
      // The portal's last is of an earlier run of this node: what that run sent, it sent; this run's events all go.
      this.o.logger.debug({ last_event_id: r.missed.last_event_id }, "the portal's last recorded event is of an earlier run of this node; passing on this run's events");
    } else if (r.missed) {
      const lost = lostBetween(r.missed.last_event_id, r.missed.oldest_event_id);
      if (lost !== null) this.lostCount += lost;
      this.o.logger.warn(
        { reason: r.missed.reason, last_event_id: r.missed.last_event_id, oldest_event_id: r.missed.oldest_event_id, lost },
        'events published while the portal was unreachable are gone from the buffer (events.buffer_size) before the portal recorded them; passing on those kept',
      );
    }
    for (const e of r.events) this.sendEvent(ws, e);
    if (r.events.length) this.scheduleSnapshot();
  }

  private sendEvent(ws: WebSocket, e: FarmEvent): void {
    if (ws.bufferedAmount > MAX_QUEUED_BYTES) {
      this.o.logger.warn({ queued_bytes: ws.bufferedAmount }, 'the portal is not reading what the node sends; reconnecting');
      ws.terminate();
      return;
    }
    this.send(ws, { t: 'event', event: e });
    this.lastEventId = e.id;
  }

  /** Send the Node object soon, if it changed (several changes in a row make one message). */
  private scheduleSnapshot(): void {
    if (!this.live) return;
    if (this.snapshotBuilding) {
      this.snapshotAgain = true; // the one being built may have read the state before this change
      return;
    }
    if (this.snapshotTimer) return;
    const ws = this.ws!;
    this.snapshotTimer = setTimeout(() => void this.buildSnapshot(ws), this.o.snapshotDebounceMs ?? 250);
  }

  private async buildSnapshot(ws: WebSocket): Promise<void> {
    this.snapshotTimer = undefined;
    this.snapshotBuilding = true;
    try {
      const snapshot = await this.o.snapshot();
      const text = JSON.stringify(snapshot);
      if (ws === this.ws && this.live && text !== this.lastSnapshot) {
        this.lastSnapshot = text;
        this.send(ws, { t: 'snapshot', snapshot });
      }
    } catch (e) {
      this.o.logger.warn({ err: e }, 'could not build the node snapshot for the portal');
    }
    if (ws !== this.ws) return; // teardown reset the flags for the next connection
    this.snapshotBuilding = false;
    if (this.snapshotAgain) {
      this.snapshotAgain = false;
      this.scheduleSnapshot();
    }
  }

  // ------------------------------------------------------------ forwarded requests

  private forward(ws: WebSocket, m: RequestHead): void {
    if (this.inflight.has(m.id)) {
      this.send(ws, { t: 'end', id: m.id, error: `request id ${m.id} is already in flight` });
      return;
    }
    // Only a path: never an absolute URL or `//host`, which would leave the node.
    if (typeof m.path !== 'string' || !m.path.startsWith('/') || m.path.startsWith('//')) {
      this.send(ws, { t: 'end', id: m.id, error: 'the forwarded path must start with a single /' });
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(m.headers ?? {})) if (!DROPPED_REQUEST_HEADERS.has(k.toLowerCase())) headers[k] = v;
    headers[DELEGATE_HEADER] = this.o.delegateSecret;
    headers[ON_BEHALF_HEADER] = m.user;
    headers[BASE_URL_HEADER] = m.base_url;
    let req: http.ClientRequest;
    try {
      req = http.request({ protocol: this.local.protocol, hostname: this.local.hostname, port: this.local.port, method: m.method, path: m.path, headers, agent: this.agent });
    } catch (e) {
      this.send(ws, { t: 'end', id: m.id, error: `bad request: ${describeError(e)}` });
      return;
    }
    const f: Forwarded = { req };
    this.inflight.set(m.id, f);
    const fail = (e: unknown) => {
      if (this.inflight.get(m.id) !== f) return; // cancelled, or the connection went
      this.inflight.delete(m.id);
      if (f.res) this.paused.delete(f.res);
      this.send(ws, { t: 'end', id: m.id, error: `the node's answer broke off: ${describeError(e)}` });
    };
    req.on('error', fail);
    req.on('response', (res) => {
      f.res = res;
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) {
        if (v === undefined || DROPPED_RESPONSE_HEADERS.has(k)) continue;
        out[k] = Array.isArray(v) ? v.join(', ') : v;
      }
      this.send(ws, { t: 'res', id: m.id, status: res.statusCode ?? 502, headers: out });
      res.on('data', (chunk: Buffer) => {
        if (this.inflight.get(m.id) !== f) return;
        ws.send(encodeChunk(m.id, chunk), () => this.drained(ws));
        if (ws.bufferedAmount > HIGH_WATER && !this.paused.has(res)) {
          this.pausedCount++;
          res.pause();
          this.paused.add(res);
        }
      });
      res.on('end', () => {
        if (this.inflight.get(m.id) !== f) return;
        this.inflight.delete(m.id);
        this.send(ws, { t: 'end', id: m.id });
        this.scheduleSnapshot(); // a use of the node changes last_used_by
      });
      res.on('error', fail);
      res.on('close', () => {
        if (!res.complete) fail(new Error('the connection to the node closed before the answer was complete'));
      });
    });
    if (!m.has_body) req.end();
  }

  private requestBody(frame: Buffer): void {
    let chunk: { id: number; bytes: Buffer };
    try {
      chunk = decodeChunk(frame);
    } catch (e) {
      this.o.logger.warn({ err: e }, 'bad binary frame from the portal; ignored');
      return;
    }
    this.inflight.get(chunk.id)?.req.write(chunk.bytes);
  }

  /** A send went out: resume the paused answers once the socket's queue is low again. */
  private drained(ws: WebSocket): void {
    if (ws !== this.ws || this.paused.size === 0 || ws.bufferedAmount > LOW_WATER) return;
    for (const res of this.paused) res.resume();
    this.paused.clear();
  }

  private abortForwarded(id: number, f: Forwarded): void {
    this.inflight.delete(id);
    if (f.res) this.paused.delete(f.res);
    f.req.destroy();
  }

  private send(ws: WebSocket, m: NodeMessage): void {
    if (ws.readyState !== WebSocket.OPEN) return;
    ws.send(JSON.stringify(m), () => this.drained(ws));
  }
}

/** How many events lie between two ids of one run (`<boot>-<n>`): those a resume missed; null when unknown. */
function lostBetween(last: string, oldest: string | null): number | null {
  const a = nodeEventOrder(last);
  const b = oldest === null ? null : nodeEventOrder(oldest);
  if (!a || !b || a[0] !== b[0]) return null;
  return Math.max(0, b[1] - a[1] - 1);
}

function describeError(e: unknown): string {
  if (e instanceof Error) return (e as NodeJS.ErrnoException).code ? `${(e as NodeJS.ErrnoException).code}: ${e.message}` : e.message;
  return String(e);
}

/** A refused upgrade says what to do: the credential, or the node's registration. */
function refusal(reason: string): string | undefined {
  const m = /Unexpected server response: (\d+)/.exec(reason);
  if (!m) return undefined;
  const status = Number(m[1]);
  if (status === 401 || status === 403) {
    return `the portal refused the node's credential (${status}): register the node on the portal ('farmhand farm node add <node_id>') and put the credential it prints in portal.node_credential_file; retrying`;
  }
  return `the portal refused the connection (${status}); retrying`;
}

function closeMeaning(code: number): string {
  if (code === 1001) return 'the portal is going away';
  if (code === 1006) return 'the connection was lost';
  return `closed (${code})`;
}
