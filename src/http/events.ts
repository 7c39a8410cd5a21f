/**
 * `GET /api/v2/events`: the event hub as server-sent events (docs/events.md).
 * Each event is `id:`, `event:` (its type) and `data:` (the event as JSON);
 * a comment line every `heartbeatMs` keeps proxies from closing a quiet
 * stream. A client resumes with the `Last-Event-ID` header (browsers send it
 * on reconnect) or `?last_event_id=`; when events after that id are no
 * longer buffered it first gets a `stream.missed` event (without an id).
 *
 * The response is written straight to the socket (`ctx.respond = false`):
 * the request counts once against the rate limit, holding it costs nothing.
 * A client whose unread backlog passes `maxBacklogBytes` is cut off (it
 * reconnects and resumes from the buffer); the hub never waits for it.
 * `close()` ends every stream, so the daemon's shutdown is not held.
 *
 * Who may hold streams (docs/events.md, "Who gets a stream"): each caller (a token, or a session
 * counted against its token; anyone not signed in by their address) holds at most `maxPerCaller`;
 * callers not signed in hold at most half of `maxClients` together, so the other half is kept for
 * people who are. A stream whose token is revoked, or whose session ends, is closed: at once when
 * a session ends here (sign-out), else at the next check, every `revalidateMs`.
 *
 * The events come from a source: the node's EventHub, or the farm's outbox
 * (src/farm/events.ts), whose resume point is read from PostgreSQL.
 */
import Router from '@koa/router';
import { mount } from './endpoints/mount.js';
import type { ServerResponse } from 'node:http';
import { FarmError, invalid } from '../core/errors.js';
import { EventHub, isEventId, type FarmEvent, type Resume, type Subscription } from '../core/events.js';
import type { Logger } from '../core/ports.js';
import { heldCredentialOf, type HeldCredential } from './heldCredential.js';

/** Streams one caller may hold at once (events.max_clients_per_caller). */
export const DEFAULT_MAX_PER_CALLER = 8;
/** How often the credentials of open streams are checked again. */
export const DEFAULT_REVALIDATE_MS = 1000;

export interface EventStreamOptions {
  maxClients: number;
  heartbeatMs: number;
  maxBacklogBytes: number;
  /** Streams one caller may hold (default {@link DEFAULT_MAX_PER_CALLER}). */
  maxPerCaller?: number;
  /** Streams callers not signed in may hold together (default half of `maxClients`, at least 1). */
  maxAnonymous?: number;
  /** How often open streams' credentials are checked again (default {@link DEFAULT_REVALIDATE_MS}). */
  revalidateMs?: number;
  logger?: Logger;
}

/** Where a stream's events come from (the node's hub, the farm's outbox). */
export interface EventStreamSource {
  /** Every event from now on, synchronously; the subscriber only writes to a socket. */
  subscribe(fn: (e: FarmEvent) => void): Subscription;
  /**
   * What a client resuming after `lastId` gets. Called right after `subscribe`; may read a store
   * (a promise), in which case `fresh` says which live events received meanwhile still follow the
   * replay (the others are in it, or older than the client's id).
   */
  since(lastId: string | undefined): StreamResume | Promise<StreamResume>;
  /** Whether `id` has the form of this source's ids (else the request is a 400). */
  isEventId(id: string): boolean;
  /** An id of this source, for the 400's message. */
  exampleId(): string;
}

export interface StreamResume extends Resume {
  fresh?: (e: FarmEvent) => boolean;
}

/** The node's hub as a stream source: its resume is read from memory in the same tick. */
const hubSource = (hub: EventHub): EventStreamSource => ({
  subscribe: (fn) => hub.subscribe(fn),
  since: (lastId) => hub.since(lastId),
  isEventId,
  exampleId: () => `${hub.boot}-1`,
});

interface Client {
  res: ServerResponse;
  cred: HeldCredential;
  end(): void;
  /** Its credential ended: say so in a comment line, then end. */
  revoke(): void;
}

export class EventStream {
  private readonly clients = new Set<Client>();
  private rejectedCount = 0;
  private droppedCount = 0;
  private closed = false;
  /** Open streams per caller key, and of callers not signed in. */
  private readonly perKey = new Map<string, number>();
  private anonymous = 0;
  private readonly revalidator: NodeJS.Timeout;

