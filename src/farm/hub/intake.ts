/**
 * The portal's side of the nodes' connections, events (docs/farm.md, "Its events" and "What a node can do to the
 * portal"): a node's events are checked (a node speaks for itself only: foreignIds), recorded through HubJobs in
 * the node's order on its chain, and published to the hub's listeners; the hub's own events (node.online,
 * node.offline, the fault rule's) are published here too. Uses the node table (nodes.ts) and options.ts.
 */
import type { EventPayloads, EventType, FarmEvent } from '../../core/events.js';
import { parseJobUid, parseResultId } from '../../core/ids.js';
import type { EventOrigin, NodeLink } from '../contract.js';
import { NodeMoved } from '../replicas/ownership.js';
import { nodeEventOrder } from '../protocol.js';
import { nodeState } from './availability.js';
import type { Entry, NodeTable } from './nodes.js';
import type { PortalHubOptions } from './options.js';

/**
 * The job and result ids of a node's event that are not the node's own (docs/farm.md, "What a node can do to the
 * portal"): every job_uid and result_id starts with its node's id (src/core/ids.ts), and a run's result_id with its
 * job_uid. Empty when the event names only the node's own (a key press of no run names result_id null).
 */
export function foreignIds(data: Record<string, unknown>, nodeId: string): string[] {
  const out: string[] = [];
  const show = (key: string, v: unknown) => `${key} ${JSON.stringify(v)?.slice(0, 200) ?? String(v)}`;
  if ('job_uid' in data && parseJobUid(data.job_uid)?.nodeId !== nodeId) out.push(show('job_uid', data.job_uid));
  if ('result_id' in data && data.result_id !== null) {
    const r = parseResultId(data.result_id);
    if (r?.job.nodeId !== nodeId) out.push(show('result_id', data.result_id));
    else if (typeof data.job_uid === 'string' && parseJobUid(data.job_uid) && `/${data.job_uid.replace(/^\//, '')}` !== r.jobUid) {
      out.push(`${show('result_id', data.result_id)} (not a run of ${show('job_uid', data.job_uid)})`);
    }
  }
  return out;
}

/** At most this many events of one node are folded in one transaction. */
export const MAX_FOLD_BATCH = 500;
/** A node.state frame larger than this is refused (a Node object is a few KiB; this one would sit in the nodes row). */
export const MAX_STATE_BYTES = 256 * 1024;
/** A node's events held in memory, not yet folded, at most (docs/farm.md, "The portal's inbox"); past it the node is asked to resend. */
export const DEFAULT_MAX_INBOX_EVENTS = 5_000;
/** ... and their frames' bytes at most. */
export const DEFAULT_MAX_INBOX_BYTES = 32 * 1024 * 1024;

export interface IntakeStats {
  foreignEventsRefused: number;
  /** Events not taken because the node's inbox was full (or a resend was awaited); the node sends them again. */
  eventsDeferred: number;
  /** The most events one node's inbox has held. */
  inboxPeak: number;
}

export class EventIntake {
  private readonly listeners = new Set<(e: FarmEvent, from: EventOrigin) => void>();
  private readonly availabilityListeners = new Set<(nodeId: string) => void>();
  private readonly boot: string;
  private seq = 0;

  constructor(
    private readonly o: Pick<PortalHubOptions, 'logger' | 'fold' | 'maxInboxEvents' | 'maxInboxBytes'>,
    private readonly nodes: NodeTable,
    private readonly now: () => number,
    private readonly stats: IntakeStats,
  ) {
    this.boot = this.now().toString(36);
  }

  onEvent(listener: (e: FarmEvent, from: EventOrigin) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * A node's availability as the portal decides it may have changed: its own availability changed kind (its
   * node.state, which is not an event of the hub: see onEvent), or its job ended (its job.exited as it arrives, before
   * the fold that publishes the event).
   */
  onAvailabilityChange(listener: (nodeId: string) => void): () => void {
    this.availabilityListeners.add(listener);
    return () => this.availabilityListeners.delete(listener);
  }

