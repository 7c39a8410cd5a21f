/**
 * The node's side of the portal connection, its events (docs/farm.md, "The node's connection"): each event of
 * the node's hub is passed on as it is published, and at each welcome every event the portal has not recorded
 * is sent again from the hub's buffer (at least once; the portal stores each once). Counts the events gone from
 * the buffer before the portal recorded them. Knows nothing of the connection's life: portalLink.ts calls it.
 */
import type WebSocket from 'ws';
import type { FarmEvent } from '../../core/events.js';
import { nodeEventOrder, type NodeMessage } from '../protocol.js';
import type { PortalLinkOptions } from './options.js';

/** A portal that leaves this much unsent (events, snapshots) is not keeping up: reconnect (events are replayed). */
const MAX_QUEUED_BYTES = 64 * 1024 * 1024;

export class EventStream {
  /**
   * The last event handed to a socket: the next connection resumes after it when the portal's welcome does
   * not say which of the node's events it has recorded (an older portal).
   */
  private lastEventId: string | undefined;
  /** Events gone from the buffer before a portal recorded them (the portal was away longer than the buffer holds). */
  private lostCount = 0;
  private ackedId: string | undefined;
  private ackCount = 0;

  constructor(
    private readonly o: Pick<PortalLinkOptions, 'events' | 'logger' | 'record'>,
    private readonly send: (ws: WebSocket, m: NodeMessage) => void,
  ) {}

  /** Events the portal never got: gone from the node's buffer (events.buffer_size) before it recorded them. */
  get eventsLost(): number {
    return this.lostCount;
  }

  /**
   * Every event the portal has not recorded, from the hub's buffer (bounded: the oldest may be gone). The welcome
   * names the last event the portal recorded (`recorded`): the node sends those after it, so an event handed to a
   * socket in the instant the portal died is sent again (the portal stores it once). An older portal says
   * nothing (undefined): the node resumes after the last event it handed to a socket. Returns how many were sent.
   */
  replay(ws: WebSocket, recorded: string | null | undefined): number {
    const from = recorded === undefined ? this.lastEventId : recorded ?? undefined;
    // None recorded, or a first connection to an older portal: every event since the node started (start-up's recovery too).
    const all = { internal: true };
    const r = from === undefined ? { events: this.o.events.buffered(all), missed: null } : this.o.events.since(from, all);
    if (r.missed?.reason === 'restarted') {
      // The portal's last is of an earlier run of this node: what that run sent, it sent; this run's events all go.
      this.o.logger.debug({ last_event_id: r.missed.last_event_id }, "the portal's last recorded event is of an earlier run of this node; passing on this run's events");
    } else if (r.missed) {
      const lost = lostBetween(r.missed.last_event_id, r.missed.oldest_event_id);
      if (lost !== null) this.lostCount += lost;
      this.o.logger.warn(
        { reason: r.missed.reason, last_event_id: r.missed.last_event_id, oldest_event_id: r.missed.oldest_event_id, lost },
        'events published while the portal was unreachable are gone from the buffer (events.buffer_size) before the portal recorded them; passing on those kept',
      );
    }
    // Of the node's states, the last one says it all: the earlier ones are not sent again.
    const lastState = r.events.findLastIndex((e) => e.type === 'node.state');
    const events = r.events.filter((e, i) => e.type !== 'node.state' || i === lastState);
    for (const e of events) this.sendEvent(ws, e);
    return events.length;
  }

  sendEvent(ws: WebSocket, e: FarmEvent): void {
    if (ws.bufferedAmount > MAX_QUEUED_BYTES) {
      this.o.logger.warn({ queued_bytes: ws.bufferedAmount }, 'the portal is not reading what the node sends; reconnecting');
      ws.terminate();
      return;
    }
    // A run's record goes with its run.finished, read from the node's index as it is sent (docs/farm.md, "The node stream").
    const record = e.type === 'run.finished' ? this.o.record?.((e.data as { result_id: string }).result_id) : undefined;
    this.send(ws, record ? { t: 'event', event: e, record } : { t: 'event', event: e });
    this.lastEventId = e.id;
  }

  /** The portal folded the node's events up to this one (in a committed transaction). */
  acked(id: string): void {
    this.ackedId = id;
    this.ackCount++;
  }

  /** The last of the node's events the portal acknowledged on any connection since start; undefined before the first ack. */
  get lastAcked(): string | undefined {
    return this.ackedId;
  }

  /** Acks received since start. */
  get acks(): number {
    return this.ackCount;
  }
}

/** How many events lie between two ids of one run (`<boot>-<n>`): those a resume missed; null when unknown. */
function lostBetween(last: string, oldest: string | null): number | null {
  const a = nodeEventOrder(last);
  const b = oldest === null ? null : nodeEventOrder(oldest);
  if (!a || !b || a[0] !== b[0]) return null;
  return Math.max(0, b[1] - a[1] - 1);
}