  private readonly source: EventStreamSource;

  constructor(
    source: EventHub | EventStreamSource,
    private readonly o: EventStreamOptions,
  ) {
    this.source = source instanceof EventHub ? hubSource(source) : source;
    this.revalidator = setInterval(() => this.revalidate(), o.revalidateMs ?? DEFAULT_REVALIDATE_MS);
    this.revalidator.unref();
  }

  /** Streams that callers not signed in may hold together: half, the rest kept for people who are signed in. */
  get maxAnonymous(): number {
    return this.o.maxAnonymous ?? Math.max(1, Math.floor(this.o.maxClients / 2));
  }

  /** End every stream whose token was revoked or whose session ended. */
  revalidate(): void {
    for (const c of [...this.clients]) {
      let ok = false;
      try {
        ok = c.cred.valid();
      } catch {
        // A verifier that cannot answer: keep the stream; the next check asks again.
        ok = true;
      }
      if (!ok) c.revoke();
    }
  }

  /** Stream clients connected now. */
  get clientsConnected(): number {
    return this.clients.size;
  }

  /** Clients cut off for not reading fast enough. */
  get clientsDropped(): number {
    return this.droppedCount;
  }

  /** Connections refused (503) because `maxClients` were connected. */
  get clientsRejected(): number {
    return this.rejectedCount;
  }

  router(): Router {
    const r = new Router();
    // `/app/events`: the same stream for the portal's pages, under the web pages' rule (open unless
    // auth.v1_requires_token), so a page read without signing in still updates live (docs/portal.md).
    mount(r, ['GET /api/v2/events', 'GET /app/events'], async (ctx) => {
      // Given once: the entry's query check (src/http/endpoints/v2.ts); whether it is an event id is this stream's word.
      const q = ctx.query.last_event_id as string | undefined;
      const lastId = q || ctx.get('Last-Event-ID') || undefined; // empty means none
      if (lastId !== undefined && !this.source.isEventId(lastId)) {
        throw invalid(`last_event_id / Last-Event-ID: ${JSON.stringify(lastId.slice(0, 40))} is not an event id; send the id: of the last event received (e.g. "${this.source.exampleId()}"), or none`);
      }
      const cred = heldCredentialOf(ctx);
      this.admit(ctx, cred);
      if (ctx.method === 'HEAD') {
        // The router answers HEAD with the GET route: the headers alone, no stream held open.
        ctx.status = 200;
        ctx.type = 'text/event-stream';
        return;
      }
      // Subscribing before reading the resume point: nothing published meanwhile is lost.
      const feed: Feed = { pending: [], live: undefined, sub: undefined as unknown as Subscription };
      feed.sub = this.source.subscribe((e) => (feed.live ? feed.live(e) : feed.pending.push(e)));
      let resume: StreamResume;
      try {
        const got = this.source.since(lastId);
        resume = got instanceof Promise ? await got : got;
        if (got instanceof Promise) this.admit(ctx, cred); // again: the limit or a shutdown may have come meanwhile
      } catch (err) {
        feed.sub.close();
        if (err instanceof FarmError) throw err;
        this.o.logger?.warn({ err }, 'event stream: reading the resume point failed');
        throw new FarmError('device_unavailable', 'the event store cannot be read now; reconnect in a few seconds');
      }
      ctx.status = 200;
      ctx.respond = false;
      this.open(ctx.res, resume, feed, cred);
    });
    return r;
  }

  /** Throws the 503s: shutting down, `maxClients` connected, this caller's share or the share of callers not signed in used up. */
  private admit(ctx: { set(k: string, v: string): void }, cred: HeldCredential): void {
    if (this.closed) throw new FarmError('device_unavailable', 'farmhand is shutting down; reconnect in a few seconds');
    const refuse = (message: string) => {
      this.rejectedCount++;
      ctx.set('Retry-After', '10');
      return new FarmError('device_unavailable', message);
    };
    if (this.clients.size >= this.o.maxClients) {
      throw refuse(`too many event-stream clients (${this.o.maxClients}); close one, or raise events.max_clients in the config`);
    }
    const mine = this.perKey.get(cred.key) ?? 0;
    const perCaller = this.o.maxPerCaller ?? DEFAULT_MAX_PER_CALLER;
    if (mine >= perCaller) {
      throw refuse(`this caller already holds ${mine} event streams, the most one may (events.max_clients_per_caller); close one (one stream carries every event)`);
    }
    if (!cred.authenticated && this.anonymous >= this.maxAnonymous) {
      throw refuse(`the event streams open to callers that are not signed in (${this.maxAnonymous}) are in use; sign in (or send 'Authorization: token <token>') to use the ones kept for signed-in people, or retry later`);
    }
  }

