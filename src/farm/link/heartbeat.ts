/**
 * The node's side of the portal connection, the portal's liveness as the node sees it (docs/farm.md, "The
 * node's connection"): a heartbeat every interval the welcome asks, each with a ping any live WebSocket peer
 * answers; a portal silent too long (a half-open TCP connection, a stopped process) is cut, and portalLink.ts
 * reconnects.
 */
import type WebSocket from 'ws';
import { DEFAULT_HEARTBEAT_SECS, MISSED_HEARTBEATS_OFFLINE, type NodeMessage } from '../protocol.js';
import type { Logger } from '../../core/ports.js';

/**
 * The node gives up on a silent portal after 3 heartbeat intervals, but never sooner than this: a
 * portal busy with a large forwarded answer is not mistaken for a dead one.
 */
const SILENCE_MIN_SECS = 15;

export class Heartbeat {
  secs = DEFAULT_HEARTBEAT_SECS;
  private timer: NodeJS.Timeout | undefined;
  /** Heartbeat ticks since the portal was last heard from (any message or pong). */
  private silentTicks = 0;

  constructor(
    private readonly logger: Logger,
    private readonly send: (ws: WebSocket, m: NodeMessage) => void,
  ) {}

  /** The portal was heard from (any message or pong). */
  heard(): void {
    this.silentTicks = 0;
  }

  /** The portal welcomed the node on `ws`: beat every `secs`. */
  start(ws: WebSocket): void {
    this.silentTicks = 0;
    this.timer = setInterval(() => this.beat(ws), this.secs * 1000);
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private beat(ws: WebSocket): void {
    // A portal silent for 3 intervals, and at least SILENCE_MIN_SECS (a half-open TCP connection, a stopped
    // process), is gone: reconnect. Each heartbeat carries a ping, which any live WebSocket peer answers.
    const limit = Math.max(MISSED_HEARTBEATS_OFFLINE, Math.ceil(SILENCE_MIN_SECS / this.secs));
    if (++this.silentTicks > limit) {
      this.logger.warn({ silent_secs: Math.round(limit * this.secs) }, 'the portal stopped answering; reconnecting');
      ws.terminate();
      return;
    }
    this.send(ws, { t: 'hb' });
    ws.ping();
  }
}
