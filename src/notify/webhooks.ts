/**
 * Webhooks: every hub event (or the types an endpoint asks for) is POSTed to
 * each configured URL as a CloudEvent, signed the Standard Webhooks way with
 * the endpoint's `whsec_` secret (the `standardwebhooks` package, the spec's
 * reference implementation). docs/events.md has the format and the policy.
 *
 * - Each endpoint has its own queue and sends one event at a time, in order.
 *   The hub's subscriber only pushes onto the queue: a run never waits for a
 *   delivery. A full queue drops its oldest waiting event (logged, counted).
 * - A 2xx answer is a delivery. Anything else (another status, a redirect, a
 *   network error, no answer within the timeout) is a failed attempt, retried
 *   after an exponential back-off with jitter, up to `max_attempts`; then the
 *   event is abandoned (logged, counted). A `Retry-After` in seconds is
 *   honoured up to the back-off ceiling.
 * - Every attempt is signed anew (its own `webhook-timestamp`) with the same
 *   `webhook-id`, the event id, which receivers use to drop duplicates.
 * - `close()` aborts what is in flight and forgets what waits (logged). `drain(ms)` first lets the
 *   attempts in flight get their answer (at most `ms`), so a receiver that already has an event is not
 *   sent it again by whoever resumes from the farm's cursor (a clean stop delivers exactly once).
 * - No URL is logged with its credentials or query (a query may carry a receiver's key): the endpoint is
 *   named without them, and a failed attempt's error text (undici's messages quote the whole URL) passes
 *   through {@link redactUrls}. The config refuses `user:password@` in a URL (src/config/schema.ts).
 */
import { Webhook } from 'standardwebhooks';
import type { EventHub, FarmEvent, Subscription } from '../core/events.js';
import type { Logger } from '../core/ports.js';
import { CLOUDEVENTS_CONTENT_TYPE, toCloudEvent } from './cloudEvents.js';

export interface WebhookEndpointConfig {
  url: string;
  secret: string;
  /** Only these types; absent: all. */
  types?: readonly string[] | undefined;
}

/** The config's `webhooks` section. */
export interface WebhookSettings {
  endpoints: readonly WebhookEndpointConfig[];
  max_attempts: number;
  backoff_initial_ms: number;
  backoff_max_ms: number;
  timeout_secs: number;
  queue_size: number;
}

/** Deliveries by outcome since start, all endpoints together. */
export interface DeliveryCounts {
  /** Events an endpoint accepted (2xx). */
  delivered: number;
  /** Attempts that failed (each retry that failed counts). */
  failed_attempts: number;
  /** Events given up after `max_attempts`. */
  abandoned: number;
  /** Events dropped unsent because the endpoint's queue was full. */
  dropped: number;
}

export interface WebhookDispatcherOptions {
  settings: WebhookSettings;
  userAgent: string;
  logger: Logger;
  /** Jitter source, [0, 1); tests may fix it. */
  random?: () => number;
  /** Wall clock for the signature timestamp (ms). */
  now?: () => number;
}

export class WebhookDispatcher {
  private readonly endpoints: Endpoint[];
  private readonly counts: DeliveryCounts = { delivered: 0, failed_attempts: 0, abandoned: 0, dropped: 0 };
  private readonly abort = new AbortController();
  private sub: Subscription | undefined;

  constructor(o: WebhookDispatcherOptions) {
    this.endpoints = o.settings.endpoints.map((e) => new Endpoint(e, o, this.counts, this.abort.signal));
  }

  /** Start forwarding the hub's events (nothing to do without endpoints). */
  attach(hub: Pick<EventHub, 'subscribe'>): void {
    if (this.endpoints.length === 0 || this.sub) return;
    this.sub = hub.subscribe((e) => this.enqueue(e));
  }

  /** Queue one event on every endpoint (what `attach` does per event; the farm feeds it from its outbox). */
  enqueue(e: FarmEvent): void {
    for (const ep of this.endpoints) ep.enqueue(e);
  }

  /**
   * Per endpoint, its earliest event in flight or waiting (none when idle). Endpoints send in order,
   * so every event enqueued before the earliest of these is done (delivered, abandoned or dropped).
   */
  pendingHeads(): FarmEvent[] {
    return this.endpoints.flatMap((ep) => (ep.head ? [ep.head] : []));
  }

