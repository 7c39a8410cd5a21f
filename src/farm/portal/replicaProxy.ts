/**
 * The request of a node held by another replica, passed to that replica over plain HTTP (docs/farm.md, "Many
 * portals: the proxy"): the same method, path and query, the request headers the portal passes to a node, the
 * client's Host (so the owner's URLs are the ones the client called), a JSON body re-serialised from the parsed one
 * (the portal parsed it to read `node_id` and to hold it to the body limit), and the caller signed with the shared
 * secret (replicaAuth.ts). The owner's answer streams back as it comes (bodies, long polls, the live MJPEG stream),
 * through the same header policy as a node's answer (nodeAnswer.ts); nothing is buffered whole. A client that goes
 * away ends the request to the owner (its socket is destroyed, so the owner sees its client go too). An owner that
 * cannot be reached, or breaks off before answering: 503 `device_unavailable` with Retry-After (`OwnerUnavailable`,
 * which says whether the request may be passed again to the node's next owner: nodePlace.ts holds it for that).
 */
import http from 'node:http';
import https from 'node:https';
import type { Context } from 'koa';
import { FarmError } from '../../core/errors.js';
import type { Role } from '../../core/roles.js';
import { userOf } from '../../http/auth.js';
import { bodyOf } from '../../http/body.js';
import { setNodeAnswerHeaders } from './nodeAnswer.js';
import { signReplicaRequest } from './replicaAuth.js';
import { passedRequestHeaders } from './nodeForward.js';

export interface ReplicaTarget {
  replicaId: string;
  /** The owner's advertise_url. */
  url: string;
}

export interface ReplicaProxyOptions {
  secret: Buffer;
  /** This replica's id (named to the owner). */
  replicaId: string;
  publicUrl?: string;
  /** Retry-After of a 503 when the owner does not answer (about a lease: by then the sweeper has moved the node). */
  retryAfterSecs: number;
  /** Giving up on connecting to an owner that does not answer at all (a host gone without a reset). */
  connectTimeoutMs?: number;
}

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

/**
 * The header of an owner's 503 that says the owner could not serve the request because the node is not (or no
 * longer) its, or because it is stopping (drain.ts): `unprocessed` when the request reached neither the owner's
 * routers nor the node, `cut` when the owner's drain answered it after its wait (the node may have seen it).
 * Only ever read from another replica's answer (the header policy drops it from what reaches a client).
 */
export const OWNER_UNAVAILABLE_HEADER = 'x-farmhand-replica-unavailable';

/** The node's owner did not serve the request: it does not answer, or it said the node is not its now. */
export class OwnerUnavailable extends FarmError {
  constructor(
    message: string,
    retryAfter: number,
    /** The request certainly reached neither the owner's routers nor the node: any method may be sent again. */
    readonly unprocessed: boolean,
  ) {
    super('device_unavailable', message, { retryAfter });
  }

  /** Whether the request may be passed to the node's next owner: always a read; anything else only if unprocessed. */
  again(method: string): boolean {
    return this.unprocessed || method === 'GET' || method === 'HEAD';
  }
}

