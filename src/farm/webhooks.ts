/**
 * Webhooks farm-wide (docs/farm.md, "Events"): the node's WebhookDispatcher
 * (src/notify/webhooks.ts: CloudEvents, Standard Webhooks signatures, retries,
 * bounded queues) fed from the outbox instead of a node's hub.
 *
 * A cursor row (`events_cursors`, name `webhooks`) records the seq through
 * which every event is done on every endpoint (delivered, abandoned or
 * dropped); it is saved every `saveEveryMs` and at close. After a restart the
 * portal resumes after it: nothing is missed, and only events in flight when
 * the portal died are sent again (with the same `webhook-id`, so receivers
 * drop the duplicate). The first start begins at the newest event (a new
 * configuration does not replay the outbox's history).
 *
 * With several portals, one delivers: the one holding a session advisory lock
 * (keyed by the cursor's name) on a dedicated connection. The others stand by
 * and try the lock every `standbyMs`; when the leader stops or its connection
 * dies, PostgreSQL releases the lock and a standby takes over from the cursor.
 */
import pg from 'pg';
import type { FarmEvent, Subscription } from '../core/events.js';
import type { Logger } from '../core/ports.js';
import { WebhookDispatcher, type DeliveryCounts, type WebhookDispatcherOptions } from '../notify/webhooks.js';
import type { OutboxListener } from './events.js';

export interface FarmWebhooksOptions extends WebhookDispatcherOptions {
  pool: pg.Pool;
  listener: OutboxListener;
  /** The cursor's name; default `webhooks`. */
  cursor?: string | undefined;
  /** How often the cursor is saved; default 1 s. */
  saveEveryMs?: number | undefined;
  /** How often a standby portal tries to take over the delivery; default 5 s. */
  standbyMs?: number | undefined;
  /** Opens the lock's dedicated connection; default: a new pg.Client with the pool's options. */
  connect?: (() => Promise<pg.Client>) | undefined;
}

/**
 * How long a clean stop waits for the deliveries in flight to be answered before it saves the cursor:
 * an event its receiver has is then not sent again by the next leader (exactly once across a clean stop).
 */
const DRAIN_MS = 5000;

/** Advisory lock namespace (first key) of the webhook leader; the second key is the cursor name's hash. */
const LEADER_LOCK = 0x66687768; // 'fhwh'

export class FarmWebhooks {
  /** The dispatcher of the current leadership term (undefined while standing by). */
  private dispatcher: WebhookDispatcher | undefined;
  private readonly name: string;
  private sub: Subscription | undefined;
  private saveTimer: NodeJS.Timeout | undefined;
  private standbyTimer: NodeJS.Timeout | undefined;
  private lockClient: pg.Client | undefined;
  private trying = false;
  private stopped = true;
  /** Last seq handed to the dispatcher. */
  private handed = 0;
  private saved = 0;
  /** Counts of earlier leadership terms. */
  private readonly past: DeliveryCounts = { delivered: 0, failed_attempts: 0, abandoned: 0, dropped: 0 };
  private readonly log: Logger;

  constructor(private readonly o: FarmWebhooksOptions) {
    this.name = o.cursor ?? 'webhooks';
    this.log = o.logger;
  }

  get enabled(): boolean {
    return this.o.settings.endpoints.length > 0;
  }

  /** Whether this portal delivers now (holds the lock). */
  get leading(): boolean {
    return this.dispatcher !== undefined;
  }

  /** Take the delivery if no other portal has it, else stand by (nothing to do without endpoints). */
  async start(): Promise<void> {
    if (!this.enabled || !this.stopped) return;
    this.stopped = false;
    await this.tryLead();
    this.standbyTimer = setInterval(() => void this.tryLead(), this.o.standbyMs ?? 5000);
    this.standbyTimer.unref();
  }

  /** The seq through which every event is done on every endpoint. */
  get through(): number {
    const heads = this.dispatcher?.pendingHeads() ?? [];
    return heads.length ? Math.min(...heads.map((e) => Number(e.id))) - 1 : this.handed;
  }

