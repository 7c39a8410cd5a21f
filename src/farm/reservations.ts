/**
 * Reservations across the farm, in PostgreSQL (docs/farm.md, "Reservations"): the single node's
 * rules (src/core/reservations.ts: codes, validation, the spec's state table) over many nodes.
 *
 * - All or nothing in one transaction: the requested `nodes` rows are locked in node-id order
 *   (`SELECT ... FOR UPDATE`), so overlapping requests serialise and never deadlock; the partial
 *   unique index `reservation_nodes_one_active` refuses a double booking should anything slip by.
 * - The database clock decides: an expired reservation (or lease) counts as ended in every query
 *   (compared with now()); a sweeper marks them ended about every second and announces it.
 * - Extensions: `lease_secs` (ends unless renewed by extend) and `wait_secs` (a first come, first
 *   served queue, in this process's memory, instead of a 409).
 * Everything else lives in the database, so a restarted portal sees every reservation.
 */
import type pg from 'pg';
import type { FarmWakeups } from './wakeups.js';
import { FarmError, invalid, notFound } from '../core/errors.js';
import type { EventType, ReservationData, ReservationEndedData } from '../core/events.js';
import type { Logger } from '../core/ports.js';
import type { InterruptionNotice } from '../core/reservations.js';
import type { FarmEventLog, FarmReservation, FarmReservations, ReserveRequest } from './contract.js';
import { inTransaction } from './db/pool.js';

/** A farm reservation with its lease deadline (the extension's second field). */
export interface PgReservation extends FarmReservation {
  /** ISO 8601: when the lease runs out unless renewed; null without a lease. */
  lease_until: string | null;
}

export interface PgReservationsOptions {
  pool: pg.Pool;
  /**
   * Why a node cannot be reserved now (offline, running a job, licence expired); null = free. `db` is the reserving
   * transaction's connection (a replica reads there what it knows of a node held by another one).
   */
  isBusy(nodeId: string, db: pg.PoolClient): string | null | Promise<string | null>;
  events?: FarmEventLog;
  logger: Logger;
  /** How often expired reservations and leases are marked ended (default 1,000 ms). */
  sweepMs?: number;
  /** How often waiting requests are tried again while any waits (default 500 ms): isBusy changes outside the database. */
  recheckMs?: number;
  /**
   * The farmhand channel (src/farm/wakeups.ts): an end on any replica is told to every replica, whose waiting
   * requests are tried at once instead of at their next recheck.
   */
  wakeups?: FarmWakeups | undefined;
}

export { MAX_WAIT_SECS } from '../core/reservations.js';

const LIVE = `(r.ended_at IS NULL AND (r.expires_at IS NULL OR r.expires_at > now()) AND (r.lease_until IS NULL OR r.lease_until > now()))`;
const DUE = `(r.ended_at IS NULL AND (r.expires_at <= now() OR r.lease_until <= now()))`;
const COLUMNS = `r.reservation_id, n.node_id, r.username, r.created_at, r.expires_at, r.message, r.lease_secs, r.lease_until,
  r.ended_at, r.end_reason, r.ended_by, r.end_message, r.group_id, ${LIVE} AS live`;

interface Row {
  reservation_id: string;
  node_id: string;
  username: string;
  created_at: Date;
  expires_at: Date | null;
  message: string;
  lease_secs: number | null;
  lease_until: Date | null;
  ended_at: Date | null;
  end_reason: 'ended' | 'expired' | 'interrupted' | null;
  ended_by: string | null;
  end_message: string | null;
  group_id: string;
  live: boolean;
}

/** A reserve request after validation. */
interface Checked {
  nodeIds: string[];
  message: string;
  durationSecs: number | null;
  username: string;
  leaseSecs: number | null;
  waitSecs: number | null;
}

/** One request in the wait queue. */
interface Waiter {
  req: Checked;
  state: 'waiting' | 'trying' | 'done';
  timedOut: boolean;
  aborted: boolean;
  why: string;
  timer: NodeJS.Timeout;
  resolve(made: PgReservation[]): void;
  reject(e: unknown): void;
  cleanup(): void;
}