  /** Deliveries by outcome (a copy). */
  deliveries(): DeliveryCounts {
    return { ...this.counts };
  }

  /** Events waiting or in flight, all endpoints. */
  get queued(): number {
    return this.endpoints.reduce((n, e) => n + e.pending, 0);
  }

  /**
   * Start nothing new (no next event, no retry) and wait until the attempts in flight have their
   * answer, at most `ms`; `close()` after it. An attempt answered 2xx while draining counts as delivered.
   */
  async drain(ms: number): Promise<void> {
    this.sub?.close();
    this.sub = undefined;
    const inFlight = this.endpoints.flatMap((ep) => ep.stopAfterAttempt());
    if (inFlight.length === 0) return;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all(inFlight), new Promise<void>((r) => (timer = setTimeout(r, ms)))]);
    clearTimeout(timer);
  }

  /** Stop: abort attempts in flight and back-off waits, forget queued events. */
  close(): void {
    this.sub?.close();
    this.sub = undefined;
    this.abort.abort();
    for (const ep of this.endpoints) ep.discard();
  }
}

class Endpoint {
  private readonly queue: FarmEvent[] = [];
  private sending = false;
  /** Set by `stopAfterAttempt`: the attempt in flight is the last one. */
  private stopping = false;
  /** The attempt in flight, settled when its answer (or error) is in. */
  private attemptInFlight: Promise<unknown> | undefined;
  /** The event being delivered (attempts and back-off waits included). */
  private current: FarmEvent | undefined;
  private readonly signer: Webhook;
  private readonly types: Set<string> | undefined;
  /** The URL without query or credentials: what the log shows. */
  private readonly shownUrl: string;
  private readonly log: Logger;

  constructor(
    private readonly cfg: WebhookEndpointConfig,
    private readonly o: WebhookDispatcherOptions,
    private readonly counts: DeliveryCounts,
    private readonly signal: AbortSignal,
  ) {
    this.signer = new Webhook(cfg.secret);
    this.types = cfg.types ? new Set(cfg.types) : undefined;
    this.shownUrl = shownUrl(cfg.url);
    this.log = o.logger.child({ webhook: this.shownUrl });
  }

  get pending(): number {
    return this.queue.length + (this.sending ? 1 : 0);
  }

  get head(): FarmEvent | undefined {
    return this.current ?? this.queue[0];
  }

  /** Synchronous and O(1) amortised: called from inside the hub's publish. */
  enqueue(e: FarmEvent): void {
    if (this.signal.aborted || (this.types && !this.types.has(e.type))) return;
    if (this.queue.length >= this.o.settings.queue_size) {
      const old = this.queue.shift()!;
      this.counts.dropped++;
      this.log.warn({ event: old.id, type: old.type, queue_size: this.o.settings.queue_size }, 'webhook queue full: dropped the oldest waiting event');
    }
    this.queue.push(e);
    if (!this.sending) void this.pump();
  }

  /** No further attempt or event after the one in flight; that attempt, if any (to be awaited). */
  stopAfterAttempt(): Promise<unknown>[] {
    this.stopping = true;
    return this.attemptInFlight ? [this.attemptInFlight] : [];
  }

  discard(): void {
    if (this.queue.length) this.log.warn({ events: this.queue.length }, 'daemon stopping: queued webhook events not sent');
    this.queue.length = 0;
  }

  private async pump(): Promise<void> {
    this.sending = true;
    try {
      // Taken off the queue only when it will be sent: a stop leaves the rest at the head, for the cursor.
      while (this.queue.length > 0 && !this.signal.aborted && !this.stopping) {
        const e = this.queue.shift()!;
        this.current = e;
        if (!(await this.deliver(e))) this.queue.unshift(e); // stopped before it was done: still the head
        this.current = undefined;
      }
    } finally {
      this.sending = false;
      this.current = undefined;
    }
  }

