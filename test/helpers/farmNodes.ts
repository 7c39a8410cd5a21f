/**
 * A node of the farm as a raw WebSocket client speaking the real protocol
 * (src/farm/protocol.ts): for the hub's and portal's tests and the heartbeat
 * bench. It says hello, heartbeats when asked, records what the portal sends,
 * and answers forwarded requests (the streams of the HTTP/2 server it runs on
 * the socket's binary frames, as a node does) through `onRequest` (default:
 * 404 JSON). A hostile node's test reaches the raw stream and session.
 */
import http2 from 'node:http2';
import { WebSocket } from 'ws';
import { WsTunnel } from '../../src/farm/h2Tunnel.js';
import {
  CONNECT_PATH,
  FORWARD_BASE_URL_HEADER,
  FORWARD_USER_HEADER,
  PROTOCOL_VERSION,
  type Hello,
  type NodeMessage,
  type PortalMessage,
  type Welcome,
} from '../../src/farm/protocol.js';
import type { FarmEvent } from '../../src/core/events.js';

/** A forwarded request as the node gets it (its stream's id and headers). */
export interface SimHead {
  id: number;
  method: string;
  path: string;
  headers: Record<string, string>;
  user: string;
  base_url: string;
}

export interface SimRequest {
  head: SimHead;
  body: Buffer;
}

export interface SimNodeOptions {
  portalUrl: string;
  nodeId: string;
  credential: string;
  /** The Node object of the node.state sent after the hello. */
  snapshot?: Record<string, unknown>;
  /** The node.state's typed availability; `available` by default. */
  availability?: unknown;
  job?: Hello['job'];
  /** Answer a forwarded request (when its body is complete); `reply` sends the head, chunks, the end. */
  onRequest?: (req: SimRequest, reply: SimReply) => void;
  /** The settings of the node's HTTP/2 server (a hostile node's). */
  h2Settings?: http2.Settings;
  /** No HTTP/2 server: the binary frames the portal sends are kept in `rawIn`, and the test writes its own (`raw`). */
  rawH2?: boolean;
}

export interface SimReply {
  head(status: number, headers?: Record<string, string | string[]>): void;
  /** False when the stream's window is full (the portal has not read what came). */
  chunk(bytes: Uint8Array): boolean;
  /** The end of the answer; with an error, the stream is reset instead. */
  end(error?: string): void;
  /** The raw stream (a hostile node's test). */
  stream: http2.ServerHttp2Stream;
}

export class SimNode {
  readonly received: PortalMessage[] = [];
  /** Every forwarded request, at its stream's opening. */
  readonly requests: SimHead[] = [];
  /** The streams (their ids) the portal reset before the node ended them: its client went away. */
  readonly cancelled = new Set<number>();
  /** The binary frames received, with `rawH2`. */
  readonly rawIn: Buffer[] = [];
  /** The HTTP/2 session of the current connection. */
  session: http2.ServerHttp2Session | undefined;
  private tunnel: WsTunnel | undefined;
  welcome: Welcome | undefined;
  closed: { code: number; reason: string } | undefined;
  private sock: WebSocket | undefined;
  private get ws(): WebSocket {
    if (!this.sock) throw new Error('not connected');
    return this.sock;
  }
  private hbTimer: NodeJS.Timeout | undefined;

  constructor(readonly o: SimNodeOptions) {}

  /** Open the connection; resolves when open (or rejects with the HTTP status of a refused upgrade). */
  connect(opts: { hello?: boolean } = {}): Promise<void> {
    const url = `${this.o.portalUrl.replace(/^http/, 'ws')}${CONNECT_PATH}`;
    this.welcome = undefined;
    this.closed = undefined;
    this.sock = new WebSocket(url, { headers: { Authorization: `node ${this.o.credential}`, 'X-Farmhand-Node': this.o.nodeId } });
    this.ws.on('message', (data, isBinary) => this.onMessage(data as Buffer, isBinary));
    this.ws.on('close', (code, reason) => {
      this.closed = { code, reason: reason.toString() };
      this.stopHeartbeats();
      this.tunnel?.destroy();
    });
    return new Promise((resolve, reject) => {
      this.ws.once('open', () => {
        if (!this.o.rawH2) this.serve();
        if (opts.hello !== false) this.hello();
        resolve();
      });
      this.ws.once('unexpected-response', (_req, res) => reject(Object.assign(new Error(`upgrade refused: ${res.statusCode}`), { status: res.statusCode })));
      this.ws.once('error', reject);
    });
  }

  private states = 0;

