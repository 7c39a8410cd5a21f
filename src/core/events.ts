/**
 * The event hub: what happened on the node (jobs, runs, node health,
 * reservations, key presses), as typed events with ids, kept in a bounded
 * ring buffer so a client that reconnects resumes where it left off.
 * Transport-free: the SSE endpoint (http/events.ts) and the webhooks
 * (http/webhookDelivery.ts) subscribe to it. docs/events.md has the payloads.
 *
 * - Ids are `<boot>-<n>`: `boot` is the start instant of this hub (ms since
 *   the epoch, base 36; one more than the newest boot in the journal when the
 *   clock says otherwise), `n` counts from 1. They increase within one daemon
 *   run and across restarts, and never repeat (the data-directory lock allows
 *   one daemon at a time).
 * - Durable: with a `journal` (storage/eventJournal.ts) every event is written
 *   to it before any subscriber sees it, and the events it kept from earlier
 *   runs (`history`) fill the buffer at start. So a client (or the portal)
 *   resuming with an id of an earlier run that is still kept gets the events
 *   after it, in the order they were published, across the restarts. Without
 *   a journal nothing is persisted: an id of an earlier run is `restarted`.
 * - Subscribers are called synchronously in `publish` and must only enqueue
 *   (write to a socket buffer, push onto a bounded queue); one that throws is
 *   logged and kept. A subscriber that cannot keep up is cut off by its own
 *   transport through `drop()` (counted) - the publisher never waits.
 */
import type { JobRecord, Outcome, ResultRecord } from './model.js';
import type { CaptureHealth, Logger } from './ports.js';
import type { ReservationRecord } from './reservations.js';

// ---------------------------------------------------------------- payloads

export interface JobStartedData {
  job_uid: string;
  username: string;
  test_cases: string[];
  test_pack_sha: string;
  test_pack_branch: string | null;
  category: string;
  soak: string;
  remote_control: string | null;
  tags: Record<string, string>;
  start_time: string;
}

export interface RunStartedData {
  job_uid: string;
  result_id: string;
  test_case: string;
  start_time: string;
}

export interface RunFinishedData {
  job_uid: string;
  result_id: string;
  test_case: string;
  result: Outcome;
  failure_reason: string | null;
  /** The kind when the node, not the script, caused an error (docs/events.md); null otherwise. */
  infrastructure_error: string | null;
  start_time: string;
  end_time: string;
  duration: number;
}

export interface JobExitedData {
  job_uid: string;
  end_time: string | null;
  result_counts: JobRecord['result_counts'];
}

export interface NodeOnlineData {
  online: boolean;
  /** Why offline; null when online. */
  reason: string | null;
}

export interface ReservationData {
  reservation_id: number;
  username: string;
  start_time: string;
  expires: string | null;
  message: string;
}

export interface ReservationEndedData extends ReservationData {
  /** `ended` by its owner, `expired`, or `interrupted` by someone else. */
  how: 'ended' | 'expired' | 'interrupted';
  by: string | null;
  end_message: string | null;
  end_time: string;
}

export interface KeyPressedData {
  key: string;
  remote: string;
  hold_ms: number;
  /** `api`: a person or tool through POST .../press; `script`: a running test. */
  source: 'api' | 'script';
  /** The caller of the API; null for a script's press. */
  username: string | null;
  /** The run that pressed it (script presses). */
  result_id: string | null;
}

/**
 * The node's state as the farm portal keeps it (`node.state`, docs/farm.md "The node's state"): its v2 Node object
 * and whether it takes a job as a kind and a detail. Internal to the farm link: journaled and streamed to the
 * portal like the other events, never served on GET /api/v2/events or to webhooks (INTERNAL_EVENT_TYPES).
 */
export interface NodeStateData {
  /** The node's own v2 Node object (links use the portal's origin). */
  node: Record<string, unknown>;
  availability: { kind: string; detail: string | null };
}

/** Each event type and its payload (without the `node_id` every payload carries). */
export interface EventPayloads {
  'job.started': JobStartedData;
  'run.started': RunStartedData;
  'run.finished': RunFinishedData;
  'job.exited': JobExitedData;
  'node.online': NodeOnlineData;
  'node.offline': NodeOnlineData;
  'reservation.made': ReservationData;
  'reservation.extended': ReservationData;
  'reservation.ended': ReservationEndedData;
  'reservation.interrupted': ReservationEndedData;
  'key.pressed': KeyPressedData;
  /** Internal (INTERNAL_EVENT_TYPES): the farm link's, not a public event. */
  'node.state': NodeStateData;
}

