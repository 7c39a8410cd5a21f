/**
 * The farm's events (docs/farm.md, "Events"): an outbox table in PostgreSQL
 * (`events_outbox`) that every portal appends to, and a listener per portal
 * that reads it in order and fans the events out in memory to the event
 * stream (GET /api/v2/events) and the webhooks.
 *
 * - The farm's event id is the outbox `seq` (decimal): clients resume from the
 *   outbox, whichever portal they reach. A node's own id (`<boot>-<n>`) is
 *   kept in the `node_event_id` column only, so a node event relayed twice is
 *   stored once; the payload is the node's, unchanged.
 * - Node events arrive at least once: each node's cursor (`node_event_cursors`,
 *   the last of its own events recorded) moves in the transaction that stores
 *   the event (the fold's, fold.ts, which writes them through `appendIn`); the
 *   hub's welcome tells the node, which sends the rest again.
 * - Appends take a transaction-scoped advisory lock, so rows commit in `seq`
 *   order: a reader that has seen `seq` n never finds a smaller one later
 *   (bigserial alone does not promise that). Appends waiting for the lock are
 *   written together, one INSERT (group commit).
 * - `pg_notify('farm_events', <last seq>)` in the same transaction only wakes
 *   listeners; they read rows after the last seq they saw. The LISTEN
 *   connection is dedicated; when it drops, the listener reconnects with
 *   back-off and catches up from that seq, so nothing appended meanwhile is
 *   lost.
 * - Relayed events that could not be written are retried with back-off (250 ms
 *   doubling to 10 s), and at once when the pool opens a new connection: the
 *   database is back, and the events need not wait out the back-off.
 * - Retention keeps the newest `keepRows` rows (and, if set, none older than
 *   `keepSecs`), deleted in batches; `events_outbox_pruned.through` records the
 *   highest seq deleted, so a resume from below it is told it missed events.
 */
import pg from 'pg';
import type { EventType, FarmEvent, MissedReason, Subscription } from '../core/events.js';
import type { Logger } from '../core/ports.js';
import type { EventStreamSource } from '../http/events.js';
import type { EventOrigin, FarmEventLog, FarmHub } from './contract.js';
import type { FoldOutbox } from './fold.js';
import { nodeEventOrder } from './protocol.js';
import { inTransaction } from './db/pool.js';

/** The NOTIFY channel; the payload is the highest seq the transaction wrote. */
export const FARM_EVENTS_CHANNEL = 'farm_events';

/** Advisory lock key of the outbox's appends ('fhevents' in ASCII, as a bigint). */
const APPEND_LOCK = '7379387061636368499';

/** One row to append. */
export interface OutboxEntry {
  type: EventType;
  /** The node the event is about (copied into `data.node_id`); null for a farm-level event. */
  nodeId: string | null;
  /** The payload without `node_id` (a `node_id` in it wins). */
  data: unknown;
  /** ISO time it happened (a relayed node event's own time); default the portal's clock at insert. */
  time?: string | undefined;
  /** The node's own event id, for relayed events: the same node event is stored once. */
  nodeEventId?: string | undefined;
  /** The node's own event (not the hub's): recording it moves the node's cursor (node_event_cursors) in the same transaction. */
  fromNode?: boolean | undefined;
  /** Store nothing, only move the node's cursor past it (an event the hub dropped on purpose). */
  cursorOnly?: boolean | undefined;
}

export interface PgEventLogOptions {
  pool: pg.Pool;
  logger?: Logger | undefined;
  /** Rows kept by retention (the newest); default 10,000. */
  keepRows?: number | undefined;
  /** Rows older than this many seconds are deleted too; default: no age limit. */
  keepSecs?: number | null | undefined;
  /** How often retention runs; default 60 s. 0: only when `prune()` is called. */
  pruneIntervalMs?: number | undefined;
  /** Rows deleted per statement; default 5,000. */
  pruneBatch?: number | undefined;
  /** Relayed events (attach) waiting to be written while PostgreSQL is unreachable; past it the oldest are dropped. Default 10,000. */
  maxPending?: number | undefined;
  /** Back-off of a failed write: first wait (default 250 ms), doubling up to `retryMaxMs` (default 10 s). */
  retryInitialMs?: number | undefined;
  retryMaxMs?: number | undefined;
}

