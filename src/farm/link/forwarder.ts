/**
 * The node's side of the portal connection, forwarded requests (docs/farm.md, "The node's connection"): each
 * `req` from the portal is made to the node's own HTTP server on loopback, as the portal's user (the delegate
 * secret, http/auth.ts), and its answer is streamed back within the socket's backpressure: past HIGH_WATER
 * bytes queued on the socket the answers pause until it drains below LOW_WATER. Knows nothing of the
 * connection's life: portalLink.ts hands it each message and tells it when the socket goes.
 */
import http, { type IncomingMessage } from 'node:http';
import type WebSocket from 'ws';
import { BASE_URL_HEADER, decodeChunk, DELEGATE_HEADER, encodeChunk, ON_BEHALF_HEADER, type NodeMessage, type RequestHead } from '../protocol.js';
import type { Logger } from '../../core/ports.js';
import { describeError } from './reasons.js';
import { WsTunnel } from '../h2Tunnel.js';
import { serveH2 } from './h2Server.js';

/** Past this many bytes queued on the socket, forwarded answers pause until it drains below LOW_WATER. */
const HIGH_WATER = 1024 * 1024;
const LOW_WATER = 256 * 1024;
/** Hop-by-hop and identity headers never passed from the portal to the node's server. */
export const DROPPED_REQUEST_HEADERS = new Set([
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
export const DROPPED_RESPONSE_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'trailer']);

/** A forwarded request in flight. */
interface Forwarded {
  req: http.ClientRequest;
  res?: IncomingMessage;
}

export interface ForwarderOptions {
  /** The node's own HTTP server. */
  local: URL;
  delegateSecret: string;
  logger: Logger;
  /** The link's current socket (a drain of an older one resumes nothing). */
  current: () => WebSocket | undefined;
  /** Send a message on `ws` (the link's send: it calls drained when the message went out). */
  send: (ws: WebSocket, m: NodeMessage) => void;
  /** A forwarded answer ended complete (a use of the node changes last_used_by). */
  answered: () => void;
}

export class Forwarder {
  private readonly agent = new http.Agent({ keepAlive: true });
  private readonly inflight = new Map<number, Forwarded>();
  private readonly paused = new Set<IncomingMessage>();
  private pausedCount = 0;

  constructor(private readonly o: ForwarderOptions) {}

  /** Times a forwarded answer was paused because the socket's queue was full (backpressure engaged). */
  get answersPaused(): number {
    return this.pausedCount;
  }

  forward(ws: WebSocket, m: RequestHead): void {
    const send = this.o.send;
    if (this.inflight.has(m.id)) {
      send(ws, { t: 'end', id: m.id, error: `request id ${m.id} is already in flight` });
      return;
    }
    // Only a path: never an absolute URL or `//host`, which would leave the node.
    if (typeof m.path !== 'string' || !m.path.startsWith('/') || m.path.startsWith('//')) {
      send(ws, { t: 'end', id: m.id, error: 'the forwarded path must start with a single /' });
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(m.headers ?? {})) if (!DROPPED_REQUEST_HEADERS.has(k.toLowerCase())) headers[k] = v;
    headers[DELEGATE_HEADER] = this.o.delegateSecret;
    headers[ON_BEHALF_HEADER] = m.user;
    headers[BASE_URL_HEADER] = m.base_url;
    let req: http.ClientRequest;
    try {
      const local = this.o.local;
      req = http.request({ protocol: local.protocol, hostname: local.hostname, port: local.port, method: m.method, path: m.path, headers, agent: this.agent });
    } catch (e) {
      send(ws, { t: 'end', id: m.id, error: `bad request: ${describeError(e)}` });
      return;
    }
    const f: Forwarded = { req };
    this.inflight.set(m.id, f);
    const fail = (e: unknown) => {
      if (this.inflight.get(m.id) !== f) return; // cancelled, or the connection went
      this.inflight.delete(m.id);
      if (f.res) this.paused.delete(f.res);
      send(ws, { t: 'end', id: m.id, error: `the node's answer broke off: ${describeError(e)}` });
    };
    req.on('error', fail);
    req.on('response', (res) => {
      f.res = res;
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries(res.headers)) {
        if (v === undefined || DROPPED_RESPONSE_HEADERS.has(k)) continue;
        out[k] = Array.isArray(v) ? v.join(', ') : v;
      }
      send(ws, { t: 'res', id: m.id, status: res.statusCode ?? 502, headers: out });
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
        send(ws, { t: 'end', id: m.id });
        this.o.answered();
      });
      res.on('error', fail);
      res.on('close', () => {
        if (!res.complete) fail(new Error('the connection to the node closed before the answer was complete'));
      });
    });
    if (!m.has_body) req.end();
  }

  /** A binary frame: a piece of a forwarded request's body. */
  requestBody(frame: Buffer): void {
    let chunk: { id: number; bytes: Buffer };
    try {
      chunk = decodeChunk(frame);
    } catch (e) {
      this.o.logger.warn({ err: e }, 'bad binary frame from the portal; ignored');
      return;
    }
    this.inflight.get(chunk.id)?.req.write(chunk.bytes);
  }

  /** `req_end`: the request's body is complete. */
  requestEnd(id: number): void {
    this.inflight.get(id)?.req.end();
  }

  /** `cancel`: the portal's client went away. */
  cancel(id: number): void {
    const f = this.inflight.get(id);
    if (f) this.abortForwarded(id, f);
  }

  /** A send went out: resume the paused answers once the socket's queue is low again. */
  drained(ws: WebSocket): void {
    if (ws !== this.o.current() || this.paused.size === 0 || ws.bufferedAmount > LOW_WATER) return;
    for (const res of this.paused) res.resume();
    this.paused.clear();
  }

  /** The socket went: every request in flight is aborted, nothing sent. */
  abortAll(): void {
    for (const [id, f] of this.inflight) this.abortForwarded(id, f);
    this.paused.clear();
  }

  /** The HTTP/2 prototype on `ws` (src/farm/h2Tunnel.ts): its tunnel frames go to `deliver`; `close` when the socket goes. */
  openH2(ws: WebSocket): { deliver(frame: Buffer): void; close(): void } {
    const tunnel = new WsTunnel(ws);
    const server = serveH2(tunnel, { local: this.o.local, delegateSecret: this.o.delegateSecret, agent: this.agent, answered: this.o.answered });
    return { deliver: (frame) => tunnel.deliver(frame), close: () => server.close() };
  }

  /** The link stopped: its keep-alive connections to the node's server go. */
  destroy(): void {
    this.agent.destroy();
  }

  private abortForwarded(id: number, f: Forwarded): void {
    this.inflight.delete(id);
    if (f.res) this.paused.delete(f.res);
    f.req.destroy();
  }
}