const iso = (d: Date | null): string | null => (d ? d.toISOString() : null);

function toReservation(row: Row): PgReservation {
  return {
    reservation_id: Number(row.reservation_id),
    node_id: row.node_id,
    username: row.username,
    start_time: row.created_at.toISOString(),
    expires: iso(row.expires_at),
    message: row.message,
    ended: !row.live,
    lease_secs: row.lease_secs,
    lease_until: iso(row.lease_until),
  };
}

const reservationData = (r: Row): ReservationData => ({
  reservation_id: Number(r.reservation_id),
  username: r.username,
  start_time: r.created_at.toISOString(),
  expires: iso(r.expires_at),
  message: r.message,
});

const endedData = (r: Row): ReservationEndedData => ({
  ...reservationData(r),
  how: r.end_reason ?? 'ended',
  by: r.ended_by,
  end_message: r.end_message,
  end_time: (r.ended_at ?? new Date()).toISOString(),
});

// The requests' shapes and limits (the single node's rules, and the extensions lease_secs and wait_secs) are
// checked by the routes' schemas before these are called (src/http/endpoints/v2.ts `portalCheck`).

function check(req: ReserveRequest): Checked {
  return {
    nodeIds: req.node_ids,
    message: req.message,
    durationSecs: req.duration_secs ?? null,
    username: req.username,
    leaseSecs: req.lease_secs ?? null,
    waitSecs: req.wait_secs ?? null,
  };
}

const isPgError = (e: unknown, code: string): boolean => (e as { code?: unknown })?.code === code;

/** Thrown to a waiter whose client went away, or when the portal stops. */
const gone = (why: string) => new FarmError('device_unavailable', why);

/** Locks the nodes' rows (in node order: two reservers never deadlock); 404 naming the unknown ones. The reservations that hold them. */
async function lockAndHeld(db: pg.PoolClient, nodeIds: readonly string[]): Promise<Row[]> {
  const locked = await db.query<{ node_id: string }>('SELECT node_id FROM nodes WHERE node_id = ANY($1::text[]) ORDER BY node_id FOR UPDATE', [nodeIds]);
  if (locked.rowCount !== nodeIds.length) {
    const known = new Set(locked.rows.map((r) => r.node_id));
    throw notFound(`unknown node_id: ${nodeIds.filter((n) => !known.has(n)).join(', ')}`);
  }
  const held = await db.query<Row>(
    `SELECT ${COLUMNS} FROM reservations r JOIN reservation_nodes n USING (reservation_id) WHERE n.node_id = ANY($1::text[]) AND n.active`,
    [nodeIds],
  );
  return held.rows;
}

/** One reservation per node, of one group, in the order asked. */
async function insertReservations(db: pg.PoolClient, c: Checked): Promise<Row[]> {
  const made = await db.query<Row>(
    `WITH ids AS (
       SELECT nextval('reservations_reservation_id_seq') AS id, u.node_id, u.ord FROM unnest($1::text[]) WITH ORDINALITY AS u(node_id, ord)
     ), grp AS (SELECT nextval('reservation_groups') AS id),
     r AS (
       INSERT INTO reservations (reservation_id, group_id, username, message, created_at, expires_at, lease_secs, lease_until)
       SELECT ids.id, grp.id, $2, $3, clock_timestamp(), clock_timestamp() + make_interval(secs => $4::double precision),
              $5::integer, clock_timestamp() + make_interval(secs => $5::double precision)
       FROM ids, grp ORDER BY ids.ord
       RETURNING *
     ), n AS (
       INSERT INTO reservation_nodes (reservation_id, node_id) SELECT id, node_id FROM ids RETURNING reservation_id
     )
     SELECT r.reservation_id, ids.node_id, r.username, r.created_at, r.expires_at, r.message, r.lease_secs, r.lease_until,
            r.ended_at, r.end_reason, r.ended_by, r.end_message, r.group_id, true AS live
     FROM r JOIN ids ON ids.id = r.reservation_id ORDER BY ids.ord`,
    [c.nodeIds, c.username, c.message, c.durationSecs, c.leaseSecs],
  );
  return made.rows;
}