  /**
   * One event of a node's stream (docs/farm.md, "The node stream"): checked, its job followed at once, then
   * queued for the node's next fold (every event that arrives while a fold runs goes in the next one).
   */
  onNodeEvent(entry: Entry, nodeId: string, event: FarmEvent, record?: unknown, bytes = 0): void {
    if (this.o.fold && !this.take(entry, nodeId, bytes)) return;
    // A node speaks for itself only: its node_id, and only its own jobs and results.
    const e = { ...event, data: { ...event.data, node_id: nodeId } } as FarmEvent;
    let refused = false;
    if (e.type === 'node.state') refused = !this.followState(entry, nodeId, e, bytes);
    else {
      const foreign = foreignIds(e.data as unknown as Record<string, unknown>, nodeId);
      refused = foreign.length > 0;
      if (refused) {
        this.stats.foreignEventsRefused++;
        this.o.logger.warn({ node: nodeId, type: e.type, ids: foreign }, "refused a node's event naming a job or result that is not the node's own (dropped: not stored, not sent)");
      } else this.followJob(entry, e);
    }
    if (!this.o.fold) {
      if (!refused && e.type !== 'node.state') this.publish(e, 'node');
      return;
    }
    // Handled all the same when refused, in the node's order: the cursor moves past it, the node is not asked again.
    entry.inbox.push({ event: e, ...(record !== undefined && { record }), ...(refused && { refused: true }), bytes });
    entry.inboxBytes += bytes;
    this.stats.inboxPeak = Math.max(this.stats.inboxPeak, entry.inbox.length);
    if (entry.inbox.length > 1) return; // a drain is queued already
    this.nodes.enqueue(entry, () => this.drain(entry, nodeId));
  }

  /** Fold the node's queued events, a batch per transaction, until none is left; each batch acknowledged after its commit. */
  private async drain(entry: Entry, nodeId: string): Promise<void> {
    const fold = this.o.fold!;
    while (entry.inbox.length > 0) {
      const batch = entry.inbox.slice(0, MAX_FOLD_BATCH);
      let kept: FarmEvent[];
      try {
        // Retried while the database is away: a run.finished or job.exited lost to a PostgreSQL restart would leave the job running here.
        kept = await this.nodes.untilDatabaseBack(() => fold.fold(nodeId, batch, this.nodes.tenure(entry)));
      } catch (err) {
        if (this.moved(entry, err)) return;
        // Not the database being away: a bad event. One at a time, so only the bad one is skipped (logged).
        this.o.logger.error({ err, node: nodeId, events: batch.length }, "folding a batch of a node's events failed; folding them one at a time");
        kept = [];
        for (const item of batch) {
          try {
            kept.push(...(await this.nodes.untilDatabaseBack(() => fold.fold(nodeId, [item], this.nodes.tenure(entry)))));
          } catch (e) {
            if (this.moved(entry, e)) return;
            this.o.logger.error({ err: e, node: nodeId, event: item.event.id, type: item.event.type }, "a node's event could not be folded; skipped");
          }
        }
      }
      entry.inbox.splice(0, batch.length);
      for (const item of batch) entry.inboxBytes -= item.bytes ?? 0;
      for (const e of kept) this.publish(e, 'node');
      // The ack goes on the node's current connection; a node that reconnected meanwhile learns the cursor from its welcome.
      entry.conn?.send({ t: 'ack', last_event_id: batch[batch.length - 1]!.event.id });
    }
    if (entry.deferring?.phase === 'full' && entry.conn) {
      // All held is folded: the node sends what it was refused again, from its journal, after its replay marker.
      entry.deferring.phase = 'replay';
      this.o.logger.info({ node: nodeId, after: entry.deferring.after }, "the node's events held are folded: asking the node for those it was refused");
      entry.conn.send({ t: 'resend', after: entry.deferring.after });
    }
  }

  /**
   * Whether the portal takes this event of the node into its inbox (docs/farm.md, "The portal's inbox"): not past
   * the inbox's bound (the database is away and the events pile up), nor until the node's replay after a resend.
   * An event not taken is neither acknowledged nor folded: the node keeps it in its journal and sends it again.
   */
  private take(entry: Entry, nodeId: string, bytes: number): boolean {
    if (entry.deferring) {
      this.stats.eventsDeferred++;
      return false;
    }
    const maxEvents = this.o.maxInboxEvents ?? DEFAULT_MAX_INBOX_EVENTS;
    const maxBytes = this.o.maxInboxBytes ?? DEFAULT_MAX_INBOX_BYTES;
    if (entry.inbox.length === 0 || (entry.inbox.length < maxEvents && entry.inboxBytes + bytes <= maxBytes)) return true;
    entry.deferring = { phase: 'full', after: entry.inbox[entry.inbox.length - 1]!.event.id };
    this.stats.eventsDeferred++;
    this.o.logger.warn(
      { node: nodeId, held: entry.inbox.length, held_bytes: entry.inboxBytes, after: entry.deferring.after },
      "the node's events wait for the database and the portal holds as many as it will: taking no more of them until those are folded (the node keeps them in its journal and sends them again)",
    );
    return false;
  }

