/**
 * A portal's stop that lets the requests under way finish (docs/farm.md, "Many portals: faults and figures"): the
 * listener closes at once (a load balancer's next connection is refused and goes to another replica; one the kernel
 * had already queued on the listener, not yet accepted, is reset by the close, its request unread: HAProxy's
 * `retry-on conn-failure empty-response` sends that request to another replica, docs/farm.md), kept-alive
 * connections close after their request, and the requests under way get up to `waitMs` to end (those that change
 * something, longer). What is still unanswered then (a long poll held by a node) is answered 503 `device_unavailable` with `Retry-After`, so that no
 * request that had started ends in a reset connection; a stream whose answer had begun (an event stream, the live
 * view) ends with the connection, as before. A request arriving after the wait, on a connection opened before the
 * listener closed, is answered the same 503 before it reaches the app (and the node): the node connections close next.
 *
 * An await_completion still held at the end of the wait is answered 202 instead (the job has not ended yet: call
 * again, as after the node's own 55 s), so its client calls again, through another replica, and sees no error. A 503
 * to another replica says why (`x-farmhand-replica-unavailable`: `unprocessed` for a request that reached nothing,
 * `cut` for one answered after the wait), so that replica passes it to the node's next owner instead (nodePlace.ts).
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { farmPlacements } from '../../http/endpoints/place.js';
import { OWNER_UNAVAILABLE_HEADER } from './replicaProxy.js';

/**
 * A long poll on a job's end (an entry the table of endpoints says a portal holds, `farm.answer: 'held'`:
 * `/api/v2/jobs/<node>/<hex>/<n>/await_completion`, `/api/v2/nodes/<id>/job/await_completion`): `{ uid }`, the
 * job_uid when the path names it; undefined for any other request.
 */
function longPoll(method: string, url: string): { uid: string | undefined } | undefined {
  if (method !== 'GET') return undefined;
  const found = farmPlacements().entryOf(method, url.split('?', 1)[0]!);
  if (found?.entry.farm.answer !== 'held') return undefined;
  const { node, hex, num } = found.params;
  return { uid: node && hex && num ? safeDecode(`/${node}/${hex}/${num}`) : undefined };
}

export class Drain {
  private readonly open = new Map<ServerResponse, { method: string; url: string; replica: boolean }>();
  private draining = false;
  /** Past the wait: a request arriving now (on a connection opened before the listener closed) is answered 503. */
  private refusing = false;
  private retryAfterSecs = 5;
  private wake: (() => void) | undefined;

  /** `handler` (the app) answers the server's requests through the drain. */
  constructor(
    private readonly server: Server,
    handler: (req: IncomingMessage, res: ServerResponse) => void,
    private readonly log?: (o: Record<string, unknown>) => void,
  ) {
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      const r = { method: req.method ?? 'GET', url: req.url ?? '/', replica: req.headers['x-farmhand-replica'] !== undefined };
      if (this.refusing) {
        this.unavailable(res, r.replica ? 'unprocessed' : undefined);
        return;
      }
      this.open.set(res, r);
      if (this.draining) res.shouldKeepAlive = false;
      res.once('close', () => {
        this.open.delete(res);
        this.wake?.();
      });
      handler(req, res);
    });
  }

  private unavailable(res: ServerResponse, why?: 'unprocessed' | 'cut'): void {
    const body = JSON.stringify({ error: 'device_unavailable', message: 'this portal is stopping: send the request again (another portal replica answers it)' });
    res.writeHead(503, {
      'Content-Type': 'application/json; charset=utf-8',
      'Retry-After': String(this.retryAfterSecs),
      'Content-Length': Buffer.byteLength(body),
      Connection: 'close',
      ...(why && { [OWNER_UNAVAILABLE_HEADER]: why }),
    });
    res.end(body);
  }

  /** A long poll cut by the stop: 202, the job has not ended (yet); the client calls again, as the spec says. */
  private notYet(res: ServerResponse, uid: string | undefined): void {
    const body = JSON.stringify({ ...(uid !== undefined && { job_uid: uid }), message: 'not ended yet (this portal replica is stopping): call again' });
    res.writeHead(202, { 'Content-Type': 'application/json; charset=utf-8', 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
    res.end(body);
  }

  /** Requests under way. */
  get inFlight(): number {
    return this.open.size;
  }

  /** Resolves when `done()` holds (looked at after each request's end) or after `ms`. */
  private async until(done: () => boolean, ms: number): Promise<void> {
    if (done() || ms <= 0) return;
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, ms);
      this.wake = () => {
        if (!done()) return;
        clearTimeout(t);
        resolve();
      };
    });
    this.wake = undefined;
  }

  /**
   * Stop taking connections, let the requests under way end for up to `waitMs`, and those that are not GET or HEAD
   * (a `run_tests` the node is starting: answered 503, its client would send it again and the node run two jobs)
   * for up to `unsafeWaitMs`; then answer the unanswered ones 503 with `Retry-After: retryAfterSecs`. Resolves with
   * the number answered so.
   */
  async run(waitMs: number, unsafeWaitMs: number, retryAfterSecs: number): Promise<number> {
    this.draining = true;
    this.retryAfterSecs = retryAfterSecs;
    this.server.close();
    this.server.closeIdleConnections();
    for (const res of this.open.keys()) if (!res.headersSent) res.shouldKeepAlive = false;
    const safe = (m: string) => m === 'GET' || m === 'HEAD';
    const t0 = Date.now();
    const methods = () => [...this.open.values()].map((r) => r.method).join(' ');
    const under = methods();
    await this.until(() => this.open.size === 0, waitMs);
    await this.until(() => [...this.open.values()].every((r) => safe(r.method)), unsafeWaitMs - waitMs);
    this.log?.({ under_way_at_stop: under, still_under_way: methods(), waited_ms: Date.now() - t0 });
    this.refusing = true;
    let answered = 0;
    for (const [res, r] of this.open) {
      if (res.headersSent || res.writableEnded) continue;
      const poll = longPoll(r.method, r.url);
      if (poll) this.notYet(res, poll.uid);
      else this.unavailable(res, r.replica ? 'cut' : undefined);
      answered++;
    }
    return answered;
  }
}

const safeDecode = (s: string): string | undefined => {
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
};
