/**
 * v2 reservations (spec "Reservation (v2)" and its state table): a user holds
 * nodes so nobody else runs, stops or presses keys on them. Pure domain: the
 * records live in memory, a {@link ReservationStore} persists them (storage/
 * state.ts implements it over the state file) and a {@link Clock} arms one
 * timer per expiring reservation, so expiry is exact rather than polled.
 * Choices where the spec is silent are in docs/reservations.md.
 */
import { FarmError, invalid, notFound } from './errors.js';
import { publishReservationEnd, reservationData, type EventSink } from './events.js';
import type { Logger } from './ports.js';

/** Why and how a reservation ended. */
export interface ReservationEnd {
  /** ISO 8601; for an expiry, the expiry instant itself. */
  time: string;
  how: 'ended' | 'interrupted' | 'expired';
  /** Who ended or interrupted it; null when it expired. */
  by: string | null;
  /** The interrupter's message; null unless interrupted. */
  message: string | null;
  /** An interruption by someone else that the owner has not been shown yet. */
  notice_pending: boolean;
}

/** A reservation as stored. `ended` is null while it is active. */
export interface ReservationRecord {
  reservation_id: number;
  node_id: string;
  username: string;
  start_time: string;
  /** ISO 8601, or null: made without duration_secs, never expires. */
  expires: string | null;
  message: string;
  ended: ReservationEnd | null;
}

/** What the owner of an interrupted reservation is told, once. */
export interface InterruptionNotice {
  reservation_id: number;
  node_id: string;
  interrupted_by: string;
  message: string;
  time: string;
}

/** Everything that is persisted. */
export interface ReservationState {
  last_reservation_id: number;
  reservations: ReservationRecord[];
}

/** Persistence port; `save` gets the whole (small, bounded) state. */
export interface ReservationStore {
  load(): ReservationState;
  save(state: ReservationState): Promise<void>;
}

/** Time and timers, injectable so tests can move time by hand. */
export interface Clock {
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

/** The real clock. Timers are unref'd: a pending expiry never keeps the process alive. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimer: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimer: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface ReservationLimits {
  /** Longest message, in characters; default 10,000. */
  maxMessageChars: number;
  /** Most node ids in one request; default 100. */
  maxNodes: number;
  /** Longest duration_secs (reserve or extend); default ten years. */
  maxDurationSecs: number;
  /** Ended reservations kept (for 204/400 answers and notices); default 200. */
  keepEnded: number;
}

/**
 * The limits of a node and of the farm. The request limits (messages, nodes, durations) are checked by the
 * routes' schemas (src/http/openapi/schemas.ts `reservationChecks`), made from these with the messages below;
 * `keepEnded` is the service's.
 */
export const DEFAULT_LIMITS: ReservationLimits = {
  maxMessageChars: 10_000,
  maxNodes: 100,
  maxDurationSecs: 10 * 365 * 24 * 3600,
  keepEnded: 200,
};

/** The longest wait_secs of a farm reservation: an HTTP request held open this long (one hour). */
export const MAX_WAIT_SECS = 3600;

/**
 * The 400 messages of the reservation requests (v2 reserve, extend, interrupt, the id in the path), for the
 * limits the schemas are made with: the words the hand validators gave, kept once, here.
 */
export const reservationMessages = (l: Pick<ReservationLimits, 'maxMessageChars' | 'maxNodes' | 'maxDurationSecs'>) =>
  ({
    body: 'the body must be a JSON object with node_ids and message',
    nodeIds: 'node_ids must be a non-empty array of node id strings',
    tooManyNodes: `node_ids: at most ${l.maxNodes} nodes in one request`,
    listedTwice: (id: string) => `node_ids: ${id} is listed twice`,
    message: 'message is required: a string shown to other users while the reservation is active',
    messageLength: `message: at most ${l.maxMessageChars} characters`,
    /** duration_secs of a reserve (optional) or an extend (required). */
    duration: (optional: boolean) => `duration_secs must be a whole number of seconds from 1 to ${l.maxDurationSecs}${optional ? ', or null for no expiry' : ''}`,
    /** The farm's extensions (lease_secs, wait_secs). */
    secs: (name: string, max: number) => `${name} must be a whole number of seconds from 1 to ${max}, or null`,
    interruptMessage: 'message is required: a non-empty string telling the owner why their reservation was interrupted',
    id: (text: unknown) => `reservation id must be a positive integer, not ${JSON.stringify(text)}`,
  }) as const;