interface Pending {
  e: OutboxEntry;
  /** Relayed events are retried until written; appends by callers reject instead. */
  retry: boolean;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export const DEFAULT_KEEP_ROWS = 10_000;

/** The outbox writer (and its retention). */
export class PgEventLog implements FarmEventLog {
  private queue: Pending[] = [];
  private flushing = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private retryMs = 0;
  private pruneTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private droppedCount = 0;
  private idle: Array<() => void> = [];
  /** Nodes one of whose events was dropped from the queue: their cursor stays where it was, so they send it again. */
  private readonly holed = new Set<string>();

  /** A new connection means the database answers again: a write waiting out its back-off goes now. */
  private readonly onConnect = () => this.retryNow();

  constructor(private readonly o: PgEventLogOptions) {
    o.pool.on('connect', this.onConnect);
  }

  /** Append one event; resolves once it is committed (and listeners are notified). */
  append(type: EventType, nodeId: string | null, data: unknown): Promise<void> {
    return this.enqueue({ type, nodeId, data }, false);
  }

  /**
   * Append in the caller's transaction: the rows become visible, and listeners are notified, when
   * it commits. Call it LAST in the transaction: it takes the outbox's lock, which every other
   * append waits for until this transaction ends. Returns the seqs written.
   */
  async appendIn(client: pg.ClientBase, entries: readonly OutboxEntry[]): Promise<number[]> {
    if (entries.length === 0) return [];
    await client.query('SELECT pg_advisory_xact_lock($1)', [APPEND_LOCK]);
    const rows = entries.map(toRow);
    const r = await client.query<{ seqs: string[] }>(
      `WITH ins AS (
         INSERT INTO events_outbox (type, node_id, data, time, node_event_id)
         SELECT t, n, d, tm, ne
           FROM unnest($1::text[], $2::text[], $3::json[], $4::timestamptz[], $5::text[]) WITH ORDINALITY AS u(t, n, d, tm, ne, ord)
          ORDER BY ord
         ON CONFLICT (node_id, node_event_id) WHERE node_event_id IS NOT NULL DO NOTHING
         RETURNING seq)
       SELECT array_agg(seq ORDER BY seq) AS seqs, pg_notify($6, max(seq)::text) FROM ins HAVING count(*) > 0`,
      [rows.map((x) => x[0]), rows.map((x) => x[1]), rows.map((x) => x[2]), rows.map((x) => x[3]), rows.map((x) => x[4]), FARM_EVENTS_CHANNEL],
    );
    return (r.rows[0]?.seqs ?? []).map(Number);
  }

  /**
   * Relay the hub's own events (node.online/offline, the lost run) into the outbox, written in order, retried while
   * PostgreSQL is unreachable; the nodes' events are written by the fold (`fold`, fold.ts), in the transaction
   * that folds them and moves the node's cursor (docs/farm.md, "The node stream"). Without a fold (a stand-in
   * hub) every event is relayed. Returns `detach`.
   */
  attach(hub: Pick<FarmHub, 'onEvent'>, fold?: { outbox: FoldOutbox | undefined }): () => void {
    if (fold) fold.outbox = this;
    return hub.onEvent((e, from) => {
      if (fold && from === 'node') return;
      this.relay(e, from ?? 'portal', false);
    });
  }

  /** The id of the last of a node's own events recorded, from its cursor (the fold moves it; fold.ts). */
  async lastRecorded(nodeId: string): Promise<string | null> {
    const { rows } = await this.o.pool.query<{ event_id: string }>('SELECT event_id FROM node_event_cursors WHERE node_id = $1', [nodeId]);
    return rows[0]?.event_id ?? null;
  }

