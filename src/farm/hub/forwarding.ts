/**
 * The portal's side of the nodes' connections, forwarding (docs/farm.md, "Connections and liveness"): a v2
 * request for a node goes down its socket as `req` (its body in binary frames of CHUNK_BYTES), the node's
 * answer comes back as `res`, binary frames and `end`, and is handed on as a stream. Many requests share one
 * socket (ids); a client that goes away cancels its request at the node; a client reading too slowly has its
 * response cancelled past `maxBufferedBytes` held on the portal. Uses the node table (nodes.ts), nothing else.
 */
import { Readable } from 'node:stream';
import { FarmError } from '../../core/errors.js';
import type { ForwardRequest, ForwardResponse } from '../contract.js';
import { decodeChunk, encodeChunk } from '../protocol.js';
import type { Conn, NodeTable } from './nodes.js';

/** Retry-After of the 503 for a node not connected (it reconnects within its back-off; a client asks again). */
export const NODE_AWAY_RETRY_SECS = 5;
const retry = { retryAfter: NODE_AWAY_RETRY_SECS };

/** Body bytes per binary frame of a forwarded request. */
const CHUNK_BYTES = 256 * 1024;

export class Forwarding {
  constructor(
    private readonly nodes: NodeTable,
    private readonly maxBuffered: number,
    private readonly stats: { forwards: number },
  ) {}

  forward(nodeId: string, req: ForwardRequest, signal?: AbortSignal): Promise<ForwardResponse> {
    const entry = this.nodes.get(nodeId);
    const conn = entry?.conn;
    if (!entry || !conn || !entry.link.online) {
      const why = entry?.link.offlineReason ?? 'it has not connected to the portal';
      return Promise.reject(new FarmError('device_unavailable', `node ${nodeId} is offline (${why}); try again when it is back`, retry));
    }
    if (signal?.aborted) return Promise.reject(abortError());
    this.stats.forwards++;
    // The HTTP/2 prototype (src/farm/h2Tunnel.ts): a stream of its own, with flow control and reset.
    if (conn.h2) return conn.h2.client.forward(req, signal);
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
  inFlight(): number {
    let n = 0;
    for (const e of this.nodes.entries.values()) n += (e.conn?.pending.size ?? 0) + (e.conn?.h2?.client.inFlight ?? 0);
    return n;
  }

  onResponseHead(conn: Conn, id: number, status: number, headers: Record<string, string>): void {
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

  /** A binary frame of the current connection (the caller checked): a piece of a response's body. */
  onChunk(conn: Conn, frame: Buffer): void {
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

  onEnd(conn: Conn, id: number, error: string | undefined): void {
    const p = conn.pending.get(id);
    if (!p) return;
    if (!p.body) {
      this.settle(conn, id, new FarmError('device_unavailable', `node ${conn.nodeId} could not answer: ${error ?? 'it ended the request without a response'}`, retry));
      return;
    }
    conn.pending.delete(id);
    p.unlisten();
    if (error) p.body.destroy(new Error(`node ${conn.nodeId} broke off the response: ${error}`));
    else p.body.push(null);
  }

  /** Every forward on `conn` ends with an error: its connection went. */
  failPending(conn: Conn, why: string): void {
    for (const id of [...conn.pending.keys()]) {
      this.settle(conn, id, new FarmError('device_unavailable', `node ${conn.nodeId} cannot answer: ${why}`, retry));
    }
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
}

function abortError(): Error {
  const e = new Error('the request was aborted');
  e.name = 'AbortError';
  return e;
}
