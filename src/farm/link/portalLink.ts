/**
 * The node's side of the node <-> portal connection (protocol.ts; docs/farm.md, "The node's connection").
 * `PortalLink` keeps ONE outbound WebSocket to the portal, so a node behind NAT joins a portal it can reach
 * and the portal never reaches into the lab. This file is the connection's life: it connects to
 * `<portal>/farm/v1/connect` with the node's credential, reconnects with jittered exponential back-off
 * (backoff.ts), says hello, takes the welcome, and stops the jobs the portal says it has already ended.
 * The rest is the other files' concern, each told of the socket's coming and going here:
 *
 * - heartbeat.ts: heartbeats as the welcome asks, and a silent portal cut;
 * - eventStream.ts: the node's events, passed on and replayed at each welcome;
 * - nodeState.ts: the node's state (Node object, availability), published as `node.state` when it changes;
 * - h2Server.ts: forwarded requests, the streams of the HTTP/2 connection in the socket's binary frames, made to
 *   the node's own server with forwardHeaders.ts's header policy.
 * Dependencies go one way: portalLink.ts -> heartbeat, eventStream, nodeState, h2Server -> options, backoff,
 * reasons (and protocol.ts).
 */
import http from 'node:http';
import WebSocket from 'ws';
import type { FarmEvent } from '../../core/events.js';
import {
  CLOSE_REPLACED,
  CONNECT_PATH,
  DEFAULT_HEARTBEAT_SECS,
  PROTOCOL_VERSION,
  protocolMismatch,
  type NodeMessage,
  type PortalMessage,
  type Welcome,
} from '../protocol.js';
import { backoffDelay, DEFAULT_BACKOFF, type BackoffSettings } from './backoff.js';
import { EventStream } from './eventStream.js';
import { WsTunnel } from '../h2Tunnel.js';
import { serveH2 } from './h2Server.js';
import { Heartbeat } from './heartbeat.js';
import type { PortalLinkOptions } from './options.js';
import { closeMeaning, describeError, refusal } from './reasons.js';
import { NodeStatePublisher } from './nodeState.js';