/** A reserve body the route's schema accepted (the farm's extensions are the farm's). */
export interface ReserveBody {
  node_ids: string[];
  message: string;
  duration_secs?: number | null;
}

export interface ReservationServiceOptions {
  store: ReservationStore;
  /** Node ids a reservation may name (this daemon: its own). */
  knownNodes: () => readonly string[];
  /** True while a job runs on the node. */
  isBusy: (nodeId: string) => boolean;
  /** Why an administrator holds the node out of service (core/maintenance.ts), or null; absent: never. */
  maintenance?: (nodeId: string) => string | null;
  clock?: Clock;
  logger?: Logger;
  /** How many ended reservations are kept; the request limits are the routes' schemas' (DEFAULT_LIMITS). */
  limits?: Partial<Pick<ReservationLimits, 'keepEnded'>>;
  /** Where made/extended/ended/interrupted events go (docs/events.md). */
  events?: EventSink;
}

/** setTimeout's longest delay (2^31 - 1 ms, about 24.8 days); longer waits re-arm. */
const MAX_TIMER_MS = 2 ** 31 - 1;

const iso = (ms: number) => new Date(ms).toISOString();

export class ReservationService {
  private readonly clock: Clock;
  private readonly limits: ReservationLimits;
  private readonly records = new Map<number, ReservationRecord>();
  private readonly timers = new Map<number, unknown>();
  private lastId: number;

  constructor(private readonly o: ReservationServiceOptions) {
    this.clock = o.clock ?? systemClock;
    this.limits = { ...DEFAULT_LIMITS, ...o.limits };
    const s = o.store.load();
    this.lastId = s.last_reservation_id;
    for (const r of s.reservations) this.records.set(r.reservation_id, r);
  }

  /** End what expired while the daemon was down; arm a timer for every other expiring reservation. */
  async start(): Promise<void> {
    const expired = [...this.records.values()].filter((r) => !r.ended && this.isDue(r));
    for (const r of expired) this.finish(r, { how: 'expired', time: r.expires as string, by: null, message: null }, true);
    for (const r of this.records.values()) if (!r.ended) this.arm(r);
    if (expired.length) await this.persist();
  }

  /** Clear every timer (the daemon is stopping); the state on disk is already current. */
  stop(): void {
    for (const h of this.timers.values()) this.clock.clearTimer(h);
    this.timers.clear();
  }

  /**
   * Reserve every node in `body.node_ids` for `user`, or none (spec: atomic). The body is the route's schema's
   * (src/http/endpoints/v2.ts: 400 for a bad one, before this is called).
   * 404 an unknown node, 409 a node reserved or running a job.
   */
  async reserve(user: string, body: ReserveBody): Promise<ReservationRecord[]> {
    const req = { nodeIds: body.node_ids, message: body.message, durationSecs: body.duration_secs ?? null };
    const known = new Set(this.o.knownNodes());
    const unknown = req.nodeIds.filter((n) => !known.has(n));
    if (unknown.length) throw notFound(`unknown node_id: ${unknown.join(', ')}`);
    const taken = req.nodeIds.map((n) => this.whyTaken(n)).filter((why) => why !== undefined);
    if (taken.length) throw new FarmError('conflict', `nothing was reserved: ${taken.join('; ')}`);
    // No await between the checks above and the inserts below: no other request can slip in.
    const now = this.clock.now();
    const made = req.nodeIds.map((node_id) => {
      const r: ReservationRecord = {
        reservation_id: ++this.lastId,
        node_id,
        username: user,
        start_time: iso(now),
        expires: req.durationSecs === null ? null : iso(now + req.durationSecs * 1000),
        message: req.message,
        ended: null,
      };
      this.records.set(r.reservation_id, r);
      this.arm(r);
      return r;
    });
    try {
      await this.persist();
    } catch (e) {
      // Not written, so not made: a 500 must not leave the nodes held (the ids stay used, harmlessly).
      for (const r of made) {
        this.finish(r, { how: 'ended', time: iso(now), by: user, message: null });
        this.records.delete(r.reservation_id);
      }
      throw e;
    }
    for (const r of made) this.o.events?.publish('reservation.made', reservationData(r));
    return made;
  }