  /** Deliveries by outcome since start, every leadership term of this portal together. */
  deliveries(): DeliveryCounts {
    const now = this.dispatcher?.deliveries();
    const p = this.past;
    return now
      ? { delivered: p.delivered + now.delivered, failed_attempts: p.failed_attempts + now.failed_attempts, abandoned: p.abandoned + now.abandoned, dropped: p.dropped + now.dropped }
      : { ...p };
  }

  get queued(): number {
    return this.dispatcher?.queued ?? 0;
  }

  /** Save the cursor if it moved. */
  async save(): Promise<void> {
    if (!this.dispatcher) return;
    const through = this.through;
    if (through <= this.saved) return;
    await this.o.pool.query('UPDATE events_cursors SET seq = GREATEST(seq, $2), updated_at = now() WHERE name = $1', [this.name, through]);
    this.saved = through;
  }

  /** Stop: save the cursor (queued events are sent after the next start, here or on another portal), release the lock. */
  async close(): Promise<void> {
    this.stopped = true;
    clearInterval(this.standbyTimer);
    await this.endTerm('closing', DRAIN_MS);
    const c = this.lockClient;
    this.lockClient = undefined;
    await c?.end().catch(() => undefined);
  }

  private async tryLead(): Promise<void> {
    if (this.stopped || this.trying || this.dispatcher) return;
    this.trying = true;
    try {
      if (!this.lockClient) {
        const c = this.o.connect ? await this.o.connect() : new pg.Client(this.o.pool.options);
        if (!this.o.connect) await c.connect();
        const lost = (err?: unknown) => {
          if (this.lockClient !== c) return;
          this.lockClient = undefined;
          c.end().catch(() => undefined);
          if (this.dispatcher) this.log.warn({ err }, 'farm webhooks: the leader lock\'s connection dropped; delivery stops until the lock is taken again');
          void this.endTerm('lost the lock');
        };
        c.on('error', lost);
        c.on('end', () => lost());
        this.lockClient = c;
      }
      const { rows } = await this.lockClient.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1, hashtext($2)) AS ok', [LEADER_LOCK, this.name]);
      if (rows[0]?.ok && !this.stopped) await this.lead();
    } catch (err) {
      this.log.warn({ err }, 'farm webhooks: trying to take the delivery failed; retrying');
    } finally {
      this.trying = false;
    }
  }

  /** This portal holds the lock: deliver from after the cursor. */
  private async lead(): Promise<void> {
    await this.o.pool.query('INSERT INTO events_cursors (name, seq) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [this.name, this.o.listener.last]);
    const { rows } = await this.o.pool.query<{ seq: string }>('SELECT seq FROM events_cursors WHERE name = $1', [this.name]);
    const from = Number(rows[0]!.seq);
    this.handed = this.saved = from;
    const d = new WebhookDispatcher(this.o);
    this.dispatcher = d;
    this.log.info({ after_seq: from }, 'farm webhooks: this portal delivers; reading the outbox after the cursor');
    this.sub = this.o.listener.follow(from, (e: FarmEvent) => {
      d.enqueue(e);
      this.handed = Number(e.id);
    });
    this.saveTimer = setInterval(() => void this.save().catch((err: unknown) => this.log.warn({ err }, 'farm webhooks: saving the cursor failed')), this.o.saveEveryMs ?? 1000);
    this.saveTimer.unref();
  }

  /** End this portal's term; `drainMs` (a clean stop, the lock still held) lets attempts in flight get their answer. */
  private async endTerm(why: string, drainMs = 0): Promise<void> {
    const d = this.dispatcher;
    if (!d) return;
    this.sub?.close();
    this.sub = undefined;
    clearInterval(this.saveTimer);
    if (drainMs > 0) await d.drain(drainMs);
    await this.save().catch((err: unknown) => this.log.warn({ err, why }, 'farm webhooks: saving the cursor failed'));
    this.dispatcher = undefined;
    const c = d.deliveries();
    this.past.delivered += c.delivered;
    this.past.failed_attempts += c.failed_attempts;
    this.past.abandoned += c.abandoned;
    this.past.dropped += c.dropped;
    d.close();
  }
}
