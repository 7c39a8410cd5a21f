/**
 * The portal's side of forwarded requests (docs/farm.md, "Forwarded requests: HTTP/2 over the WebSocket"): each one
 * is a stream of one HTTP/2 session per node connection, the portal its client, over the link's byte stream
 * (src/farm/h2Tunnel.ts). HTTP/2 gives per-request flow control (a client reading slowly leaves at most its stream's
 * window unread on the portal, and the node is paused, not the link) and cancellation (a client that goes away resets
 * its stream; the node aborts its local request). The node is not trusted: its header blocks, the memory of its
 * session and the streams open to it are bounded (H2_LIMITS), and a session it breaks closes its link (`broken`).
 */
import http2 from 'node:http2';
import { FarmError } from '../../core/errors.js';
import type { ForwardRequest, ForwardResponse } from '../contract.js';
import type { WsTunnel } from '../h2Tunnel.js';
import { FORWARD_BASE_URL_HEADER, FORWARD_USER_HEADER } from '../protocol.js';

/** Retry-After of the 503 for a node that cannot answer now (it reconnects within its back-off; a client asks again). */
export const NODE_AWAY_RETRY_SECS = 5;
const retry = { retryAfter: NODE_AWAY_RETRY_SECS };

/** What one node's session may cost the portal (docs/farm.md, "What a node can do to the portal"). */
export const H2_LIMITS = {
  /** Each stream's window: what one answer may have waiting unread on the portal. */
  streamWindowBytes: 256 * 1024,
  /** The session's window (Node hands a frame's bytes to its stream at once; the streams' windows bound what waits). */
  sessionWindowBytes: 16 * 1024 * 1024,
  /** An answer's header block, at most (a larger one resets its stream: the forward fails with a 503). */
  maxHeaderListBytes: 64 * 1024,
  /** nghttp2's own memory for the session (header compression, frames queued), in MB. */
  maxSessionMemoryMb: 16,
  /** Forwards open (or waiting to open) to one node at once; one more is answered 503 at once. */
  maxStreams: 256,
} as const;

export class H2LinkClient {
  private readonly session: http2.ClientHttp2Session;
  private readonly open = new Set<http2.ClientHttp2Stream>();
  private closedWhy: string | undefined;

  constructor(
    tunnel: WsTunnel,
    private readonly nodeId: string,
    /** The node broke the session (a protocol error, a GOAWAY): its link is closed with the reason. */
    broken: (why: string) => void,
  ) {
    this.session = http2.connect('http://node.farmhand.invalid', {
      createConnection: () => tunnel,
      settings: { initialWindowSize: H2_LIMITS.streamWindowBytes, enablePush: false, maxHeaderListSize: H2_LIMITS.maxHeaderListBytes },
      maxHeaderListPairs: 256,
      maxSessionMemory: H2_LIMITS.maxSessionMemoryMb,
      peerMaxConcurrentStreams: H2_LIMITS.maxStreams,
      maxOutstandingPings: 2,
      maxSettings: 16,
    });
    this.session.setLocalWindowSize(H2_LIMITS.sessionWindowBytes);
    // A node that breaks the protocol: the session says GOAWAY and then waits, so the GOAWAY it writes ends it here.
    tunnel.watchGoaway(() => setImmediate(() => this.fail('it broke the HTTP/2 protocol (the portal sent GOAWAY)', broken)));
    this.session.on('error', (e: Error) => this.fail(`its HTTP/2 session failed: ${e.message}`, broken));
    this.session.on('goaway', (code) => this.fail(`it ended its HTTP/2 session (GOAWAY ${code})`, broken));
    this.session.on('close', () => this.fail('its HTTP/2 session closed', broken));
  }

  /** Streams open now (or waiting for the node to take them). */
  get inFlight(): number {
    return this.open.size;
  }

  forward(req: ForwardRequest, signal?: AbortSignal): Promise<ForwardResponse> {
    if (this.closedWhy !== undefined) return Promise.reject(this.unavailable(`node ${this.nodeId} cannot answer: ${this.closedWhy}`));
    if (this.open.size >= H2_LIMITS.maxStreams) {
      return Promise.reject(this.unavailable(`node ${this.nodeId} has ${this.open.size} requests in flight, its most; try again when one has ended`));
    }
    const hasBody = req.body !== undefined && req.body.length > 0;
    const headers: http2.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) headers[k.toLowerCase()] = v;
    Object.assign(headers, { ':method': req.method, ':path': req.path, [FORWARD_USER_HEADER]: req.user, [FORWARD_BASE_URL_HEADER]: req.baseUrl });
    let s: http2.ClientHttp2Stream;
    try {
      s = this.session.request(headers, { endStream: !hasBody, ...(signal && { signal }) });
    } catch (e) {
      return Promise.reject(this.unavailable(`node ${this.nodeId} cannot answer: ${(e as Error).message}`));
    }
    this.open.add(s);
    s.once('close', () => this.open.delete(s));
    if (hasBody) s.end(req.body);
    return new Promise<ForwardResponse>((resolve, reject) => {
      let answered = false;
      s.once('response', (h) => {
        answered = true;
        const out: Record<string, string> = {};
        for (const [k, v] of Object.entries(h)) if (!k.startsWith(':') && v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : String(v);
        resolve({ status: Number(h[':status'] ?? 502), headers: out, body: s });
      });
      const fail = (e?: Error) => {
        if (answered) return;
        answered = true;
        if (e?.name === 'AbortError' || e instanceof FarmError) reject(e);
        else {
          const why = e?.message ?? (s.rstCode ? `it reset the request (HTTP/2 code ${s.rstCode})` : 'the stream closed before an answer');
          reject(this.unavailable(`node ${this.nodeId} could not answer: ${why}`));
        }
      };
      s.once('error', fail);
      s.once('close', () => fail());
    });
  }

  /** The connection went (or was replaced): every forward on it fails with `why`; the session ends. */
  close(why: string): void {
    if (this.closedWhy === undefined) this.closedWhy = why;
    const err = this.unavailable(`node ${this.nodeId} cannot answer: ${this.closedWhy}`);
    for (const s of this.open) s.destroy(err);
    this.open.clear();
    if (!this.session.destroyed) this.session.destroy();
  }

  private fail(why: string, broken: (why: string) => void): void {
    if (this.closedWhy !== undefined) return;
    this.close(why);
    broken(why);
  }

  private unavailable(message: string): FarmError {
    return new FarmError('device_unavailable', message, retry);
  }
}
