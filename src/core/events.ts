/**
 * The event hub: what happened on the node (jobs, runs, node health,
 * reservations, key presses), as typed events with ids, kept in a bounded
 * ring buffer so a client that reconnects resumes where it left off.
 * Transport-free: the SSE endpoint (http/events.ts) and the webhooks
 * (http/webhookDelivery.ts) subscribe to it. docs/events.md has the payloads.
 *
 * - Ids are `<boot>-<n>`: `boot` is the start instant of this hub (ms since
 *   the epoch, base 36), `n` counts from 1. They increase within one daemon
 *   run and never repeat across restarts (the data-directory lock allows one
 *   daemon at a time, and each start is a later millisecond). Nothing is
 *   persisted: after a restart the buffer is empty, and a client resuming
 *   with an id of an earlier boot is told it missed events.
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
}

export type EventType = keyof EventPayloads;

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

export interface EventHubOptions {
  nodeId: string;
  /** Events kept for resuming; default 1,000. */
  bufferSize?: number;
  /** Milliseconds since the epoch; tests pass a fake clock. */
  now?: () => number;
  logger?: Logger;
}

export const DEFAULT_BUFFER_SIZE = 1000;

const ID = /^([0-9a-z]{1,12})-([1-9][0-9]{0,15})$/;

export class EventHub implements EventSink {
  /** This run's id prefix. */
  readonly boot: string;
  private readonly size: number;
  private readonly now: () => number;
  /** Ring of the last `size` events; `ring[(seq - 1) % size]` holds event `seq`. */
  private readonly ring: FarmEvent[] = [];
  private seq = 0;
  private readonly subscribers = new Set<(e: FarmEvent) => void>();
  private droppedCount = 0;

  constructor(private readonly o: EventHubOptions) {
    this.size = o.bufferSize ?? DEFAULT_BUFFER_SIZE;
    if (!Number.isInteger(this.size) || this.size < 1) throw new Error('bufferSize must be a positive integer');
    this.now = o.now ?? Date.now;
    this.boot = this.now().toString(36);
  }

  publish<T extends EventType>(type: T, data: EventPayloads[T]): void {
    const event = { id: `${this.boot}-${++this.seq}`, type, time: new Date(this.now()).toISOString(), data: { node_id: this.o.nodeId, ...data } } as FarmEvent;
    this.ring[(this.seq - 1) % this.size] = event;
    for (const fn of [...this.subscribers]) {
      try {
        fn(event);
      } catch (e) {
        this.o.logger?.error({ err: e, event: event.id }, 'an event subscriber failed');
      }
    }
  }

  /** Receive every event published from now on, synchronously; `fn` must not block. */
  subscribe(fn: (e: FarmEvent) => void): Subscription {
    // A Set keeps one entry per function: wrap so the same function can subscribe twice.
    const entry = (e: FarmEvent) => fn(e);
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
   */
  since(lastId: string | undefined): Resume {
    if (lastId === undefined) return { events: [], missed: null };
    const m = ID.exec(lastId);
    const all = this.buffered();
    const missed = (reason: MissedReason): Resume => ({ events: all, missed: { reason, last_event_id: lastId, oldest_event_id: all[0]?.id ?? null } });
    if (!m) return missed('unknown_id');
    if (m[1] !== this.boot) return missed('restarted');
    const n = Number(m[2]);
    if (n > this.seq) return missed('unknown_id');
    const oldest = this.seq - all.length + 1;
    if (n < oldest - 1) return missed('too_old');
    return { events: all.slice(n - oldest + 1), missed: null };
  }

  /** The buffered events, oldest first. */
  buffered(): FarmEvent[] {
    if (this.seq <= this.size) return this.ring.slice(0, this.seq);
    const start = this.seq % this.size;
    return [...this.ring.slice(start), ...this.ring.slice(0, start)];
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

  /** The id of the last event published; undefined before the first. */
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