export type EventType = keyof EventPayloads;

/**
 * Events the hub journals and numbers like the others but hands only to a subscriber that asks for them (the farm
 * link): not on GET /api/v2/events, not to webhooks, not in docs/events.md.
 */
export const INTERNAL_EVENT_TYPES: readonly EventType[] = ['node.state'];
const INTERNAL = new Set<string>(INTERNAL_EVENT_TYPES);
/** Whether an event is internal to the farm link (INTERNAL_EVENT_TYPES). */
export const isInternalEvent = (e: { type: string }): boolean => INTERNAL.has(e.type);

/** Which events a reader of the hub gets: the public ones (default), or every one (the farm link). */
export interface ReadOptions {
  internal?: boolean;
}

/** The public event types (GET /api/v2/events, webhooks, docs/events.md). */
export const EVENT_TYPES: readonly EventType[] = [
  'job.started',
  'run.started',
  'run.finished',
  'job.exited',
  'node.online',
  'node.offline',
  'reservation.made',
  'reservation.extended',
  'reservation.ended',
  'reservation.interrupted',
  'key.pressed',
];

export interface FarmEvent<T extends EventType = EventType> {
  id: string;
  type: T;
  /** ISO 8601, when it was published. */
  time: string;
  data: EventPayloads[T] & { node_id: string };
}

/** What emitters get: publish only. */
export interface EventSink {
  publish<T extends EventType>(type: T, data: EventPayloads[T]): void;
}

/** Why a resuming client cannot get every event after its id. */
export type MissedReason = 'too_old' | 'restarted' | 'unknown_id';

export interface Resume {
  /** The buffered events after the client's id (all buffered events when some were missed). */
  events: FarmEvent[];
  /** Set when events between the client's id and `events[0]` are gone. */
  missed: { reason: MissedReason; last_event_id: string; oldest_event_id: string | null } | null;
}

export interface Subscription {
  /** Stop receiving events. */
  close(): void;
  /** The subscriber could not keep up and is cut off: close and count it. */
  drop(): void;
}

/**
 * Where published events are kept durably (storage/eventJournal.ts). `append`
 * is synchronous and called before any subscriber sees the event: once it
 * returns, the event survives a crash of the process (what survives a power
 * loss is the adapter's fsync policy). It does not throw: a failed write is
 * the adapter's to log and count; the event is still published.
 */
export interface EventJournal {
  append(event: FarmEvent): void;
}

export interface EventHubOptions {
  nodeId: string;
  /** Written to before subscribers see an event; none: events live in memory only. */
  journal?: EventJournal;
  /**
   * Events kept by the journal from earlier runs, oldest first: the last `bufferSize` fill the buffer; one more
   * before them tells the hub that a resume after that one missed nothing.
   */
  history?: readonly FarmEvent[];
  /** Events kept for resuming; default 1,000. */
  bufferSize?: number;
  /** Milliseconds since the epoch; tests pass a fake clock. */
  now?: () => number;
  logger?: Logger;
}

export const DEFAULT_BUFFER_SIZE = 1000;

const ID = /^([0-9a-z]{1,12})-([1-9][0-9]{0,15})$/;

/** An id's place: [boot as a number, n]; undefined for another form. */
function orderOf(id: string): [number, number] | undefined {
  const m = ID.exec(id);
  return m ? [parseInt(m[1]!, 36), Number(m[2])] : undefined;
}

const before = (a: [number, number], b: [number, number]) => a[0] < b[0] || (a[0] === b[0] && a[1] < b[1]);

export class EventHub implements EventSink {
  /** This run's id prefix. */
  readonly boot: string;
  private readonly bootNum: number;
  private readonly size: number;
  private readonly now: () => number;
  /** Ring of the last `size` events; `ring[(pos - 1) % size]` holds the event at position `pos`. */
  private readonly ring: FarmEvent[] = [];
  /** Events ever put in the ring (the journal's history, then this run's); the newest is at this position. */
  private pos = 0;
  /** Position of each event in the ring, by id. */
  private readonly positions = new Map<string, number>();
  /** Events published by this run. */
  private seq = 0;
  /** The id of the newest event no longer in the ring: a resume after it missed nothing. */
  private evicted: string | undefined;
  /** Whether events of earlier runs were loaded: then an earlier run's id older than the oldest kept is `too_old`. */
  private readonly hadHistory: boolean;
  private readonly subscribers = new Set<(e: FarmEvent) => void>();
  private droppedCount = 0;

