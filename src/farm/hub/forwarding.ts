/**
 * The portal's side of the nodes' connections, forwarding (docs/farm.md, "Forwarded requests: HTTP/2 over the
 * WebSocket"): whether a node can take a request now (connected and online, and reading what it was sent), and the
 * request handed to its connection's HTTP/2 session (h2Client.ts), whose stream is the answer. Uses the node table
 * (nodes.ts), nothing else.
 */
import { FarmError } from '../../core/errors.js';
import type { ForwardRequest, ForwardResponse } from '../contract.js';
import { NODE_AWAY_RETRY_SECS } from './h2Client.js';
import type { Conn, NodeTable } from './nodes.js';

const retry = { retryAfter: NODE_AWAY_RETRY_SECS };

/** Past this many bytes queued on a node's socket (it does not read its connection), no new request is sent to it. */
export const MAX_QUEUED_TO_NODE_BYTES = 16 * 1024 * 1024;

export class Forwarding {
  constructor(
    private readonly nodes: NodeTable,
    private readonly stats: { forwards: number },
  ) {}

  forward(nodeId: string, req: ForwardRequest, signal?: AbortSignal): Promise<ForwardResponse> {
    const entry = this.nodes.get(nodeId);
    const conn = entry?.conn;
    if (!entry || !conn?.h2 || !entry.link.online) {
      const why = entry?.link.offlineReason ?? 'it has not connected to the portal';
      return Promise.reject(new FarmError('device_unavailable', `node ${nodeId} is offline (${why}); try again when it is back`, retry));
    }
    if (signal?.aborted) return Promise.reject(abortError());
    if (conn.ws.bufferedAmount > MAX_QUEUED_TO_NODE_BYTES) {
      return Promise.reject(
        new FarmError('device_unavailable', `node ${nodeId} is not reading its connection (${conn.ws.bufferedAmount} bytes wait for it); try again later`, retry),
      );
    }
    this.stats.forwards++;
    return conn.h2.client.forward(req, signal);
  }

  /** Forwarded requests not yet answered in full, over every connection (/metrics). */
  inFlight(): number {
    let n = 0;
    for (const e of this.nodes.entries.values()) n += e.conn?.h2?.client.inFlight ?? 0;
    return n;
  }

  /** Every forward on `conn` ends with an error: its connection went (or was replaced). */
  failPending(conn: Conn, why: string): void {
    conn.h2?.client.close(why);
  }
}

function abortError(): Error {
  const e = new Error('the request was aborted');
  e.name = 'AbortError';
  return e;
}