export class PortalLink {
  private readonly backoff: BackoffSettings;
  private readonly connectUrl: string;
  /** The URL as logs show it (no user info). */
  private readonly shownUrl: string;
  private readonly events: EventStream;
  private readonly state: NodeStatePublisher;
  /** Keep-alive connections to the node's own server, for forwarded requests. */
  private readonly agent = new http.Agent({ keepAlive: true });
  /** The current socket's HTTP/2 byte stream and server (forwarded requests), from its open to its close. */
  private h2: { tunnel: WsTunnel; close(): void } | undefined;
  private ws: WebSocket | undefined;
  private stopped = true;
  private attempt = 0;
  /** Welcome received on the current socket. */
  private live = false;
  private readonly heartbeat: Heartbeat;
  private stableTimer: NodeJS.Timeout | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  /** The last failure logged at warn level; repeats go to debug (a portal down for a day is one line, not thousands). */
  private lastFailure: string | undefined;
  private unsubscribe: (() => void) | undefined;
  private connectedCount = 0;
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
    const send = (ws: WebSocket, m: NodeMessage) => this.send(ws, m);
    this.heartbeat = new Heartbeat(o.logger, send);
    this.events = new EventStream(o, send);
    this.state = new NodeStatePublisher({ ...o, debounceMs: o.stateDebounceMs, usageMs: o.stateUsageMs, refreshMs: o.stateRefreshMs });
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
    return this.events.eventsLost;
  }

  /** The last of the node's events the portal acknowledged (folded in a committed transaction); undefined before the first. */
  get lastAcked(): string | undefined {
    return this.events.lastAcked;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    const sub = this.o.events.subscribe((e) => this.passOn(e), { internal: true });
    this.unsubscribe = () => sub.close();
    this.state.start();
    this.o.logger.info({ portal: this.shownUrl }, 'connecting to the portal');
    this.connect();
  }

  /** Send nothing more, abort forwarded requests, close the socket. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    this.unsubscribe?.();
    this.state.stop();
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
    ws.on('open', () => this.hello(ws));
    ws.on('message', (data, isBinary) => {
      if (ws !== this.ws) return;
      this.heartbeat.heard();
      this.onMessage(ws, data as Buffer, isBinary);
    });
    ws.on('pong', () => this.heartbeat.heard());
    ws.on('error', (e) => (why = describeError(e)));
    ws.on('close', (code, reason) => this.onClose(ws, code, reason.toString() || why));
  }

  /** Who the node is; its state follows in the stream (node.state). */
  private hello(ws: WebSocket): void {
    if (ws !== this.ws || ws.readyState !== WebSocket.OPEN) return;
    // The HTTP/2 server first: the portal's connection preface may come before its welcome.
    const tunnel = new WsTunnel(ws);
    const local = new URL(this.o.localUrl);
    const answered = () => this.state.schedule(); // a use of the node changes last_used_by
    this.h2 = { tunnel, ...serveH2(tunnel, { local, delegateSecret: this.o.delegateSecret, agent: this.agent, answered }) };
    this.send(ws, { t: 'hello', protocol: PROTOCOL_VERSION, node_id: this.o.nodeId, version: this.o.version, job: this.o.job() });
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

  /** Forget the current socket: timers, its HTTP/2 session and the requests in it (aborted, nothing sent). */
  private teardown(): void {
    if (this.live) this.o.onState?.(false);
    this.live = false;
    this.ws = undefined;
    this.heartbeat.stop();
    clearTimeout(this.stableTimer);
    this.stableTimer = undefined;
    this.h2?.close();
    this.h2 = undefined;
  }

  private onMessage(ws: WebSocket, data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      this.h2?.tunnel.deliver(data); // the HTTP/2 connection's bytes (forwarded requests)
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
      case 'ack':
        if (this.live) this.events.acked(m.last_event_id);
        break;
      case 'resend':
        // The portal held all it will while its database is away: the events after `after` again, from the journal.
        if (this.live) {
          this.send(ws, { t: 'replay', after: m.after });
          this.events.replay(ws, m.after);
        }
        break;
      default:
        // A newer portal's message: ignored, so the protocol can grow.
        this.o.logger.debug({ type: (m as { t?: unknown }).t }, 'unknown message from the portal; ignored');
    }
  }

  private welcome(ws: WebSocket, w: Welcome): void {
    if (this.live) return; // one welcome per connection; a second would start a second heartbeat
    if (w.protocol !== PROTOCOL_VERSION) {
      this.o.logger.error({ portal_protocol: w.protocol, node_protocol: PROTOCOL_VERSION }, `the portal speaks another protocol version: ${protocolMismatch(w.protocol)}`);
      ws.close(1002, protocolMismatch(w.protocol));
      return;
    }
    this.live = true;
    this.connectedCount++;
    this.lastFailure = undefined;
    this.heartbeat.secs = w.heartbeat_secs > 0 ? w.heartbeat_secs : DEFAULT_HEARTBEAT_SECS;
    this.o.logger.info({ portal: this.shownUrl, heartbeat_secs: this.heartbeat.secs }, 'connected to the portal');
    this.o.onState?.(true);
    this.stableTimer = setTimeout(() => (this.attempt = 0), this.backoff.stableMs);
    this.heartbeat.start(ws);
    this.events.replay(ws, w.last_event_id);
    for (const uid of w.ended_jobs ?? []) void this.endJob(uid);
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

  private passOn(e: FarmEvent): void {
    if (e.type !== 'node.state') this.state.schedule(); // an event may change the state (a job, a reservation)
    if (!this.live || !this.ws) return; // the next connection replays it from the hub's buffer
    this.events.sendEvent(this.ws, e);
  }

  private send(ws: WebSocket, m: NodeMessage): void {
    if (ws.readyState !== WebSocket.OPEN) return;
    ws.send(JSON.stringify(m));
  }
}