// ------------------------------------------------------------------ the service

export class PgReservations implements FarmReservations {
  private readonly pool: pg.Pool;
  private readonly queue: Waiter[] = [];
  private sweeper: NodeJS.Timeout | undefined;
  private recheck: NodeJS.Timeout | undefined;
  private sweeping: Promise<void> | undefined;
  private pumping = false;
  /** The pass in progress, so close() waits for it before the pool goes. */
  private pumped: Promise<void> | undefined;
  private pumpAgain = false;
  private events: Promise<void> = Promise.resolve();
  private closed = false;
  private readonly unwake: (() => void)[] = [];

  constructor(private readonly o: PgReservationsOptions) {
    this.pool = o.pool;
  }

  /** Start the sweeper (ends what expired while no portal ran, then about every second). */
  async start(): Promise<void> {
    const w = this.o.wakeups;
    if (w) {
      // Another replica (or this one) ended reservations, or the LISTEN connection came back: waiters try now.
      const wake = () => {
        if (this.queue.length && !this.closed) void this.pump();
      };
      this.unwake.push(w.on('reservation_ended', wake), w.on('resync', wake));
    }
    await this.sweep();
    this.sweeper = setInterval(() => void this.sweep(), this.o.sweepMs ?? 1000);
    this.sweeper.unref();
  }

  /** Stop the timers; waiting requests are answered 503 (the portal is stopping). Events already made are delivered. */
  async close(): Promise<void> {
    this.closed = true;
    for (const u of this.unwake.splice(0)) u();
    clearInterval(this.sweeper);
    clearInterval(this.recheck);
    for (const w of [...this.queue]) this.settle(w, gone('the portal is stopping; send the request again'));
    await this.pumped;
    await this.sweeping;
    await this.events;
  }

  /** Waiting requests, for metrics and tests. */
  get waiting(): number {
    return this.queue.length;
  }

  /**
   * All or nothing (the request as the route's schema accepted it): 404 an unknown node, 409 a node reserved or busy (nothing is reserved).
   * With wait_secs, a 409 becomes a place in the queue (first come, first served) for up to that long.
   */
  async reserve(req: ReserveRequest, signal?: AbortSignal): Promise<PgReservation[]> {
    const c = check(req);
    if (c.waitSecs === null) {
      const out = await this.tryReserve(c);
      if ('made' in out) return out.made;
      throw new FarmError('conflict', out.conflict);
    }
    if (signal?.aborted) throw gone('the client went away');
    // First come, first served among waiters: never take a node an earlier waiter is waiting for.
    const wanted = new Set(c.nodeIds);
    if (!this.queue.some((w) => w.req.nodeIds.some((n) => wanted.has(n)))) {
      const out = await this.tryReserve(c);
      if ('made' in out && signal?.aborted) {
        for (const r of out.made) await this.end(r.reservation_id, r.username).catch(() => undefined);
        throw gone('the client went away');
      }
      if ('made' in out) return out.made;
      return this.enqueue(c, out.conflict, signal);
    }
    return this.enqueue(c, 'an earlier request is waiting for the same nodes', signal);
  }