  /** Move `expires` later by duration_secs (checked by the route's schema). 404 unknown, 400 ended, 403 not the creator. */
  async extend(user: string, id: number, secs: number): Promise<void> {
    const r = this.lookup(id);
    if (!r || r.ended) throw invalid(`reservation ${id} has already ended; make a new reservation`);
    if (r.username !== user) throw new FarmError('forbidden', `reservation ${id} was made by ${r.username}; only they can extend it`);
    // A reservation without expiry never ends by itself: extending it changes nothing (docs/reservations.md).
    if (r.expires === null) return;
    r.expires = iso(Date.parse(r.expires) + secs * 1000);
    this.arm(r);
    await this.persist();
    this.o.events?.publish('reservation.extended', reservationData(r));
  }

  /** DELETE: the creator ends the reservation. An ended one answers success to anyone (spec table). */
  async end(user: string, id: number): Promise<void> {
    const r = this.lookup(id);
    if (!r || r.ended) return;
    if (r.username !== user) {
      throw new FarmError('forbidden', `reservation ${id} was made by ${r.username}; ask them, or interrupt it with a message`);
    }
    this.finish(r, { how: 'ended', time: iso(this.clock.now()), by: user, message: null }, true);
    await this.persist();
  }

  /** Any user ends the reservation with a message the owner is shown (see {@link takeNotice}); the message is the route schema's (not blank, bounded). */
  async interrupt(user: string, id: number, message: string): Promise<void> {
    const r = this.lookup(id);
    if (!r || r.ended) return;
    this.finish(r, { how: 'interrupted', time: iso(this.clock.now()), by: user, message }, true);
    await this.persist();
  }

  /** The active reservation of a node, if any (an expired one whose timer is late counts as ended). */
  active(nodeId: string): ReservationRecord | undefined {
    for (const r of this.records.values()) {
      if (r.node_id !== nodeId || r.ended) continue;
      if (!this.isDue(r)) return r;
      this.expire(r);
    }
    return undefined;
  }

  /** A reservation by id, active or ended; undefined when unknown or long forgotten. */
  get(id: number): ReservationRecord | undefined {
    const r = this.records.get(id);
    if (r && !r.ended && this.isDue(r)) this.expire(r);
    return r;
  }

  /**
   * Throw FarmError('forbidden') when someone other than `user` holds the node
   * (`user` undefined: an anonymous v1 caller, blocked by any reservation).
   * `what` says what was refused, e.g. "run tests".
   */
  assertCanUse(user: string | undefined, nodeId: string, what: string): void {
    const r = this.active(nodeId);
    if (!r || r.username === user) return;
    const until = r.expires ? `until ${r.expires}` : 'with no expiry';
    throw new FarmError(
      'forbidden',
      `cannot ${what}: node ${nodeId} is reserved by ${r.username} ${until} (reservation ${r.reservation_id}): ${JSON.stringify(r.message)}. ` +
        `Ask them, or interrupt it: POST /api/v2/reservations/${r.reservation_id}/interrupt with a message`,
      { reservation_id: r.reservation_id, username: r.username },
    );
  }

  /**
   * The interruptions of `user`'s reservations not yet shown to them, optionally
   * only those about one node or reservation; each is returned once.
   */
  takeNotice(user: string, about: { nodeId?: string; reservationId?: number } = {}): InterruptionNotice[] {
    const out: InterruptionNotice[] = [];
    for (const r of this.records.values()) {
      const e = r.ended;
      if (!e?.notice_pending || r.username !== user) continue;
      if (about.nodeId !== undefined && r.node_id !== about.nodeId) continue;
      if (about.reservationId !== undefined && r.reservation_id !== about.reservationId) continue;
      e.notice_pending = false;
      out.push({ reservation_id: r.reservation_id, node_id: r.node_id, interrupted_by: e.by ?? '', message: e.message ?? '', time: e.time });
    }
    if (out.length) this.persistSoon();
    return out;
  }

