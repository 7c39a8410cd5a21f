/**
 * The node's header policy for a forwarded request (docs/farm.md, "Forwarded requests"), in one place: which of the
 * portal's headers reach the node's own HTTP server, the delegate headers it adds (the link's secret, the portal's
 * user and base URL: src/http/auth.ts believes them only with that secret), and which of the server's answer
 * headers go back on the stream. Used by h2Server.ts, nothing else.
 */
import type { IncomingHttpHeaders, OutgoingHttpHeaders } from 'node:http';
import type { IncomingHttpHeaders as H2Headers } from 'node:http2';
import { BASE_URL_HEADER, DELEGATE_HEADER, FORWARD_BASE_URL_HEADER, FORWARD_USER_HEADER, ON_BEHALF_HEADER } from '../protocol.js';

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
  FORWARD_USER_HEADER,
  FORWARD_BASE_URL_HEADER,
]);
/** Hop-by-hop headers of the node's answer, and the connection-specific ones HTTP/2 forbids in an answer. */
export const DROPPED_RESPONSE_HEADERS = new Set(['connection', 'keep-alive', 'transfer-encoding', 'upgrade', 'trailer', 'proxy-connection', 'http2-settings']);

/** The headers of the request to the node's own server: the stream's (less the dropped), then the delegate headers. */
export function localRequestHeaders(h: H2Headers, delegateSecret: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(':') || v === undefined || DROPPED_REQUEST_HEADERS.has(k)) continue;
    headers[k] = Array.isArray(v) ? v.join(', ') : String(v);
  }
  headers[DELEGATE_HEADER] = delegateSecret;
  headers[ON_BEHALF_HEADER] = String(h[FORWARD_USER_HEADER] ?? '');
  headers[BASE_URL_HEADER] = String(h[FORWARD_BASE_URL_HEADER] ?? '');
  return headers;
}

/** The answer's headers as the stream carries them back to the portal (which applies its own policy: nodeAnswer.ts). */
export function streamAnswerHeaders(status: number, h: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = { ':status': status };
  for (const [k, v] of Object.entries(h)) if (v !== undefined && !DROPPED_RESPONSE_HEADERS.has(k)) out[k] = v;
  return out;
}