  /** expires += duration_secs (creator only); also renews the lease of every reservation the request made. */
  async extend(id: number, username: string, secs: number): Promise<void> {
    const out = await this.tx(async (db): Promise<{ error?: FarmError; ended?: Row[]; extended?: Row }> => {
      const r = await this.lockOne(db, id);
      if (!r.live) return { error: invalid(`reservation ${id} has already ended; make a new reservation`), ended: await this.expireIfDue(db, r) };
      if (r.username !== username) return { error: new FarmError('forbidden', `reservation ${id} was made by ${r.username}; only they can extend it`) };
      // Leases of the whole request are renewed in id order (the order every statement locks them in).
      await db.query(
        `UPDATE reservations r SET lease_until = now() + make_interval(secs => r.lease_secs)
         WHERE r.reservation_id IN (SELECT r.reservation_id FROM reservations r WHERE r.group_id = $1 AND r.lease_secs IS NOT NULL AND ${LIVE}
                                    ORDER BY r.reservation_id FOR UPDATE)`,
        [r.group_id],
      );
      // No expiry: it already lasts for ever, and extending changes nothing (the single node's choice).
      const moved = await db.query<Row>(
        `UPDATE reservations r SET expires_at = r.expires_at + make_interval(secs => $2::double precision)
         FROM reservation_nodes n WHERE r.reservation_id = $1 AND n.reservation_id = r.reservation_id AND r.expires_at IS NOT NULL
         RETURNING ${COLUMNS}`,
        [id, secs],
      );
      return { extended: moved.rows[0] };
    });
    this.announceEnded(out.ended ?? []);
    if (out.extended) this.emit('reservation.extended', out.extended.node_id, reservationData(out.extended));
    await this.events;
    if (out.error) throw out.error;
  }

  /** DELETE: the creator ends it; an ended one answers success to anyone. */
  async end(id: number, username: string): Promise<void> {
    await this.finish(id, async (db, r) => {
      if (r.username !== username) throw new FarmError('forbidden', `reservation ${id} was made by ${r.username}; ask them, or interrupt it with a message`);
      return this.endRow(db, id, 'ended', username, null);
    });
  }

  /** Anyone ends it with a message the owner is shown (not blank, bounded: the route's schema, so a 400 even when ended). */
  async interrupt(id: number, username: string, message: string): Promise<void> {
    await this.finish(id, (db) => this.endRow(db, id, 'interrupted', username, message));
  }

  async active(nodeId: string): Promise<PgReservation | undefined> {
    const { rows } = await this.pool.query<Row>(
      `SELECT ${COLUMNS} FROM reservations r JOIN reservation_nodes n USING (reservation_id) WHERE n.node_id = $1 AND n.active AND ${LIVE}`,
      [nodeId],
    );
    return rows[0] && toReservation(rows[0]);
  }

