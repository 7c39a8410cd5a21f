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
 * The events come from a source: the node's EventHub, or the farm's outbox
 * (src/farm/events.ts), whose resume point is read from PostgreSQL.
 */
import Router from '@koa/router';
import type { ServerResponse } from 'node:http';
import { FarmError, invalid } from '../core/errors.js';
import { EventHub, isEventId, type FarmEvent, type Resume, type Subscription } from '../core/events.js';
import type { Logger } from '../core/ports.js';

export interface EventStreamOptions {
  maxClients: number;
  heartbeatMs: number;
  maxBacklogBytes: number;
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
  end(): void;
}

export class EventStream {
  private readonly clients = new Set<Client>();
  private rejectedCount = 0;
  private droppedCount = 0;
  private closed = false;

  private readonly source: EventStreamSource;

  constructor(
    source: EventHub | EventStreamSource,
    private readonly o: EventStreamOptions,
  ) {
    this.source = source instanceof EventHub ? hubSource(source) : source;
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
    r.get(['/api/v2/events', '/app/events'], async (ctx) => {
      const q = ctx.query.last_event_id;
      if (Array.isArray(q)) throw invalid('last_event_id: give it once');
      const lastId = q || ctx.get('Last-Event-ID') || undefined; // empty means none
      if (lastId !== undefined && !this.source.isEventId(lastId)) {
        throw invalid(`last_event_id / Last-Event-ID: ${JSON.stringify(lastId.slice(0, 40))} is not an event id; send the id: of the last event received (e.g. "${this.source.exampleId()}"), or none`);
      }
      this.admit(ctx);
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
        if (got instanceof Promise) this.admit(ctx); // again: the limit or a shutdown may have come meanwhile
      } catch (err) {
        feed.sub.close();
        if (err instanceof FarmError) throw err;
        this.o.logger?.warn({ err }, 'event stream: reading the resume point failed');
        throw new FarmError('device_unavailable', 'the event store cannot be read now; reconnect in a few seconds');
      }
      ctx.status = 200;
      ctx.respond = false;
      this.open(ctx.res, resume, feed);
    });
    return r;
  }

  /** Throws the 503s: shutting down, or `maxClients` connected. */
  private admit(ctx: { set(k: string, v: string): void }): void {
    if (this.closed) throw new FarmError('device_unavailable', 'farmhand is shutting down; reconnect in a few seconds');
    if (this.clients.size >= this.o.maxClients) {
      this.rejectedCount++;
      ctx.set('Retry-After', '10');
      throw new FarmError('device_unavailable', `too many event-stream clients (${this.o.maxClients}); close one, or raise events.max_clients in the config`);
    }
  }

  /** End every stream (the daemon is stopping); later requests get a 503. */
  close(): void {
    this.closed = true;
    for (const c of [...this.clients]) c.end();
  }

  private open(res: ServerResponse, resume: StreamResume, feed: Feed): void {
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
    const cleanup = () => {
      if (done) return;
      done = true;
      clearInterval(heartbeat);
      sub.close();
      this.clients.delete(client);
    };
    const client: Client = {
      res,
      end: () => {
        cleanup();
        res.end();
      },
    };
    this.clients.add(client);
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