  // ------------------------------------------------------------ internals

  /** A known id: stored, or at most the counter (ended, then pruned); else 404. */
  private lookup(id: number): ReservationRecord | undefined {
    if (!Number.isSafeInteger(id) || id < 1 || id > this.lastId) throw notFound(`reservation ${id} does not exist`);
    return this.get(id);
  }

  private whyTaken(nodeId: string): string | undefined {
    const maintenance = this.o.maintenance?.(nodeId) ?? null;
    if (maintenance !== null) return `node ${nodeId} is in maintenance: ${maintenance}`;
    const r = this.active(nodeId);
    if (r) return `node ${nodeId} is reserved by ${r.username} (reservation ${r.reservation_id})`;
    if (this.o.isBusy(nodeId)) return `node ${nodeId} is running a test job`;
    return undefined;
  }

  private isDue(r: ReservationRecord): boolean {
    return r.expires !== null && Date.parse(r.expires) <= this.clock.now();
  }

  private expire(r: ReservationRecord): void {
    this.finish(r, { how: 'expired', time: r.expires as string, by: null, message: null }, true);
    this.persistSoon();
  }

  /** End a reservation; `announce`: publish its end (not for a reservation undone because it could not be saved). */
  private finish(r: ReservationRecord, end: Omit<ReservationEnd, 'notice_pending'>, announce = false): void {
    r.ended = { ...end, notice_pending: end.how === 'interrupted' && end.by !== r.username };
    if (announce && this.o.events) publishReservationEnd(this.o.events, r);
    const h = this.timers.get(r.reservation_id);
    if (h !== undefined) this.clock.clearTimer(h);
    this.timers.delete(r.reservation_id);
    this.prune();
  }

  /** One timer per expiring reservation, set to its expiry instant (re-armed past setTimeout's limit). */
  private arm(r: ReservationRecord): void {
    const old = this.timers.get(r.reservation_id);
    if (old !== undefined) this.clock.clearTimer(old);
    this.timers.delete(r.reservation_id);
    if (r.expires === null || r.ended) return;
    const remaining = Math.max(0, Date.parse(r.expires) - this.clock.now());
    // A timer for the whole remaining time is the expiry itself: Node may run it a millisecond before
    // Date.now() reaches the instant (its timers keep their own clock), and the end is recorded at
    // `expires` anyway. Only a wait longer than setTimeout takes is re-armed for the rest.
    const whole = remaining <= MAX_TIMER_MS;
    const handle = this.clock.setTimer(() => {
      this.timers.delete(r.reservation_id);
      if (r.ended) return;
      if (whole || this.isDue(r)) this.expire(r);
      else this.arm(r);
    }, Math.min(remaining, MAX_TIMER_MS));
    this.timers.set(r.reservation_id, handle);
  }

  /** Keep every active reservation and the most recently ended ones; the state file stays bounded. */
  private prune(): void {
    const ended = [...this.records.values()].filter((r) => r.ended).sort((a, b) => (a.ended!.time < b.ended!.time ? 1 : -1));
    for (const r of ended.slice(this.limits.keepEnded)) {
      this.records.delete(r.reservation_id);
    }
  }

  private persist(): Promise<void> {
    return this.o.store.save({ last_reservation_id: this.lastId, reservations: structuredClone([...this.records.values()]) });
  }

  /** For changes made on a read path (an expiry, a notice taken): write in the background. */
  private persistSoon(): void {
    this.persist().catch((e: unknown) => this.o.logger?.error({ err: e }, 'could not save reservations'));
  }
}

/** One line for a notice, for an error message or a log: who interrupted which reservation, and why. */
export const formatNotice = (n: InterruptionNotice): string =>
  `your reservation ${n.reservation_id} of node ${n.node_id} was interrupted by ${n.interrupted_by} at ${n.time}: ${JSON.stringify(n.message)}`;
