/**
 * A node of the farm as a raw WebSocket client speaking the real protocol
 * (src/farm/protocol.ts): for the hub's and portal's tests and the heartbeat
 * bench. It says hello, heartbeats when asked, records what the portal sends,
 * and answers forwarded requests through `onRequest` (default: 404 JSON).
 */
import { WebSocket } from 'ws';
import {
  CONNECT_PATH,
  PROTOCOL_VERSION,
  decodeChunk,
  encodeChunk,
  type Hello,
  type NodeMessage,
  type PortalMessage,
  type RequestHead,
  type Welcome,
} from '../../src/farm/protocol.js';
import type { FarmEvent } from '../../src/core/events.js';

export interface SimRequest {
  head: RequestHead;
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
  /** Answer a forwarded request; `reply` sends res, chunks, end. */
  onRequest?: (req: SimRequest, reply: SimReply) => void;
}

export interface SimReply {
  head(status: number, headers?: Record<string, string>): void;
  chunk(bytes: Uint8Array): void;
  end(error?: string): void;
}

export class SimNode {
  readonly received: PortalMessage[] = [];
  readonly cancelled = new Set<number>();
  welcome: Welcome | undefined;
  closed: { code: number; reason: string } | undefined;
  private sock: WebSocket | undefined;
  private get ws(): WebSocket {
    if (!this.sock) throw new Error('not connected');
    return this.sock;
  }
  private hbTimer: NodeJS.Timeout | undefined;
  private readonly bodies = new Map<number, { head: RequestHead; chunks: Buffer[] }>();

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
    });
    return new Promise((resolve, reject) => {
      this.ws.once('open', () => {
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

  private onMessage(data: Buffer, isBinary: boolean): void {
    if (isBinary) {
      const { id, bytes } = decodeChunk(data);
      this.bodies.get(id)?.chunks.push(Buffer.from(bytes));
      return;
    }
    const m = JSON.parse(data.toString('utf8')) as PortalMessage;
    this.received.push(m);
    switch (m.t) {
      case 'welcome':
        this.welcome = m;
        return;
      case 'req':
        this.bodies.set(m.id, { head: m, chunks: [] });
        if (!m.has_body) this.dispatch(m.id);
        return;
      case 'req_end':
        this.dispatch(m.id);
        return;
      case 'cancel':
        this.cancelled.add(m.id);
        return;
    }
  }

  private dispatch(id: number): void {
    const b = this.bodies.get(id);
    if (!b) return;
    this.bodies.delete(id);
    const reply: SimReply = {
      head: (status, headers = {}) => this.send({ t: 'res', id, status, headers }),
      chunk: (bytes) => {
        if (this.ws.readyState === WebSocket.OPEN) this.ws.send(encodeChunk(id, bytes));
      },
      end: (error) => this.send(error === undefined ? { t: 'end', id } : { t: 'end', id, error }),
    };
    const handler =
      this.o.onRequest ??
      ((_req: SimRequest, r: SimReply) => {
        r.head(404, { 'content-type': 'application/json' });
        r.chunk(Buffer.from(JSON.stringify({ error: 'not_found', message: 'sim node' })));
        r.end();
      });
    handler({ head: b.head, body: Buffer.concat(b.chunks) }, reply);
  }
}