  /** Hello, then the node's state (node.state in its stream, as a real node's replay brings it). */
  hello(): void {
    this.send({ t: 'hello', protocol: PROTOCOL_VERSION, node_id: this.o.nodeId, version: 'sim-1', job: this.o.job ?? null });
    this.state(this.o.snapshot ?? { node_id: this.o.nodeId, online: true, available: true, not_available_reason: null, job: null }, this.o.availability);
  }

  /**
   * A node.state event (its id is not of the `<boot>-<n>` form, so it moves no cursor and the test's own events keep
   * theirs).
   */
  state(node: Record<string, unknown>, availability: unknown = { kind: 'available', detail: null }): void {
    this.event({ id: `sim.state.${++this.states}`, type: 'node.state', time: new Date().toISOString(), data: { node_id: this.o.nodeId, node, availability } } as FarmEvent);
  }

  send(m: NodeMessage): void {
    this.ws.send(JSON.stringify(m));
  }

  /** Bytes of the HTTP/2 connection, as the node's (a hostile node writing its own frames). */
  raw(bytes: Buffer): void {
    this.ws.send(bytes, { binary: true });
  }

  heartbeat(): void {
    this.send({ t: 'hb' });
  }

  event(e: FarmEvent): void {
    this.send({ t: 'event', event: e });
  }

  /** Heartbeat every `secs` (the welcome's interval by default) until stopped or closed. */
  startHeartbeats(secs?: number): void {
    this.stopHeartbeats();
    const ms = (secs ?? this.welcome?.heartbeat_secs ?? 5) * 1000;
    this.hbTimer = setInterval(() => {
      if (this.ws.readyState === WebSocket.OPEN) this.heartbeat();
    }, ms);
  }

  stopHeartbeats(): void {
    clearInterval(this.hbTimer);
    this.hbTimer = undefined;
  }

  close(): Promise<void> {
    this.stopHeartbeats();
    if (!this.sock || this.ws.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise((resolve) => {
      this.ws.once('close', () => resolve());
      this.ws.close();
    });
  }

  /** Drop the connection without a closing handshake (a killed process). */
  kill(): void {
    this.stopHeartbeats();
    this.sock?.terminate();
  }

  /** The node's HTTP/2 server on the socket's binary frames (src/farm/link/h2Server.ts's, without the local server). */
  private serve(): void {
    const tunnel = (this.tunnel = new WsTunnel(this.ws));
    const server = http2.createServer({ settings: { enablePush: false, ...this.o.h2Settings }, maxSendHeaderBlockLength: 1 << 24 });
    server.on('session', (s) => {
      this.session = s;
      s.on('error', () => undefined);
    });
    server.on('stream', (stream, h) => {
      stream.on('error', () => undefined);
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(h)) if (!k.startsWith(':') && v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
      const head: SimHead = {
        id: stream.id ?? 0,
        method: String(h[':method']),
        path: String(h[':path']),
        headers,
        user: String(h[FORWARD_USER_HEADER] ?? ''),
        base_url: String(h[FORWARD_BASE_URL_HEADER] ?? ''),
      };
      this.requests.push(head);
      let ended = false;
      stream.on('close', () => {
        // Reset by the portal (CANCEL when its client's signal aborted, NO_ERROR when the answer's reader went) before the end.
        if (!ended && stream.rstCode !== undefined && this.closed === undefined) this.cancelled.add(head.id);
      });
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => this.dispatch({ head, body: Buffer.concat(chunks) }, stream, () => (ended = true)));
    });
    server.emit('connection', tunnel);
  }

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      if (this.o.rawH2) this.rawIn.push(Buffer.from(data));
      else this.tunnel?.deliver(data);
      return;
    }
    const m = JSON.parse(data.toString('utf8')) as PortalMessage;
    this.received.push(m);
    switch (m.t) {
      case 'welcome':
        this.welcome = m;
        return;
    }
  }

  private dispatch(req: SimRequest, stream: http2.ServerHttp2Stream, ended: () => void): void {
    const reply: SimReply = {
      head: (status, headers = {}) => {
        if (!stream.destroyed) stream.respond({ ':status': status, ...headers });
      },
      chunk: (bytes) => (stream.destroyed ? false : stream.write(bytes)),
      end: (error) => {
        ended();
        if (stream.destroyed) return;
        if (error === undefined) stream.end();
        else stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      },
      stream,
    };
    const handler =
      this.o.onRequest ??
      ((_req: SimRequest, r: SimReply) => {
        r.head(404, { 'content-type': 'application/json' });
        r.chunk(Buffer.from(JSON.stringify({ error: 'not_found', message: 'sim node' })));
        r.end();
      });
    handler(req, reply);
  }
}