  constructor(private readonly o: EventHubOptions) {
    this.size = o.bufferSize ?? DEFAULT_BUFFER_SIZE;
    if (!Number.isInteger(this.size) || this.size < 1) throw new Error('bufferSize must be a positive integer');
    this.now = o.now ?? Date.now;
    const all = (o.history ?? []).filter((e) => orderOf(e.id));
    const history = all.slice(-this.size);
    this.evicted = all.at(-this.size - 1)?.id;
    // Later than every kept id even if the clock went back since: ids stay ordered across restarts.
    const newest = history.reduce((m, e) => Math.max(m, orderOf(e.id)![0]), -1);
    this.bootNum = Math.max(this.now(), newest + 1);
    this.boot = this.bootNum.toString(36);
    for (const e of history) this.put(e);
    this.hadHistory = history.length > 0;
  }

  publish<T extends EventType>(type: T, data: EventPayloads[T]): void {
    const event = { id: `${this.boot}-${++this.seq}`, type, time: new Date(this.now()).toISOString(), data: { node_id: this.o.nodeId, ...data } } as FarmEvent;
    // Journal first: a subscriber (the portal link, a stream) never has an event a restart could lose.
    try {
      this.o.journal?.append(event);
    } catch (e) {
      this.o.logger?.error({ err: e, event: event.id }, 'the event journal failed');
    }
    this.put(event);
    for (const fn of [...this.subscribers]) {
      try {
        fn(event);
      } catch (e) {
        this.o.logger?.error({ err: e, event: event.id }, 'an event subscriber failed');
      }
    }
  }

  private put(event: FarmEvent): void {
    const slot = this.pos % this.size;
    const old = this.ring[slot];
    if (old) {
      this.positions.delete(old.id);
      this.evicted = old.id;
    }
    this.ring[slot] = event;
    this.positions.set(event.id, ++this.pos);
  }

  /** Receive every event published from now on, synchronously; `fn` must not block. */
  subscribe(fn: (e: FarmEvent) => void, opts: ReadOptions = {}): Subscription {
    // A Set keeps one entry per function: wrap so the same function can subscribe twice.
    const entry = opts.internal ? (e: FarmEvent) => fn(e) : (e: FarmEvent) => void (isInternalEvent(e) || fn(e));
    this.subscribers.add(entry);
    let open = true;
    const close = () => {
      open = false;
      this.subscribers.delete(entry);
    };
    return {
      close,
      drop: () => {
        if (open) this.droppedCount++;
        close();
      },
    };
  }

  /**
   * What a client resuming after `lastId` gets (undefined: a new client, nothing).
   * Call `subscribe` in the same tick so no event falls in between. An id of
   * another form counts as unknown (the HTTP layer refuses it first, see `isEventId`).
   * A kept id, of this run or an earlier one, answers the events after it in
   * the order they were published. One not kept: `too_old` when the events
   * after it were kept once and are gone (the buffer's bound), `restarted` when
   * it is of an earlier run whose events were not kept (no journal, or lost
   * with it), `unknown_id` when it was never handed out.
   */
  since(lastId: string | undefined, opts: ReadOptions = {}): Resume {
    const r = this.sinceAll(lastId);
    if (opts.internal) return r;
    const events = r.events.filter((e) => !isInternalEvent(e));
    return { events, missed: r.missed && { ...r.missed, oldest_event_id: r.missed.oldest_event_id === null ? null : (this.buffered()[0]?.id ?? null) } };
  }

  private sinceAll(lastId: string | undefined): Resume {
    if (lastId === undefined) return { events: [], missed: null };
    const all = this.buffered({ internal: true });
    const missed = (reason: MissedReason): Resume => ({ events: all, missed: { reason, last_event_id: lastId, oldest_event_id: all[0]?.id ?? null } });
    const at = orderOf(lastId);
    if (!at) return missed('unknown_id');
    const p = this.positions.get(lastId);
    if (p !== undefined) return { events: all.slice(p - (this.pos - all.length)), missed: null };
    if (lastId === this.evicted) return { events: all, missed: null };
    const [boot, n] = at;
    if (boot === this.bootNum) return missed(n > this.seq ? 'unknown_id' : 'too_old');
    if (boot > this.bootNum) return missed('unknown_id');
    const oldest = all[0] && orderOf(all[0].id);
    if (this.hadHistory && oldest && before(at, oldest)) return missed('too_old');
    return missed('restarted');
  }