  private relay(e: FarmEvent, from: EventOrigin, cursorOnly: boolean): void {
    const entry: OutboxEntry = { type: e.type, nodeId: e.data.node_id, data: e.data, time: e.time, nodeEventId: e.id, fromNode: from === 'node', cursorOnly };
    this.enqueue(entry, true).catch((err: unknown) => this.o.logger?.error({ err, event: e.id, type: e.type }, 'farm event not written to the outbox'));
  }

  /** Start the retention timer (and prune once now). */
  start(): void {
    const every = this.o.pruneIntervalMs ?? 60_000;
    if (every <= 0 || this.pruneTimer) return;
    const run = () =>
      void this.prune().catch((err: unknown) => this.o.logger?.warn({ err }, 'events outbox: pruning failed; retried at the next interval'));
    run();
    this.pruneTimer = setInterval(run, every);
    this.pruneTimer.unref();
  }

  /** Relayed events dropped because PostgreSQL was unreachable too long. */
  get dropped(): number {
    return this.droppedCount;
  }

  /** A failed write waits out its back-off (the database was unreachable). */
  get retrying(): boolean {
    return this.retryTimer !== undefined;
  }

  /** Events waiting to be written. */
  get pending(): number {
    return this.queue.length;
  }

  /** Stop the timers; waits for the write in flight (relayed events still waiting are logged and forgotten). */
  async close(): Promise<void> {
    this.closed = true;
    this.o.pool.off('connect', this.onConnect);
    clearInterval(this.pruneTimer);
    clearTimeout(this.retryTimer);
    if (this.flushing) await new Promise<void>((r) => this.idle.push(r));
    if (this.queue.length) {
      this.o.logger?.warn({ events: this.queue.length }, 'portal stopping: farm events not written to the outbox');
      for (const p of this.queue.splice(0)) p.reject(new Error('the event log is closed'));
    }
  }

  /**
   * Delete rows past the retention, oldest first, in batches; returns the number deleted. Safe to run
   * on several portals at once (deleting is idempotent; `through` only grows).
   */
  async prune(): Promise<number> {
    const keep = this.o.keepRows ?? DEFAULT_KEEP_ROWS;
    const { rows } = await this.o.pool.query<{ cutoff: string | null }>(
      `SELECT GREATEST(
         (SELECT seq FROM events_outbox ORDER BY seq DESC OFFSET $1 LIMIT 1),
         (SELECT max(seq) FROM events_outbox WHERE $2::double precision IS NOT NULL AND at < now() - make_interval(secs => $2::double precision))
       ) AS cutoff`,
      [keep, this.o.keepSecs ?? null],
    );
    const cutoff = rows[0]?.cutoff;
    if (cutoff == null) return 0;
    let total = 0;
    for (;;) {
      const r = await this.o.pool.query<{ n: string }>(
        `WITH del AS (
           DELETE FROM events_outbox WHERE seq IN (SELECT seq FROM events_outbox WHERE seq <= $1 ORDER BY seq LIMIT $2) RETURNING seq)
         UPDATE events_outbox_pruned SET through = GREATEST(through, (SELECT max(seq) FROM del))
         RETURNING (SELECT count(*) FROM del) AS n`,
        [cutoff, this.o.pruneBatch ?? 5000],
      );
      const n = Number(r.rows[0]?.n ?? 0);
      total += n;
      if (n === 0) break;
    }
    // Gaps (rolled-back appends) at or below the cutoff are past too.
    await this.o.pool.query('UPDATE events_outbox_pruned SET through = GREATEST(through, $1)', [cutoff]);
    if (total) this.o.logger?.debug({ deleted: total, through: Number(cutoff) }, 'events outbox pruned');
    return total;
  }

  private enqueue(e: OutboxEntry, retry: boolean): Promise<void> {
    if (this.closed) return Promise.reject(new Error('the event log is closed'));
    return new Promise<void>((resolve, reject) => {
      const max = this.o.maxPending ?? 10_000;
      if (retry && this.queue.length >= max) {
        const i = this.queue.findIndex((p) => p.retry);
        if (i >= 0) {
          const [old] = this.queue.splice(i, 1);
          this.droppedCount++;
          if (old!.e.fromNode && old!.e.nodeId) this.holed.add(old!.e.nodeId);
          old!.reject(new Error('dropped: the outbox could not be written for too long'));
        }
      }
      this.queue.push({ e, retry, resolve, reject });
      if (!this.flushing && !this.retryTimer) void this.flush();
    });
  }

