/**
 * A portal's stop that lets the requests under way finish (docs/farm.md, "Many portals: faults and figures"): the
 * listener closes at once (a load balancer's next connection is refused and goes to another replica), kept-alive
 * connections close after their request, and the requests under way get up to `waitMs` to end. What is still
 * unanswered then (a long poll held by a node) is answered 503 `device_unavailable` with `Retry-After`, so that no
 * request that had started ends in a reset connection; a stream whose answer had begun (an event stream, the live
 * view) ends with the connection, as before.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';

export class Drain {
  private readonly open = new Set<ServerResponse>();
  private draining = false;
  private wake: (() => void) | undefined;

  constructor(private readonly server: Server) {
    server.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
      this.open.add(res);
      if (this.draining) res.shouldKeepAlive = false;
      res.once('close', () => {
        this.open.delete(res);
        if (this.open.size === 0) this.wake?.();
      });
    });
  }

  /** Requests under way. */
  get inFlight(): number {
    return this.open.size;
  }

  /**
   * Stop taking connections, let the requests under way end for up to `waitMs`, then answer the unanswered ones 503
   * with `Retry-After: retryAfterSecs`. Resolves with the number answered so.
   */
  async run(waitMs: number, retryAfterSecs: number): Promise<number> {
    this.draining = true;
    this.server.close();
    this.server.closeIdleConnections();
    for (const res of this.open) if (!res.headersSent) res.shouldKeepAlive = false;
    if (this.open.size > 0 && waitMs > 0) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, waitMs);
        this.wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.wake = undefined;
    }
    let answered = 0;
    for (const res of this.open) {
      if (res.headersSent || res.writableEnded) continue;
      const body = JSON.stringify({ error: 'device_unavailable', message: 'this portal is stopping: send the request again (another portal replica answers it)' });
      res.writeHead(503, { 'Content-Type': 'application/json; charset=utf-8', 'Retry-After': String(retryAfterSecs), 'Content-Length': Buffer.byteLength(body), Connection: 'close' });
      res.end(body);
      answered++;
    }
    return answered;
  }
}