  /** End every stream (the daemon is stopping); later requests get a 503. */
  close(): void {
    this.closed = true;
    clearInterval(this.revalidator);
    for (const c of [...this.clients]) c.end();
  }

  private open(res: ServerResponse, resume: StreamResume, feed: Feed, cred: HeldCredential): void {
    res.socket?.setTimeout(0);
    res.socket?.setNoDelay(true);
    res.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache, no-transform',
      // nginx buffers responses unless told not to.
      'X-Accel-Buffering': 'no',
    });
    let done = false;
    let heartbeat: NodeJS.Timeout | undefined = undefined;
    // Subscribed before the resume was read: events published meanwhile wait in `feed.pending`.
    const { sub, pending } = feed;
    const write = (chunk: string) => {
      if (done) return;
      res.write(chunk);
      if (res.writableLength > this.o.maxBacklogBytes) {
        this.droppedCount++;
        this.o.logger?.warn({ backlog_bytes: res.writableLength }, 'event-stream client does not keep up; cut off (it resumes from the buffer)');
        sub.drop();
        cleanup();
        res.destroy();
      }
    };
    let unwatch = (): void => undefined;
    const cleanup = () => {
      if (done) return;
      done = true;
      clearInterval(heartbeat);
      sub.close();
      unwatch();
      if (this.clients.delete(client)) {
        const n = (this.perKey.get(cred.key) ?? 1) - 1;
        if (n > 0) this.perKey.set(cred.key, n);
        else this.perKey.delete(cred.key);
        if (!cred.authenticated) this.anonymous--;
      }
    };
    const client: Client = {
      res,
      cred,
      end: () => {
        cleanup();
        res.end();
      },
      revoke: () => {
        if (done) return;
        this.o.logger?.info({ caller: cred.key }, 'event stream closed: its token was revoked or its session ended');
        if (!res.destroyed) res.write(': the credential of this stream was revoked or its session ended; reconnect with a valid one\n\n');
        client.end();
      },
    };
    this.clients.add(client);
    this.perKey.set(cred.key, (this.perKey.get(cred.key) ?? 0) + 1);
    if (!cred.authenticated) this.anonymous++;
    unwatch = cred.onEnd(() => client.revoke());
    if (done) unwatch();
    write(': farmhand event stream\nretry: 2000\n\n');
    if (resume.missed) {
      const m = resume.missed;
      const message =
        m.reason === 'restarted'
          ? 'the daemon restarted since that event; earlier events are gone'
          : m.reason === 'too_old'
            ? 'events after that id are no longer buffered'
            : 'that event id is unknown here';
      write(`event: stream.missed\ndata: ${JSON.stringify({ ...m, message: `${message}; re-read the state you need (job, node, results), then follow the stream` })}\n\n`);
    }
    const fresh = resume.fresh ?? (() => true);
    for (const e of [...resume.events, ...pending.filter(fresh)]) write(format(e));
    pending.length = 0;
    feed.live = (e) => write(format(e));
    if (done) return; // cut off during the replay
    if (res.destroyed || !res.socket || res.socket.destroyed) return cleanup(); // the client left while the resume was read
    heartbeat = setInterval(() => write(': heartbeat\n\n'), this.o.heartbeatMs);
    heartbeat.unref();
    res.on('close', cleanup);
  }
}

/** A stream's subscription, made before its resume was read. */
interface Feed {
  sub: Subscription;
  pending: FarmEvent[];
  /** Set once the replay is written: live events go straight out. */
  live: ((e: FarmEvent) => void) | undefined;
}

/** One event in the text/event-stream format (JSON has no raw newlines, so one data line). */
const format = (e: FarmEvent): string => `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
