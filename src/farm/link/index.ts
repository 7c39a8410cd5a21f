/**
 * The node's side of the node <-> portal connection (docs/farm.md, "The node's connection"), one concern a file:
 *
 * - portalLink.ts: `PortalLink`, the connection's life (connect, hello, welcome, reconnect);
 * - heartbeat.ts: the portal's liveness (heartbeats, a silent portal cut);
 * - eventStream.ts: the node's events, passed on and replayed after what the portal recorded;
 * - nodeState.ts: the node's state (Node object, availability), the internal event `node.state` when it changed;
 * - h2Server.ts: forwarded requests, the streams of the HTTP/2 connection in the socket, to the node's own server;
 * - forwardHeaders.ts: the header policy of a forwarded request (dropped headers, the delegate headers);
 * - backoff.ts, reasons.ts, options.ts: the reconnect back-off, failures in words, what the link is given.
 *
 * The composition root (src/daemon.ts) and the tests import from here.
 */
export { backoffDelay, DEFAULT_BACKOFF, type BackoffSettings } from './backoff.js';
export type { PortalLinkOptions } from './options.js';
export { PortalLink } from './portalLink.js';
