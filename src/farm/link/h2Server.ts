/**
 * The node's side of forwarded requests (docs/farm.md, "Forwarded requests: HTTP/2 over the WebSocket"): an HTTP/2
 * server on the link's byte stream (src/farm/h2Tunnel.ts) whose every stream is made to the node's own HTTP server on
 * loopback, with the header policy of forwardHeaders.ts, and answered on the stream. HTTP/2 does the rest: the answer
 * is written only as fast as the portal's window for that stream allows (the node's server sees TCP backpressure in
 * turn), and a stream the portal resets (its client went away) aborts the local request.
 */
import http from 'node:http';
import http2 from 'node:http2';
import type { WsTunnel } from '../h2Tunnel.js';
import { localRequestHeaders, streamAnswerHeaders } from './forwardHeaders.js';

/** Each stream's window, both ways: what one request may have in flight unread (docs/farm.md). */
export const STREAM_WINDOW_BYTES = 256 * 1024;
/** The session's window (Node hands a frame's bytes to its stream at once, so this bounds nothing held: the streams' do). */
export const SESSION_WINDOW_BYTES = 16 * 1024 * 1024;

export interface H2ServerOptions {
  local: URL;
  delegateSecret: string;
  agent: http.Agent;
  /** A forwarded answer ended complete (a use of the node changes last_used_by). */
  answered: () => void;
}

/** A new loopback connection per request (no keep-alive): for requests that are not reads, and a read's second try. */
const ONCE = new http.Agent({ keepAlive: false });

/** Serve the forwarded requests of one link's byte stream; close() ends the session and every request in it. */
export function serveH2(tunnel: WsTunnel, o: H2ServerOptions): { close(): void } {
  const server = http2.createServer({ settings: { initialWindowSize: STREAM_WINDOW_BYTES, enablePush: false }, maxSessionMemory: 64 });
  server.on('sessionError', () => undefined);
  server.on('session', (s) => {
    s.on('error', () => undefined);
    // The session's window (all streams together) large: each stream's own window is the bound of what waits unread.
    s.setLocalWindowSize(SESSION_WINDOW_BYTES);
  });
  server.on('stream', (stream, h) => {
    stream.on('error', () => undefined);
    const method = String(h[':method'] ?? 'GET');
    const path = String(h[':path'] ?? '');
    // Only a path: never an absolute URL or `//host`, which would leave the node.
    if (!path.startsWith('/') || path.startsWith('//')) {
      stream.respond({ ':status': 400, 'content-type': 'application/json' });
      stream.end(JSON.stringify({ error: 'invalid_request', message: 'the forwarded path must start with a single /' }));
      return;
    }
    const read = method === 'GET' || method === 'HEAD';
    const send = (agent: http.Agent): void => {
      let req: http.ClientRequest;
      try {
        req = http.request({ protocol: o.local.protocol, hostname: o.local.hostname, port: o.local.port, method, path, headers: localRequestHeaders(h, o.delegateSecret), agent });
      } catch (e) {
        stream.respond({ ':status': 400, 'content-type': 'application/json' });
        stream.end(JSON.stringify({ error: 'invalid_request', message: `bad request: ${(e as Error).message}` }));
        return;
      }
      let res: http.IncomingMessage | undefined;
      stream.on('close', () => {
        if (!res?.complete) req.destroy();
      });
      req.on('error', () => {
        if (stream.destroyed) return;
        // A kept-alive socket the node's server closed (idle) as the read was sent on it: once more, on a new one.
        if (read && req.reusedSocket && !res && agent !== ONCE) return send(ONCE);
        if (!stream.headersSent) stream.respond({ ':status': 502 });
        stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
      });
      req.on('response', (r) => {
        res = r;
        if (stream.destroyed) return;
        stream.respond(streamAnswerHeaders(r.statusCode ?? 502, r.headers));
        r.pipe(stream);
        r.on('end', () => o.answered());
        r.on('aborted', () => stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR));
      });
      if (read) {
        req.end(); // a read has no body: the stream's (empty) request side is only drained
        stream.resume();
      } else stream.pipe(req);
    };
    // A request that is not a read goes on a connection of its own: on a kept-alive socket the server closes as it is
    // sent, it could not be known whether the node read it (a stop, a run_tests), and it could not be sent again.
    send(read ? o.agent : ONCE);
  });
  server.emit('connection', tunnel);
  return {
    close: () => {
      tunnel.destroy();
      server.close();
    },
  };
}