  /** Write now what waits out a back-off (the back-off keeps growing if this write fails too). */
  private retryNow(): void {
    if (!this.retryTimer || this.closed) return;
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    // While a retry is pending no flush runs (the loop stops when it sets the timer), so this starts the only one.
    void this.flush();
  }

  /** Writes everything queued in one transaction; appends made meanwhile go in the next one. */
  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.queue.length && !this.retryTimer) {
        const batch = this.queue.splice(0, 5000);
        try {
          await this.writeBatch(batch.map((p) => p.e));
          this.retryMs = 0;
          for (const p of batch) p.resolve();
        } catch (err) {
          for (const p of batch) if (!p.retry) p.reject(err);
          const again = batch.filter((p) => p.retry);
          if (again.length === 0) continue;
          this.queue.unshift(...again);
          if (this.closed) break;
          this.retryMs = Math.min(this.o.retryMaxMs ?? 10_000, this.retryMs ? this.retryMs * 2 : (this.o.retryInitialMs ?? 250));
          this.o.logger?.warn({ err, events: this.queue.length, retry_in_ms: this.retryMs }, 'farm events not written to the outbox; retrying');
          this.retryTimer = setTimeout(() => {
            this.retryTimer = undefined;
            if (!this.flushing) void this.flush();
          }, this.retryMs);
          this.retryTimer.unref();
        }
      }
    } finally {
      this.flushing = false;
      for (const f of this.idle.splice(0)) f();
    }
  }

  private async writeBatch(entries: OutboxEntry[]): Promise<void> {
    await inTransaction(this.o.pool, async (client) => {
      await this.moveCursors(client, entries);
      await this.appendIn(client, entries.filter((e) => !e.cursorOnly));
    });
  }

  /**
   * Move each node's cursor to the last of its own events in `entries` (never back: a node event sent again
   * after a later one was recorded leaves it). Before appendIn, which takes the outbox's lock last.
   */
  private async moveCursors(client: pg.ClientBase, entries: readonly OutboxEntry[]): Promise<void> {
    const last = new Map<string, { at: [number, number]; id: string }>();
    for (const e of entries) {
      if (!e.fromNode || e.nodeId === null || !e.nodeEventId || this.holed.has(e.nodeId)) continue;
      const at = nodeEventOrder(e.nodeEventId);
      if (!at) continue;
      const had = last.get(e.nodeId);
      if (!had || at[0] > had.at[0] || (at[0] === had.at[0] && at[1] > had.at[1])) last.set(e.nodeId, { at, id: e.nodeEventId });
    }
    if (last.size === 0) return;
    // In node order, so two portals' transactions lock the rows in the same order.
    const nodes = [...last.keys()].sort();
    await client.query(
      `INSERT INTO node_event_cursors AS c (node_id, boot, n, event_id)
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::text[])
       ON CONFLICT (node_id) DO UPDATE SET boot = EXCLUDED.boot, n = EXCLUDED.n, event_id = EXCLUDED.event_id, updated_at = now()
        WHERE (c.boot, c.n) < (EXCLUDED.boot, EXCLUDED.n)`,
      [nodes, nodes.map((n) => last.get(n)!.at[0]), nodes.map((n) => last.get(n)!.at[1]), nodes.map((n) => last.get(n)!.id)],
    );
  }
}

type Row = [string, string | null, string, string | null, string | null];

function toRow(e: OutboxEntry): Row {
  const data = e.nodeId === null ? e.data : { node_id: e.nodeId, ...(e.data as object) };
  return [e.type, e.nodeId, JSON.stringify(data), e.time ?? null, e.nodeEventId ?? null];
}

// ---------------------------------------------------------------- the listener

