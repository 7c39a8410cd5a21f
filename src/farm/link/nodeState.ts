/**
 * The node's side of the portal connection, its state (docs/farm.md, "The node's state"): the node's v2 Node object
 * and its availability (a kind and a detail), published as the internal event `node.state` on the node's event hub,
 * so it is journaled, numbered and streamed to the portal like every other event, acknowledged when folded, and
 * replayed after a restart of either side. Published only when it changed, and coalesced:
 *
 * - a change is published after `debounceMs` (several changes in a row make one event);
 * - a change of `last_used_time` alone (every screenshot, every frame of a live view) waits until `usageMs` after
 *   the last one published: the journal does not grow per frame;
 * - the state is also compared every `refreshMs`, for changes no event announces (test pack problem, health check).
 *
 * Runs whether or not the portal is connected: what changes while it is away is in the journal when it returns.
 */
import type { FarmEvent, NodeStateData } from '../../core/events.js';
import type { PortalLinkOptions } from './options.js';

export interface NodeStateOptions extends Pick<PortalLinkOptions, 'state' | 'logger' | 'events'> {
  debounceMs?: number;
  usageMs?: number;
  refreshMs?: number;
  now?: () => number;
}

/** What a change is compared on: everything but the time of the last use. */
const significant = (s: NodeStateData): string => JSON.stringify({ ...s, node: { ...s.node, last_used_time: undefined } });

export class NodeStatePublisher {
  private timer: NodeJS.Timeout | undefined;
  /** Set while a change of last_used_time alone waits for usageMs after the last publish. */
  private usageTimer: NodeJS.Timeout | undefined;
  private refreshTimer: NodeJS.Timeout | undefined;
  private building = false;
  private again = false;
  private stopped = true;
  /** The last state published (or found in the journal at start). */
  private last: { whole: string; significant: string; at: number } | undefined;
  private count = 0;
  private readCount = 0;

  constructor(private readonly o: NodeStateOptions) {
    // The last state the journal holds (an earlier run's): a restart with the same state adds nothing.
    const prev = o.events.buffered({ internal: true }).findLast((e) => e.type === 'node.state') as FarmEvent<'node.state'> | undefined;
    if (prev) {
      const d = strip(prev.data);
      // Its time counts as now: a change of the last use's time alone waits usageMs from this start, as from a publish.
      this.last = { whole: JSON.stringify(d.availability) + JSON.stringify(d.node), significant: significant(d), at: (o.now ?? Date.now)() };
    }
  }

  /** node.state events published since start. */
  get published(): number {
    return this.count;
  }

  /** Times the state was read and compared (tests wait on it). */
  get reads(): number {
    return this.readCount;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.refreshTimer = setInterval(() => this.schedule(), this.o.refreshMs ?? 30_000);
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearInterval(this.refreshTimer);
    clearTimeout(this.timer);
    clearTimeout(this.usageTimer);
    this.refreshTimer = this.timer = this.usageTimer = undefined;
  }

  /** Publish the state soon, if it changed. */
  schedule(): void {
    if (this.stopped) return;
    if (this.building) {
      this.again = true; // the one being built may have read the state before this change
      return;
    }
    if (this.timer) return;
    this.timer = setTimeout(() => void this.build(), this.o.debounceMs ?? 250);
  }

  private async build(): Promise<void> {
    this.timer = undefined;
    this.building = true;
    let wait: number | undefined;
    try {
      const s = await this.o.state();
      this.readCount++;
      const data: NodeStateData = { node: s.snapshot, availability: s.availability };
      const whole = JSON.stringify(data.availability) + JSON.stringify(data.node);
      const sig = significant(data);
      const now = (this.o.now ?? Date.now)();
      const usageMs = this.o.usageMs ?? 30_000;
      if (this.stopped || whole === this.last?.whole) {
        // unchanged
      } else if (sig === this.last?.significant && now - this.last.at < usageMs) {
        wait = usageMs - (now - this.last.at); // only the last use's time: later, once
      } else {
        this.o.events.publish('node.state', data);
        this.last = { whole, significant: sig, at: now };
        this.count++;
        clearTimeout(this.usageTimer);
        this.usageTimer = undefined;
      }
    } catch (e) {
      this.o.logger.warn({ err: e }, "could not read the node's state for the portal");
    }
    this.building = false;
    if (this.again) {
      this.again = false;
      this.schedule();
    } else if (wait !== undefined && !this.usageTimer && !this.stopped) {
      this.usageTimer = setTimeout(() => {
        this.usageTimer = undefined;
        this.schedule();
      }, wait);
    }
  }
}

/** The payload as published (the hub adds node_id). */
function strip(d: NodeStateData & { node_id?: string }): NodeStateData {
  return { node: d.node, availability: d.availability };
}
