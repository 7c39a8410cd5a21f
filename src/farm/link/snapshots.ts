/**
 * The node's side of the portal connection, its Node object (docs/farm.md, "The node's connection"): sent
 * again when it changed, debounced (several changes in a row make one message), after each event and answered
 * forward, and compared every `snapshotRefreshMs` for changes no event announces. Knows nothing of the
 * connection's life: portalLink.ts tells it when a socket is welcomed and when it goes.
 */
import type WebSocket from 'ws';
import type { NodeMessage, NodeSnapshot } from '../protocol.js';
import type { PortalLinkOptions } from './options.js';

export interface SnapshotSenderOptions extends Pick<PortalLinkOptions, 'snapshot' | 'logger' | 'snapshotDebounceMs' | 'snapshotRefreshMs'> {
  /** The link's current socket. */
  current: () => WebSocket | undefined;
  /** Whether the portal has welcomed the node on the current socket. */
  live: () => boolean;
  send: (ws: WebSocket, m: NodeMessage) => void;
}

export class SnapshotSender {
  private timer: NodeJS.Timeout | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  private building = false;
  private again = false;
  private last: string | undefined;

  constructor(private readonly o: SnapshotSenderOptions) {}

  /** The snapshot the hello carried: the next one is sent only if it differs. */
  remember(snapshot: NodeSnapshot): void {
    this.last = JSON.stringify(snapshot);
  }

  /** The portal welcomed the node: compare every snapshotRefreshMs from now. */
  startRefresh(): void {
    this.refreshTimer = setInterval(() => this.schedule(), this.o.snapshotRefreshMs ?? 30_000);
  }

  /** The socket went: no timer left, the flags ready for the next connection. */
  reset(): void {
    clearInterval(this.refreshTimer);
    clearTimeout(this.timer);
    this.refreshTimer = this.timer = undefined;
    this.building = this.again = false;
  }

  /** Send the Node object soon, if it changed (several changes in a row make one message). */
  schedule(): void {
    if (!this.o.live()) return;
    if (this.building) {
      this.again = true; // the one being built may have read the state before this change
      return;
    }
    if (this.timer) return;
    const ws = this.o.current()!;
    this.timer = setTimeout(() => void this.build(ws), this.o.snapshotDebounceMs ?? 250);
  }

  private async build(ws: WebSocket): Promise<void> {
    this.timer = undefined;
    this.building = true;
    try {
      const snapshot = await this.o.snapshot();
      const text = JSON.stringify(snapshot);
      if (ws === this.o.current() && this.o.live() && text !== this.last) {
        this.last = text;
        this.o.send(ws, { t: 'snapshot', ...snapshot });
      }
    } catch (e) {
      this.o.logger.warn({ err: e }, 'could not build the node snapshot for the portal');
    }
    if (ws !== this.o.current()) return; // reset() cleared the flags for the next connection
    this.building = false;
    if (this.again) {
      this.again = false;
      this.schedule();
    }
  }
}