  /** The node's replay marker (protocol.ts ReplayMarker): its events after `after` follow, taken again. */
  onReplay(entry: Entry, after: string | null): void {
    if (entry.deferring?.phase === 'replay' && entry.deferring.after === after) entry.deferring = undefined;
  }

  /**
   * A node.state in the node's order: kept in memory at once (the database gets it with its batch's fold). False
   * when refused (not a state, or larger than MAX_STATE_BYTES: it would sit in the nodes row; logged).
   */
  private followState(entry: Entry, nodeId: string, e: FarmEvent, bytes: number): boolean {
    const s = nodeState(e.data);
    const why = !s ? 'not a node state' : bytes > MAX_STATE_BYTES ? `larger than ${MAX_STATE_BYTES} bytes (${bytes})` : undefined;
    if (!s || why) {
      this.o.logger.warn({ node: nodeId, event: e.id, why }, "refused a node's state (dropped: the portal keeps its previous one)");
      return false;
    }
    const at = nodeEventOrder(e.id);
    if (at && entry.stateAt && (at[0] < entry.stateAt[0] || (at[0] === entry.stateAt[0] && at[1] <= entry.stateAt[1]))) return true;
    entry.stateAt = at;
    const before = entry.link.availability?.kind;
    entry.link.snapshot = s.snapshot;
    entry.link.availability = s.availability;
    if (s.availability?.kind !== before) this.availabilityChanged(nodeId);
    return true;
  }

  private availabilityChanged(nodeId: string): void {
    for (const fn of [...this.availabilityListeners]) {
      try {
        fn(nodeId);
      } catch (err) {
        this.o.logger.error({ err, node: nodeId }, 'a node availability listener failed');
      }
    }
  }

  /** The node moved to another replica (NodeMoved): its connection dropped, its queued events left (it sends them again there). */
  private moved(entry: Entry, err: unknown): boolean {
    if (!(err instanceof NodeMoved)) return false;
    this.nodes.dropMoved(entry, err.tenure);
    entry.inbox.length = 0;
    return true;
  }

  /** Publish an event of the portal's own making about a node (node.online, node.offline, the fault rule's). */
  emit<T extends EventType>(type: T, nodeId: string, data: EventPayloads[T]): void {
    this.publish({ id: `${this.boot}-${++this.seq}`, type, time: new Date(this.now()).toISOString(), data: { ...data, node_id: nodeId } }, 'portal');
  }
  /**
   * The node's job as its ordered events say (NodeLink.job), at once, before the event is folded into the
   * database: a job.exited arrives before the node's answer to the stop that ended it. A job.exited of another
   * job than the one held (an old event replayed after the hello) changes nothing.
   */
  private followJob(entry: Entry, e: FarmEvent): void {
    const uid = (e.data as { job_uid?: unknown }).job_uid;
    if (typeof uid !== 'string') return;
    if (e.type === 'job.started') entry.link.job = { job_uid: uid, status: 'running' };
    else if (e.type === 'job.exited' && (entry.link.job === null || entry.link.job.job_uid === uid)) this.jobEnded(entry.link, uid);
  }

  /**
   * The node's job ended, as its job.exited or its own answer says: free again as the portal decides it (the link's
   * job), told to onAvailabilityChange now, not after the fold publishes the event.
   */
  jobEnded(link: NodeLink, uid: string): void {
    const was = link.job?.status;
    link.job = { job_uid: uid, status: 'exited' };
    if (was !== 'exited') this.availabilityChanged(link.nodeId);
  }

  private publish(e: FarmEvent, from: EventOrigin): void {
    for (const fn of [...this.listeners]) {
      try {
        fn(e, from);
      } catch (err) {
        this.o.logger.error({ err, event: e.id }, 'a hub event listener failed');
      }
    }
  }
}