/** A farm event id: the outbox seq, decimal. */
const SEQ_ID = /^[1-9][0-9]{0,15}$/;
export const isFarmEventId = (s: string): boolean => SEQ_ID.test(s);

/** What a reader resuming after a seq gets (the shape of the node's Resume, plus which live events are new). */
export interface OutboxResume {
  events: FarmEvent[];
  missed: { reason: MissedReason; last_event_id: string; oldest_event_id: string | null } | null;
  /** Whether a live event (received while the resume was read) comes after what was replayed or seen. */
  fresh: (e: FarmEvent) => boolean;
}

export interface OutboxListenerOptions {
  pool: pg.Pool;
  /** Opens the dedicated LISTEN connection; default: a new pg.Client with the pool's options. */
  connect?: (() => Promise<pg.Client>) | undefined;
  logger?: Logger | undefined;
  /** Back-off of reconnects and failed reads: first wait, doubling up to `retryMaxMs` (jittered). */
  retryInitialMs?: number | undefined;
  retryMaxMs?: number | undefined;
  /** Rows read per query; default 1,000. */
  readBatch?: number | undefined;
}

interface OutboxRow {
  seq: string;
  at: Date;
  time: Date | null;
  type: EventType;
  data: FarmEvent['data'];
}

const toEvent = (r: OutboxRow): FarmEvent => ({ id: r.seq, type: r.type, time: (r.time ?? r.at).toISOString(), data: r.data });

/**
 * One per portal: LISTENs on a dedicated connection and reads new outbox rows in seq order,
 * handing each to every subscriber (synchronously; a subscriber must only enqueue, as with the
 * node's EventHub).
 */
export class OutboxListener {
  private client: pg.Client | undefined;
  private lastSeq = 0;
  private started = false;
  private closed = false;
  private reading = false;
  private readAgain = false;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private readTimer: NodeJS.Timeout | undefined;
  private connectFailures = 0;
  private readFailures = 0;
  private readonly subscribers = new Set<(e: FarmEvent) => void>();
  private droppedCount = 0;
  private deliveredCount = 0;
  private reconnectCount = 0;
  private readonly waiters = new Set<() => void>();

  constructor(private readonly o: OutboxListenerOptions) {}

  /** Connect and LISTEN; events appended from now on are delivered. Rejects if the first connection fails. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    // The starting point first: a notification arriving right after LISTEN then reads only newer rows.
    const { rows } = await this.o.pool.query<{ last: string }>(
      'SELECT coalesce((SELECT max(seq) FROM events_outbox), (SELECT through FROM events_outbox_pruned), 0) AS last',
    );
    this.lastSeq = Number(rows[0]!.last);
    await this.listen();
    this.read(); // what was appended between the query and LISTEN
  }

  /** The last seq read and delivered. */
  get last(): number {
    return this.lastSeq;
  }

  /** Times the LISTEN connection was re-established. */
  get reconnects(): number {
    return this.reconnectCount;
  }

  /** The backend pid of the LISTEN connection (tests terminate it), or undefined while disconnected. */
  get listenerPid(): number | undefined {
    return (this.client as unknown as { processID?: number } | undefined)?.processID;
  }

  get published(): number {
    return this.deliveredCount;
  }

  get subscriberCount(): number {
    return this.subscribers.size;
  }

  get dropped(): number {
    return this.droppedCount;
  }