  /**
   * Attempts until one succeeds or `max_attempts` failed: true when the event is done (delivered or
   * abandoned), false when a stop came first. Never rejects.
   */
  private async deliver(e: FarmEvent): Promise<boolean> {
    const s = this.o.settings;
    const body = JSON.stringify(toCloudEvent(e));
    for (let attempt = 1; attempt <= s.max_attempts; attempt++) {
      const started = performance.now();
      const pending = this.attempt(e, body);
      this.attemptInFlight = pending;
      const r = await pending;
      this.attemptInFlight = undefined;
      if (this.signal.aborted) return false;
      const ms = Math.round(performance.now() - started);
      if (r.ok) {
        this.counts.delivered++;
        this.log.info({ event: e.id, type: e.type, attempt, status: r.status, ms }, 'webhook delivered');
        return true;
      }
      this.counts.failed_attempts++;
      if (this.stopping) return false; // draining: the event stays at the head, for whoever resumes
      if (attempt === s.max_attempts) {
        this.counts.abandoned++;
        this.log.error({ event: e.id, type: e.type, attempts: attempt, status: r.status, error: r.error }, 'webhook abandoned: every attempt failed');
        return true;
      }
      const delay = this.backoff(attempt, r.retryAfterSecs);
      this.log.warn({ event: e.id, type: e.type, attempt, status: r.status, error: r.error, ms, retry_in_ms: delay }, 'webhook attempt failed');
      await sleep(delay, this.signal);
      if (this.signal.aborted || this.stopping) return false;
    }
    return true; // not reached: the last attempt returns above
  }

  private async attempt(e: FarmEvent, body: string): Promise<{ ok: boolean; status: number | null; error?: string; retryAfterSecs?: number }> {
    const now = new Date((this.o.now ?? Date.now)());
    const timeout = AbortSignal.timeout(this.o.settings.timeout_secs * 1000);
    try {
      const res = await fetch(this.cfg.url, {
        method: 'POST',
        redirect: 'manual',
        headers: {
          'content-type': CLOUDEVENTS_CONTENT_TYPE,
          'user-agent': this.o.userAgent,
          'webhook-id': e.id,
          'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
          'webhook-signature': this.signer.sign(e.id, now, body),
        },
        body,
        signal: AbortSignal.any([this.signal, timeout]),
      });
      // The answer's body is not read: release the connection.
      await res.body?.cancel().catch(() => undefined);
      const ok = res.status >= 200 && res.status < 300;
      const retryAfter = Number(res.headers.get('retry-after'));
      return { ok, status: res.status, ...(Number.isFinite(retryAfter) && retryAfter > 0 && { retryAfterSecs: retryAfter }) };
    } catch (err) {
      const error = timeout.aborted ? `no answer within ${this.o.settings.timeout_secs} s` : describe(err);
      return { ok: false, status: null, error };
    }
  }

  /** Exponential: initial * 2^(attempt-1), capped, then "equal jitter" (half fixed, half random); Retry-After raises it. */
  private backoff(attempt: number, retryAfterSecs: number | undefined): number {
    const s = this.o.settings;
    const base = Math.min(s.backoff_max_ms, s.backoff_initial_ms * 2 ** (attempt - 1));
    const jittered = base / 2 + (this.o.random ?? Math.random)() * (base / 2);
    const floor = retryAfterSecs === undefined ? 0 : Math.min(s.backoff_max_ms, retryAfterSecs * 1000);
    return Math.round(Math.max(jittered, floor));
  }
}

function describe(err: unknown): string {
  const e = err as { message?: string; cause?: { code?: string; message?: string } };
  return redactUrls(e.cause?.code ?? e.cause?.message ?? e.message ?? String(err));
}

/** A URL as logs show it: scheme, host and path; never user, password, query or fragment. */
export function shownUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return '[a URL that does not parse]';
  }
}

/** Every URL inside a text (an error message that quotes one) shown as {@link shownUrl} does. */
export function redactUrls(text: string): string {
  // A URL's last character is not punctuation that ends the sentence around it.
  return text.replace(/[a-z][a-z0-9+.-]*:\/\/[^\s"'<>]*[^\s"'<>.,;:!?)\]]/gi, shownUrl);
}

/** Resolves after `ms`, or at once when `signal` aborts; the timer never keeps the process alive. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    t.unref();
    signal.addEventListener('abort', done, { once: true });
  });
}

