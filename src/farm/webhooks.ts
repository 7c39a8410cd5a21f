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
 */
import type pg from 'pg';
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
}

export class FarmWebhooks {
  readonly dispatcher: WebhookDispatcher;
  private readonly name: string;
  private sub: Subscription | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Last seq handed to the dispatcher. */
  private handed = 0;
  private saved = 0;
  private readonly log: Logger;

  constructor(private readonly o: FarmWebhooksOptions) {
    this.dispatcher = new WebhookDispatcher(o);
    this.name = o.cursor ?? 'webhooks';
    this.log = o.logger;
  }

  get enabled(): boolean {
    return this.o.settings.endpoints.length > 0;
  }

  /** Read the cursor and start delivering from after it (nothing to do without endpoints). */
  async start(): Promise<void> {
    if (!this.enabled || this.sub) return;
    await this.o.pool.query('INSERT INTO events_cursors (name, seq) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [this.name, this.o.listener.last]);
    const { rows } = await this.o.pool.query<{ seq: string }>('SELECT seq FROM events_cursors WHERE name = $1', [this.name]);
    const from = Number(rows[0]!.seq);
    this.handed = this.saved = from;
    this.log.info({ after_seq: from }, 'farm webhooks: delivering events from the outbox');
    this.sub = this.o.listener.follow(from, (e: FarmEvent) => {
      this.dispatcher.enqueue(e);
      this.handed = Number(e.id);
    });
    this.timer = setInterval(() => void this.save().catch((err: unknown) => this.log.warn({ err }, 'farm webhooks: saving the cursor failed')), this.o.saveEveryMs ?? 1000);
    this.timer.unref();
  }

  /** The seq through which every event is done on every endpoint. */
  get through(): number {
    const heads = this.dispatcher.pendingHeads();
    return heads.length ? Math.min(...heads.map((e) => Number(e.id))) - 1 : this.handed;
  }

  deliveries(): DeliveryCounts {
    return this.dispatcher.deliveries();
  }

  get queued(): number {
    return this.dispatcher.queued;
  }

  /** Save the cursor if it moved. */
  async save(): Promise<void> {
    const through = this.through;
    if (through <= this.saved) return;
    await this.o.pool.query('UPDATE events_cursors SET seq = GREATEST(seq, $2), updated_at = now() WHERE name = $1', [this.name, through]);
    this.saved = through;
  }

  /** Stop reading, save the cursor (queued events are sent after the next start), stop the dispatcher. */
  async close(): Promise<void> {
    this.sub?.close();
    this.sub = undefined;
    clearInterval(this.timer);
    await this.save().catch((err: unknown) => this.log.warn({ err }, 'farm webhooks: saving the cursor at close failed'));
    this.dispatcher.close();
  }
}