  /** Every event read from now on, in seq order, synchronously; `fn` must not block. */
  subscribe(fn: (e: FarmEvent) => void): Subscription {
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
   * The outbox after `lastId` (undefined: nothing, a new client). Subscribe first, then call this,
   * and send the live events that `fresh` accepts after the replay: nothing falls in between and
   * nothing comes twice. An id older than retention is `too_old`, one never written `unknown_id`;
   * both replay every retained event, as the node does with its buffer.
   */
  async since(lastId: string | undefined): Promise<OutboxResume> {
    if (lastId === undefined) {
      const mark = this.lastSeq;
      return { events: [], missed: null, fresh: (e) => Number(e.id) > mark };
    }
    return this.resumeAfter(isFarmEventId(lastId) ? Number(lastId) : -1, lastId);
  }

  /**
   * Every event after seq `after`, in order, first from the outbox then live, to `fn` (the webhooks'
   * feed). A read that fails is retried; events already gone (retention) are skipped with a warning.
   */
  follow(after: number, fn: (e: FarmEvent) => void): Subscription {
    const pending: FarmEvent[] = [];
    let fresh: ((e: FarmEvent) => boolean) | undefined;
    let stopped = false;
    const sub = this.subscribe((e) => {
      if (!fresh) pending.push(e);
      else if (fresh(e)) fn(e);
    });
    const catchUp = async (): Promise<void> => {
      let wait = this.o.retryInitialMs ?? 500;
      while (!this.closed && !stopped) {
        try {
          const r = await this.resumeAfter(after, String(after));
          if (stopped) return;
          if (r.missed) this.o.logger?.warn({ ...r.missed }, 'events after the cursor are gone (retention); going on from the oldest kept');
          for (const e of r.events) fn(e);
          fresh = r.fresh;
          for (const e of pending.splice(0)) if (fresh(e)) fn(e);
          return;
        } catch (err) {
          this.o.logger?.warn({ err, retry_in_ms: wait }, 'reading the events outbox failed; retrying');
          await new Promise((r) => setTimeout(r, wait).unref());
          wait = Math.min(wait * 2, this.o.retryMaxMs ?? 10_000);
        }
      }
    };
    void catchUp();
    return {
      close: () => {
        stopped = true;
        sub.close();
      },
      drop: () => {
        stopped = true;
        sub.drop();
      },
    };
  }

  /** The rows after `asked` (-1: an id of no valid form), with the missed verdict. */
  private async resumeAfter(asked: number, lastId: string): Promise<OutboxResume> {
    // One statement, one snapshot: the watermark, the newest seq and the rows agree.
    const { rows } = await this.o.pool.query<OutboxRow & { through: string; newest: string }>(
      `WITH p AS (SELECT through FROM events_outbox_pruned),
            m AS (SELECT coalesce(max(seq), (SELECT through FROM p)) AS newest FROM events_outbox)
       SELECT p.through, m.newest, e.seq, e.at, e.time, e.type, e.data
         FROM p CROSS JOIN m
         LEFT JOIN LATERAL (
           SELECT * FROM events_outbox
            WHERE seq > CASE WHEN $1::bigint < p.through OR $1::bigint > m.newest THEN p.through ELSE $1::bigint END
            ORDER BY seq) e ON true
        ORDER BY e.seq`,
      [asked],
    );
    const through = Number(rows[0]!.through);
    const newest = Number(rows[0]!.newest);
    const events = rows.filter((r) => r.seq !== null).map(toEvent);
    const reason: MissedReason | null = asked < 0 || asked > newest ? 'unknown_id' : asked < through ? 'too_old' : null;
    const mark = Math.max(reason ? through : asked, events.length ? Number(events.at(-1)!.id) : 0);
    return {
      events,
      missed: reason && { reason, last_event_id: lastId, oldest_event_id: events[0]?.id ?? null },
      fresh: (e) => Number(e.id) > mark,
    };
  }

  /** Resolves once every event up to `seq` has been delivered (or the listener is closed). */
  async waitFor(seq: number): Promise<void> {
    while (this.lastSeq < seq && !this.closed) await new Promise<void>((r) => this.waiters.add(r));
  }

  /** Stop listening; subscribers get nothing more. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.reconnectTimer);
    clearTimeout(this.readTimer);
    const c = this.client;
    this.client = undefined;
    for (const w of [...this.waiters]) w();
    this.waiters.clear();
    await c?.end().catch(() => undefined);
  }

  private async listen(): Promise<void> {
    const client = this.o.connect ? await this.o.connect() : new pg.Client(this.o.pool.options);
    if (!this.o.connect) await client.connect();
    try {
      client.on('notification', (n) => {
        if (n.channel === FARM_EVENTS_CHANNEL) this.read();
      });
      let lost = false;
      const onLost = (err?: unknown) => {
        if (lost) return;
        lost = true;
        if (this.client === client) this.client = undefined;
        client.end().catch(() => undefined);
        if (this.closed) return;
        this.o.logger?.warn({ err }, 'events: the LISTEN connection dropped; reconnecting');
        this.scheduleReconnect();
      };
      client.on('error', onLost);
      client.on('end', () => onLost());
      await client.query(`LISTEN ${FARM_EVENTS_CHANNEL}`);
      if (this.closed) {
        await client.end().catch(() => undefined);
        return;
      }
      this.client = client;
      this.connectFailures = 0;
    } catch (err) {
      await client.end().catch(() => undefined);
      throw err;
    }
  }

  private scheduleReconnect(): void {
    if (this.closed || this.reconnectTimer) return;
    const wait = this.backoff(++this.connectFailures);
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined;
      this.listen().then(
        () => {
          if (this.closed) return;
          this.reconnectCount++;
          this.o.logger?.info({ last_seq: this.lastSeq }, 'events: LISTEN connection back; catching up from the outbox');
          this.read(); // what was appended while disconnected
        },
        (err: unknown) => {
          this.o.logger?.warn({ err, attempt: this.connectFailures }, 'events: reconnecting the LISTEN connection failed');
          this.scheduleReconnect();
        },
      );
    }, wait);
    this.reconnectTimer.unref();
  }

  private backoff(attempt: number): number {
    const base = Math.min(this.o.retryMaxMs ?? 10_000, (this.o.retryInitialMs ?? 500) * 2 ** (attempt - 1));
    return Math.round(base / 2 + Math.random() * (base / 2));
  }

  /** Read every row after lastSeq and deliver it; coalesces wake-ups that arrive meanwhile. */
  private read(): void {
    if (this.closed) return;
    if (this.reading) {
      this.readAgain = true;
      return;
    }
    this.reading = true;
    void this.readLoop().finally(() => {
      this.reading = false;
    });
  }

  private async readLoop(): Promise<void> {
    const batch = this.o.readBatch ?? 1000;
    try {
      for (;;) {
        this.readAgain = false;
        const { rows } = await this.o.pool.query<OutboxRow>(
          'SELECT seq, at, time, type, data FROM events_outbox WHERE seq > $1 ORDER BY seq LIMIT $2',
          [this.lastSeq, batch],
        );
        if (this.closed) return;
        for (const r of rows) this.deliver(toEvent(r));
        if (rows.length < batch && !this.readAgain) break;
      }
      this.readFailures = 0;
    } catch (err) {
      if (this.closed) return;
      const wait = this.backoff(++this.readFailures);
      this.o.logger?.warn({ err, retry_in_ms: wait }, 'events: reading the outbox failed; retrying');
      clearTimeout(this.readTimer);
      this.readTimer = setTimeout(() => this.read(), wait);
      this.readTimer.unref();
    }
  }

  private deliver(e: FarmEvent): void {
    const seq = Number(e.id);
    if (seq <= this.lastSeq) return;
    this.lastSeq = seq;
    this.deliveredCount++;
    for (const fn of [...this.subscribers]) {
      try {
        fn(e);
      } catch (err) {
        this.o.logger?.error({ err, event: e.id }, 'a farm event subscriber failed');
      }
    }
    for (const w of [...this.waiters]) w();
    this.waiters.clear();
  }
}

/**
 * The outbox as the source of the node's EventStream (src/http/events.ts): the farm's
 * GET /api/v2/events is `new EventStream(farmStreamSource(listener), options).router()`, with the
 * node's wire format, filters, limits and Last-Event-ID behaviour; ids are outbox seqs.
 */
export const farmStreamSource = (listener: OutboxListener): EventStreamSource => ({
  subscribe: (fn) => listener.subscribe(fn),
  since: (lastId) => listener.since(lastId),
  isEventId: isFarmEventId,
  exampleId: () => String(Math.max(1, listener.last)),
});