export class ReplicaProxy {
  // No cap on sockets: a request queued behind long-lived streams (MJPEG, long polls) would wait for ever; the owner's own limits apply.
  private readonly agents = { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) };
  /**
   * A request that is not a read goes on a connection of its own, never a kept-alive one: a kept-alive socket the
   * owner closes as the request is sent (its drain closing idle connections) leaves it unknown whether the owner
   * read it, so it could not be passed to the node's next owner; on a new connection, a refusal is certain.
   */
  private readonly once = { http: new http.Agent({ keepAlive: false }), https: new https.Agent({ keepAlive: false }) };
  /** Requests passed to other replicas since start, and of them those not answered in full yet. */
  readonly stats = { total: 0, inFlight: 0 };

  constructor(private readonly o: ReplicaProxyOptions) {}

  /** Answer `ctx` with the owner's answer to the same request. */
  async pass(ctx: Context, nodeId: string, to: ReplicaTarget): Promise<void> {
    const res = await this.request(ctx, nodeId, to, true);
    this.stats.total++;
    const unavailable = res.statusCode === 503 ? res.headers[OWNER_UNAVAILABLE_HEADER] : undefined;
    if (unavailable === 'unprocessed' || unavailable === 'cut') {
      res.resume();
      const retryAfter = Number(res.headers['retry-after']);
      throw new OwnerUnavailable(
        `node ${nodeId} is no longer served by portal replica ${to.replicaId} (it is stopping, or the node moved); try again shortly`,
        Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : this.o.retryAfterSecs,
        unavailable === 'unprocessed',
      );
    }
    const length = res.headers['content-length'];
    setNodeAnswerHeaders(ctx, res.statusCode ?? 502, flatHeaders(res.headers), this.o.publicUrl);
    if (res.statusCode === 204 || res.statusCode === 304 || ctx.method === 'HEAD') {
      res.resume();
      return;
    }
    this.stats.inFlight++;
    let counted = true;
    const done = () => {
      if (counted) this.stats.inFlight--;
      counted = false;
    };
    res.once('close', done);
    // Koa pipes it and destroys it when the client goes away (the socket to the owner with it: the owner's
    // request ends, and with it the node's).
    ctx.body = res;
    if (typeof length === 'string') ctx.set('Content-Length', length);
  }

  private request(ctx: Context, nodeId: string, to: ReplicaTarget, mayRetry: boolean): Promise<http.IncomingMessage> {
    const { options, body, secure } = this.outgoing(ctx, to);
    return new Promise<http.IncomingMessage>((resolve, reject) => {
      const req = (secure ? https : http).request(options);
      let answered = false;
      const connected = this.watchConnect(req);
      const onClientGone = () => {
        if (!ctx.res.writableFinished) req.destroy();
      };
      ctx.res.once('close', onClientGone);
      req.once('response', (res) => {
        answered = true;
        res.once('close', () => ctx.res.off('close', onClientGone));
        resolve(res);
      });
      req.once('error', (e: NodeJS.ErrnoException) => {
        if (answered) return;
        ctx.res.off('close', onClientGone);
        // A kept-alive socket the owner had just closed: a read is tried once more on a new one.
        if (mayRetry && req.reusedSocket && (ctx.method === 'GET' || ctx.method === 'HEAD') && !ctx.res.destroyed) {
          this.request(ctx, nodeId, to, false).then(resolve, reject);
          return;
        }
        reject(
          new OwnerUnavailable(
            `node ${nodeId} is connected to portal replica ${to.replicaId}, which does not answer (${e.code ?? e.message}); try again shortly`,
            this.o.retryAfterSecs,
            !connected(),
          ),
        );
      });
      req.end(body);
    });
  }

  /** The request to the owning replica: the client's, signed as this replica, its JSON body read again. */
  private outgoing(ctx: Context, to: ReplicaTarget): { options: http.RequestOptions; body: Buffer | undefined; secure: boolean } {
    const target = new URL(to.url);
    const user = userOf(ctx);
    const headers: Record<string, string> = {
      ...passedRequestHeaders(ctx),
      host: ctx.get('host') || target.host,
      ...signReplicaRequest(this.o.secret, ctx.method, ctx.url, { replica: this.o.replicaId, user: user?.login ?? '', role: user?.role }),
    };
    let body: Buffer | undefined;
    if (BODY_METHODS.has(ctx.method)) {
      body = Buffer.from(JSON.stringify(bodyOf(ctx)));
      headers['content-type'] = 'application/json';
      headers['content-length'] = String(body.length);
    }
    const secure = target.protocol === 'https:';
    const prefix = target.pathname.replace(/\/+$/, '');
    const options: http.RequestOptions = {
      protocol: target.protocol,
      hostname: target.hostname.replace(/^\[|\]$/g, ''),
      port: target.port || (secure ? 443 : 80),
      method: ctx.method,
      path: prefix + ctx.url,
      headers,
      agent: (ctx.method === 'GET' || ctx.method === 'HEAD' ? this.agents : this.once)[secure ? 'https' : 'http'],
    };
    return { options, body, secure };
  }

  /**
   * Gives up a connection not made within the connect timeout; the answer says whether a connection was made for
   * this request (none: the owner never saw it).
   */
  private watchConnect(req: http.ClientRequest): () => boolean {
    let connected = false;
    req.once('socket', (socket) => {
      if (!socket.connecting) {
        connected = true;
        return;
      }
      const ms = this.o.connectTimeoutMs ?? 3000;
      const timer = setTimeout(() => req.destroy(new Error(`no connection within ${ms} ms`)), ms);
      socket.once('connect', () => {
        connected = true;
        clearTimeout(timer);
      });
      socket.once('close', () => clearTimeout(timer));
    });
    return () => connected;
  }

  /**
   * A request of this replica's own to another replica (`path` with its query, no body), signed for `caller`: the
   * answer's status once it came (its body dropped). Rejects when the replica does not answer within `timeoutMs`.
   */
  async call(to: ReplicaTarget, method: string, path: string, caller: { user: string; role?: Role | undefined }, timeoutMs = 120_000): Promise<number> {
    const prefix = new URL(to.url).pathname.replace(/\/+$/, '');
    const res = await fetch(new URL(prefix + path, to.url), {
      method,
      headers: signReplicaRequest(this.o.secret, method, path, { replica: this.o.replicaId, user: caller.user, role: caller.role }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    await res.body?.cancel();
    return res.status;
  }

  close(): void {
    this.agents.http.destroy();
    this.agents.https.destroy();
    this.once.http.destroy();
    this.once.https.destroy();
  }
}

function flatHeaders(h: http.IncomingHttpHeaders): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}
