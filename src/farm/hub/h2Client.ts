/**
 * The portal's side of the HTTP/2 prototype (src/farm/h2Tunnel.ts): forwarded requests as streams of one HTTP/2
 * session over the node's link instead of the link's own multiplexer. Per-request flow control comes with it: a
 * client reading slowly leaves at most the stream's window unread on the portal (no `max_buffered_response_bytes`
 * cut-off needed), and a client that goes away resets its stream (the node aborts its local request).
 */
import http2 from 'node:http2';
import { FarmError } from '../../core/errors.js';
import type { ForwardRequest, ForwardResponse } from '../contract.js';
import type { WsTunnel } from '../h2Tunnel.js';

const H2_USER = 'farmhand-user';
const H2_BASE_URL = 'farmhand-base-url';

export class H2LinkClient {
  private readonly session: http2.ClientHttp2Session;
  /** Streams open now. */
  inFlight = 0;

  constructor(
    tunnel: WsTunnel,
    private readonly nodeId: string,
  ) {
    this.session = http2.connect('http://node.farmhand.invalid', { createConnection: () => tunnel, settings: { initialWindowSize: 256 * 1024 } });
    this.session.on('error', () => undefined);
  }

  forward(req: ForwardRequest, signal?: AbortSignal): Promise<ForwardResponse> {
    const hasBody = req.body !== undefined && req.body.length > 0;
    const headers: http2.OutgoingHttpHeaders = { ':method': req.method, ':path': req.path, [H2_USER]: req.user, [H2_BASE_URL]: req.baseUrl };
    for (const [k, v] of Object.entries(req.headers)) headers[k.toLowerCase()] = v;
    let s: http2.ClientHttp2Stream;
    try {
      s = this.session.request(headers, { endStream: !hasBody, ...(signal && { signal }) });
    } catch (e) {
      return Promise.reject(new FarmError('device_unavailable', `node ${this.nodeId} cannot answer: ${(e as Error).message}`, { retryAfter: 5 }));
    }
    this.inFlight++;
    s.once('close', () => this.inFlight--);
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
        if (e?.name === 'AbortError') reject(e);
        else reject(new FarmError('device_unavailable', `node ${this.nodeId} could not answer: ${e?.message ?? 'the stream closed before an answer'}`, { retryAfter: 5 }));
      };
      s.once('error', fail);
      s.once('close', () => fail());
    });
  }

  close(): void {
    this.session.destroy();
  }
}