  async activeAll(): Promise<Map<string, PgReservation>> {
    const { rows } = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM reservations r JOIN reservation_nodes n USING (reservation_id) WHERE n.active AND ${LIVE}`);
    return new Map(rows.map((r) => [r.node_id, toReservation(r)]));
  }

  /** A reservation by id, live or ended; undefined when never issued. */
  async get(id: number): Promise<PgReservation | undefined> {
    const { rows } = await this.pool.query<Row>(`SELECT ${COLUMNS} FROM reservations r JOIN reservation_nodes n USING (reservation_id) WHERE r.reservation_id = $1`, [id]);
    return rows[0] && toReservation(rows[0]);
  }

  /**
   * The interruptions of `user`'s reservations not yet shown to them (optionally only about one node or
   * reservation), each returned once (the single node's takeNotice, docs/reservations.md).
   */
  async takeNotices(user: string, about: { nodeId?: string; reservationId?: number } = {}): Promise<InterruptionNotice[]> {
    const { rows } = await this.pool.query<Row>(
      `UPDATE reservations r SET notice_pending = false FROM reservation_nodes n
       WHERE n.reservation_id = r.reservation_id AND r.notice_pending AND r.username = $1
         AND ($2::text IS NULL OR n.node_id = $2) AND ($3::bigint IS NULL OR r.reservation_id = $3)
       RETURNING ${COLUMNS}`,
      [user, about.nodeId ?? null, about.reservationId ?? null],
    );
    return rows
      .sort((a, b) => Number(a.reservation_id) - Number(b.reservation_id))
      .map((r) => ({
        reservation_id: Number(r.reservation_id),
        node_id: r.node_id,
        interrupted_by: r.ended_by ?? '',
        message: r.end_message ?? '',
        time: (r.ended_at as Date).toISOString(),
      }));
  }

  /** Mark every reservation past its expiry or lease ended (each once, even with several portals); returns how many. */
  async sweep(): Promise<number> {
    if (this.sweeping) return 0;
    let count = 0;
    this.sweeping = (async () => {
      try {
        const ended = await this.tx((db) => this.expireDue(db, null));
        count = ended.length;
        this.announceEnded(ended);
        await this.events;
      } catch (e) {
        this.o.logger.warn({ err: e }, 'reservation sweep failed; trying again in a second');
      }
    })();
    await this.sweeping;
    this.sweeping = undefined;
    return count;
  }

  // ------------------------------------------------------------ internals

  /** One attempt: the reservations made, or why not (409). 400/404 are thrown. */
  private async tryReserve(c: Checked): Promise<{ made: PgReservation[] } | { conflict: string }> {
    let out: { ended: Row[]; made?: Row[]; conflict?: string };
    try {
      out = await this.tx(async (db) => {
        const held = await lockAndHeld(db, c.nodeIds);
        // Past their time but not swept yet: ended now, so the unique index lets the new rows in.
        const ended = held.some((r) => !r.live) ? await this.expireDue(db, c.nodeIds) : [];
        const taken = await this.taken(db, c.nodeIds, held);
        if (taken.length) return { ended, conflict: `nothing was reserved: ${taken.join('; ')}` };
        return { ended, made: await insertReservations(db, c) };
      });
    } catch (e) {
      // The last line of defence: the partial unique index refused a second live reservation of a node.
      if (isPgError(e, '23505')) return { conflict: 'nothing was reserved: a node was reserved at the same moment; try again' };
      throw e;
    }
    this.announceEnded(out.ended);
    for (const r of out.made ?? []) this.emit('reservation.made', r.node_id, reservationData(r));
    // When a call returns, its events are in the log (a client reading events next sees them).
    await this.events;
    if (!out.made) return { conflict: out.conflict as string };
    return { made: out.made.map(toReservation) };
  }

  /** Why each node that is not free cannot be reserved: held by a live reservation, or busy (a job). */
  private async taken(db: pg.PoolClient, nodeIds: readonly string[], held: readonly Row[]): Promise<string[]> {
    const holder = new Map(held.filter((r) => r.live).map((r) => [r.node_id, r]));
    const taken: string[] = [];
    for (const node of nodeIds) {
      const r = holder.get(node);
      const busy = r ? null : await this.o.isBusy(node, db);
      if (r) taken.push(`node ${node} is reserved by ${r.username} (reservation ${r.reservation_id})`);
      else if (busy !== null) taken.push(`node ${node} is not free: ${busy}`);
    }
    return taken;
  }

  /** end / interrupt: 404 never issued; 204 when already ended (an unswept expiry is ended now); else `act`. */
  private async finish(id: number, act: (db: pg.PoolClient, r: Row) => Promise<Row[]>): Promise<void> {
    const ended = await this.tx(async (db) => {
      const r = await this.lockOne(db, id);
      if (!r.live) return this.expireIfDue(db, r);
      return act(db, r);
    });
    this.announceEnded(ended);
    await this.events;
  }

  private async endRow(db: pg.PoolClient, id: number, how: 'ended' | 'interrupted', by: string, message: string | null): Promise<Row[]> {
    const { rows } = await db.query<Row>(
      `WITH e AS (
         UPDATE reservations SET ended_at = clock_timestamp(), end_reason = $2, ended_by = $3, end_message = $4,
                                 notice_pending = ($2 = 'interrupted' AND username <> $3)
         WHERE reservation_id = $1 AND ended_at IS NULL RETURNING *
       ), n AS (UPDATE reservation_nodes SET active = false WHERE reservation_id IN (SELECT reservation_id FROM e) RETURNING node_id, reservation_id)
       SELECT r.reservation_id, n.node_id, r.username, r.created_at, r.expires_at, r.message, r.lease_secs, r.lease_until,
              r.ended_at, r.end_reason, r.ended_by, r.end_message, r.group_id, false AS live
       FROM e r JOIN n USING (reservation_id)`,
      [id, how, by, message],
    );
    return rows;
  }

  /** The reservation `id`, locked; 404 when never issued. */
  private async lockOne(db: pg.PoolClient, id: number): Promise<Row> {
    const { rows } = await db.query<Row>(
      `SELECT ${COLUMNS} FROM reservations r JOIN reservation_nodes n USING (reservation_id) WHERE r.reservation_id = $1 FOR UPDATE OF r`,
      [id],
    );
    if (!rows[0]) throw notFound(`reservation ${id} does not exist`);
    return rows[0];
  }

  private expireIfDue(db: pg.PoolClient, r: Row): Promise<Row[]> {
    return r.ended_at === null ? this.expireDue(db, null, r.reservation_id) : Promise.resolve([]);
  }

  /**
   * Mark ended (how `expired`, at the expiry instant) the live reservations past their expiry or lease:
   * of `nodes`, of one id, or all. Rows are locked in id order; the sweep skips rows another
   * transaction holds (it comes back in a second), so it never waits on, nor deadlocks with, a request.
   */
  private async expireDue(db: pg.PoolClient, nodes: string[] | null, id?: string): Promise<Row[]> {
    const where = nodes ? 'AND r.reservation_id IN (SELECT reservation_id FROM reservation_nodes WHERE node_id = ANY($1::text[]) AND active)' : id ? 'AND r.reservation_id = $1' : '';
    const { rows } = await db.query<Row>(
      `WITH due AS (
         SELECT r.reservation_id FROM reservations r WHERE ${DUE} ${where} ORDER BY r.reservation_id FOR UPDATE ${nodes || id ? '' : 'SKIP LOCKED'}
       ), e AS (
         UPDATE reservations r SET ended_at = LEAST(r.expires_at, r.lease_until), end_reason = 'expired'
         FROM due WHERE r.reservation_id = due.reservation_id RETURNING r.*
       ), n AS (UPDATE reservation_nodes SET active = false WHERE reservation_id IN (SELECT reservation_id FROM e) RETURNING node_id, reservation_id)
       SELECT r.reservation_id, n.node_id, r.username, r.created_at, r.expires_at, r.message, r.lease_secs, r.lease_until,
              r.ended_at, r.end_reason, r.ended_by, r.end_message, r.group_id, false AS live
       FROM e r JOIN n USING (reservation_id) ORDER BY r.reservation_id`,
      nodes ? [nodes] : id ? [id] : [],
    );
    return rows;
  }

  /** Run `fn` in a transaction; a deadlock or serialisation failure is retried (it rolled back: nothing happened). */
  private async tx<T>(fn: (db: pg.PoolClient) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await inTransaction(this.pool, fn);
      } catch (e) {
        if (attempt < 5 && (isPgError(e, '40P01') || isPgError(e, '40001'))) continue;
        throw e;
      }
    }
  }

  /** Announce ends (after the commit) and let waiters try for the freed nodes. */
  private announceEnded(rows: Row[]): void {
    for (const r of rows) this.emit(r.end_reason === 'interrupted' ? 'reservation.interrupted' : 'reservation.ended', r.node_id, endedData(r));
    if (rows.length && this.queue.length) void this.pump();
    // Waiters on the other replicas: told after the commit (this runs after the transaction).
    if (rows.length) void this.o.wakeups?.notify('reservation_ended', { node_ids: [...new Set(rows.map((r) => r.node_id))] });
  }

  /**
   * Events go to the log one after another, in the order things happened; the calls await them, so a
   * call's events are recorded when it returns. A failure is logged: the change itself is committed.
   */
  private emit(type: EventType, nodeId: string, data: ReservationData): void {
    const log = this.o.events;
    if (!log) return;
    this.events = this.events
      .then(() => log.append(type, nodeId, data))
      .catch((e: unknown) => this.o.logger.error({ err: e, type, node_id: nodeId }, 'could not record a reservation event'));
  }

  // ------------------------------------------------------------ the wait queue (extension)

  private enqueue(req: Checked, why: string, signal?: AbortSignal): Promise<PgReservation[]> {
    return new Promise((resolve, reject) => {
      const onAbort = () => {
        w.aborted = true;
        if (w.state === 'waiting') this.settle(w, gone('the client went away'));
      };
      const w: Waiter = {
        req,
        state: 'waiting',
        timedOut: false,
        aborted: false,
        why,
        resolve,
        reject,
        timer: setTimeout(() => {
          w.timedOut = true;
          if (w.state === 'waiting') this.settle(w, this.waitedInVain(w));
        }, (req.waitSecs as number) * 1000),
        cleanup: () => signal?.removeEventListener('abort', onAbort),
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.queue.push(w);
      if (!this.recheck) {
        // isBusy changes outside the database, and other portals end reservations: look again now and then.
        this.recheck = setInterval(() => void this.pump(), this.o.recheckMs ?? 500);
        this.recheck.unref();
      }
    });
  }

  private waitedInVain(w: Waiter): FarmError {
    return new FarmError('conflict', `nothing was reserved: waited ${w.req.waitSecs} s; ${w.why.replace(/^nothing was reserved: /, '')}`);
  }

  /** Take a waiter out of the queue and answer it (an error, or its reservations). */
  private settle(w: Waiter, outcome: unknown, made?: PgReservation[]): void {
    if (w.state === 'done') return;
    w.state = 'done';
    clearTimeout(w.timer);
    w.cleanup();
    const i = this.queue.indexOf(w);
    if (i >= 0) this.queue.splice(i, 1);
    if (!this.queue.length) {
      clearInterval(this.recheck);
      this.recheck = undefined;
    }
    if (made) w.resolve(made);
    else w.reject(outcome);
  }

  /**
   * Try the waiters in arrival order. A waiter that cannot have its nodes blocks those nodes for the
   * waiters behind it (first come, first served); waiters on other nodes go ahead.
   */
  private async pump(): Promise<void> {
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    let done = () => {};
    this.pumped = new Promise((ok) => (done = ok));
    try {
      do {
        this.pumpAgain = false;
        const blocked = new Set<string>();
        for (const w of [...this.queue]) {
          if (w.state !== 'waiting' || this.closed) continue;
          if (w.req.nodeIds.some((n) => blocked.has(n))) {
            for (const n of w.req.nodeIds) blocked.add(n);
            continue;
          }
          w.state = 'trying';
          let out: Awaited<ReturnType<PgReservations['tryReserve']>>;
          try {
            out = await this.tryReserve(w.req);
          } catch (e) {
            w.state = 'waiting';
            if (e instanceof FarmError) this.settle(w, e);
            else this.o.logger.warn({ err: e }, 'a waiting reservation could not be tried; trying again');
            continue;
          }
          if ('made' in out) {
            if (w.aborted || this.closed) {
              // Nobody is there to receive them: give the nodes back at once.
              w.state = 'waiting';
              this.settle(w, gone('the client went away'));
              for (const r of out.made) await this.end(r.reservation_id, r.username).catch(() => undefined);
            } else {
              w.state = 'waiting';
              this.settle(w, null, out.made);
            }
            continue;
          }
          w.state = 'waiting';
          w.why = out.conflict;
          if (w.timedOut || w.aborted) this.settle(w, w.aborted ? gone('the client went away') : this.waitedInVain(w));
          else for (const n of w.req.nodeIds) blocked.add(n);
        }
      } while (this.pumpAgain && this.queue.length && !this.closed);
    } finally {
      this.pumping = false;
      done();
    }
  }
}