  /** The buffered events, oldest first (with a journal, those of earlier runs first). */
  buffered(opts: ReadOptions = {}): FarmEvent[] {
    const start = this.pos % this.size;
    const all = this.pos <= this.size ? this.ring.slice(0, this.pos) : [...this.ring.slice(start), ...this.ring.slice(0, start)];
    return opts.internal ? all : all.filter((e) => !isInternalEvent(e));
  }

  /** Events published since start. */
  get published(): number {
    return this.seq;
  }

  /** Subscribers now (SSE clients plus the webhook dispatcher). */
  get subscriberCount(): number {
    return this.subscribers.size;
  }

  /** Subscribers cut off because they could not keep up. */
  get dropped(): number {
    return this.droppedCount;
  }

  /** The id of the last event published by this run; undefined before the first. */
  get lastId(): string | undefined {
    return this.seq === 0 ? undefined : `${this.boot}-${this.seq}`;
  }
}

/** Whether `s` has the form of an event id (`<boot>-<n>`). */
export const isEventId = (s: string): boolean => ID.test(s);

// ---------------------------------------------------------------- builders for emitters

export const jobStarted = (j: JobRecord): JobStartedData => ({
  job_uid: j.job_uid,
  username: j.username,
  test_cases: j.test_cases,
  test_pack_sha: j.test_pack_sha,
  test_pack_branch: j.test_pack_branch,
  category: j.category,
  soak: j.soak,
  remote_control: j.remote_control,
  tags: j.tags,
  start_time: j.start_time,
});

export const jobExited = (j: JobRecord): JobExitedData => ({ job_uid: j.job_uid, end_time: j.end_time, result_counts: { ...j.result_counts } });

/** From the stored record; `infrastructure_error` is read when the record has it, else null. */
export const runFinished = (r: ResultRecord): RunFinishedData => ({
  job_uid: r.job_uid,
  result_id: r.result_id,
  test_case: r.test_case,
  result: r.result,
  failure_reason: r.failure_reason,
  infrastructure_error: (r as { infrastructure_error?: string | null }).infrastructure_error ?? null,
  start_time: r.start_time,
  end_time: r.end_time,
  duration: r.duration,
});

export const reservationData = (r: ReservationRecord): ReservationData => ({
  reservation_id: r.reservation_id,
  username: r.username,
  start_time: r.start_time,
  expires: r.expires,
  message: r.message,
});

/** A reservation that has ended (`r.ended` set): `reservation.interrupted` or `reservation.ended`. */
export function publishReservationEnd(sink: EventSink, r: ReservationRecord): void {
  const e = r.ended;
  if (!e) return;
  const data: ReservationEndedData = { ...reservationData(r), how: e.how, by: e.by, end_message: e.message, end_time: e.time };
  sink.publish(e.how === 'interrupted' ? 'reservation.interrupted' : 'reservation.ended', data);
}

// ---------------------------------------------------------------- node health

/** Time and timers (the reservations' Clock fits). */
export interface WatchClock {
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/**
 * Publish `node.online` / `node.offline` when the node's online state flips.
 * Capture health is a state read on demand (FrameSource.health), so it is
 * sampled every `intervalMs` (default 1 s; a flap shorter than that may go
 * unseen). The first sample sets the state without an event.
 */
export class HealthWatcher {
  private last: boolean | undefined;
  private timer: unknown;
  private stopped = false;

  constructor(
    private readonly o: { health: () => CaptureHealth; sink: EventSink; clock: WatchClock; intervalMs?: number },
  ) {}

  start(): void {
    this.stopped = false;
    this.check();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) this.o.clock.clearTimer(this.timer);
    this.timer = undefined;
  }

  /** Sample now (also called by the timer). */
  check(): void {
    if (this.stopped) return;
    const h = this.o.health();
    if (this.last !== undefined && h.online !== this.last) {
      this.o.sink.publish(h.online ? 'node.online' : 'node.offline', { online: h.online, reason: h.online ? null : h.reason });
    }
    this.last = h.online;
    if (this.timer !== undefined) this.o.clock.clearTimer(this.timer);
    this.timer = this.o.clock.setTimer(() => {
      this.timer = undefined;
      this.check();
    }, this.o.intervalMs ?? 1000);
  }
}
