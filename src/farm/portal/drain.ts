/**
 * A portal's stop that lets the requests under way finish (docs/farm.md, "Many portals: faults and figures"): the
 * listener closes at once (a load balancer's next connection is refused and goes to another replica), kept-alive
 * connections close after their request, and the requests under way get up to `waitMs` to end (those that change
 * something, longer). What is still unanswered then (a long poll held by a node) is answered 503 `device_unavailable` with `Retry-After`, so that no
 * request that had started ends in a reset connection; a stream whose answer had begun (an event stream, the live
 * view) ends with the connection, as before. A request arriving after the wait, on a connection opened before the
 * listener closed, is answered the same 503 before it reaches the app (and the node): the node connections close next.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export class Drain {
  private readonly open = new Map<ServerResponse, string>();
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
      if (this.refusing) {
        this.unavailable(res);
        return;
      }
      this.open.set(res, req.method ?? 'GET');
      if (this.draining) res.shouldKeepAlive = false;
      res.once('close', () => {
        this.open.delete(res);
        this.wake?.();
      });
      handler(req, res);
    });
  }

  private unavailable(res: ServerResponse): void {
    const body = JSON.stringify({ error: 'device_unavailable', message: 'this portal is stopping: send the request again (another portal replica answers it)' });
    res.writeHead(503, { 'Content-Type': 'application/json; charset=utf-8', 'Retry-After': String(this.retryAfterSecs), 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
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
    const under = [...this.open.values()].join(' ');
    await this.until(() => this.open.size === 0, waitMs);
    await this.until(() => [...this.open.values()].every(safe), unsafeWaitMs - waitMs);
    this.log?.({ under_way_at_stop: under, still_under_way: [...this.open.values()].join(' '), waited_ms: Date.now() - t0 });
    this.refusing = true;
    let answered = 0;
    for (const res of this.open.keys()) {
      if (res.headersSent || res.writableEnded) continue;
      this.unavailable(res);
      answered++;
    }
    return answered;
  }
}
