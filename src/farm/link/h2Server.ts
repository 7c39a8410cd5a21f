/**
 * The node's side of the HTTP/2 prototype (src/farm/h2Tunnel.ts): an HTTP/2 server on the link's tunnel whose every
 * stream is made to the node's own HTTP server on loopback, as the forwarder does (the same dropped headers, the
 * delegate secret, the portal's user and base URL), and answered on the stream. HTTP/2 does the rest: the answer
 * is written only as fast as the portal's window for that stream allows (the node's server sees TCP backpressure in
 * turn), and a stream the portal resets (its client went away) aborts the local request.
 */
import http from 'node:http';
import http2 from 'node:http2';
import { BASE_URL_HEADER, DELEGATE_HEADER, ON_BEHALF_HEADER } from '../protocol.js';
import type { WsTunnel } from '../h2Tunnel.js';
import { DROPPED_REQUEST_HEADERS, DROPPED_RESPONSE_HEADERS } from './forwarder.js';

/** The portal's user and base URL on an HTTP/2 forwarded request (pseudo-free names; the node sets its own from them). */
export const H2_USER = 'farmhand-user';
export const H2_BASE_URL = 'farmhand-base-url';
/** Connection-specific headers HTTP/2 forbids in an answer. */
const H2_FORBIDDEN = new Set(['proxy-connection', 'http2-settings']);

export interface H2ServerOptions {
  local: URL;
  delegateSecret: string;
  agent: http.Agent;
  answered: () => void;
}

/** Serve the forwarded requests of one link's tunnel; close() ends the session. */
export function serveH2(tunnel: WsTunnel, o: H2ServerOptions): { close(): void } {
  const server = http2.createServer({ settings: { initialWindowSize: 256 * 1024 } });
  server.on('stream', (stream, h) => {
    const method = String(h[':method'] ?? 'GET');
    const path = String(h[':path'] ?? '');
    if (!path.startsWith('/') || path.startsWith('//')) {
      stream.respond({ ':status': 400 });
      stream.end();
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(h)) {
      if (k.startsWith(':') || v === undefined || k === H2_USER || k === H2_BASE_URL || DROPPED_REQUEST_HEADERS.has(k)) continue;
      headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
    }
    headers[DELEGATE_HEADER] = o.delegateSecret;
    headers[ON_BEHALF_HEADER] = String(h[H2_USER] ?? '');
    headers[BASE_URL_HEADER] = String(h[H2_BASE_URL] ?? '');
    const req = http.request({ protocol: o.local.protocol, hostname: o.local.hostname, port: o.local.port, method, path, headers, agent: o.agent });
    let res: http.IncomingMessage | undefined;
    stream.on('close', () => {
      if (!res?.complete) req.destroy();
    });
    req.on('error', () => {
      if (stream.destroyed) return;
      if (!stream.headersSent) stream.respond({ ':status': 502 });
      stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    });
    req.on('response', (r) => {
      res = r;
      const out: http2.OutgoingHttpHeaders = { ':status': r.statusCode ?? 502 };
      for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !DROPPED_RESPONSE_HEADERS.has(k) && !H2_FORBIDDEN.has(k)) out[k] = v;
      if (stream.destroyed) return;
      stream.respond(out);
      r.pipe(stream);
      r.on('end', () => o.answered());
      r.on('aborted', () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
    });
    stream.pipe(req);
  });
  server.emit('connection', tunnel);
  return {
    close: () => {
      tunnel.destroy();
      server.close();
    },
  };
}
