/**
 * Requests from one portal replica to another (docs/farm.md, "Many portals: the proxy"). A replica that does not
 * hold a node's connection passes the request to the replica that does, naming the caller it authenticated; the
 * owner believes that name only under an HMAC-SHA256 of the replicas' shared secret (`replicas.secret_file`) over
 * the method, the path with its query, the user, her role, the calling replica and a timestamp:
 *
 *   X-Farmhand-Replica:           <the calling replica's id>
 *   X-Farmhand-Replica-User:      <the caller's login, URI-encoded; empty: nobody signed in>
 *   X-Farmhand-Replica-Signature: t=<unix ms>;role=<role, or empty>;v1=<hex HMAC>
 *
 * At the edge of every portal (`replicaEdge`, before authentication), a request carrying any of the three headers
 * is either a replica's, signed and fresh (within MAX_SKEW_MS), or refused with a 403 JSON error: a client that
 * sends them itself gets nothing, and a portal with no secret (mode "single") refuses them all. The headers are
 * then removed, so nothing after the edge reads them; `adoptReplicaCaller` (after authentication) makes the request
 * the named user's, with her role, as a token of hers would.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Context, Middleware, Next } from 'koa';
import type { AuthUser } from '../../core/auth.js';
import { FarmError } from '../../core/errors.js';
import { isRole, type Role } from '../../core/roles.js';

export const REPLICA_HEADER = 'x-farmhand-replica';
export const REPLICA_USER_HEADER = 'x-farmhand-replica-user';
export const REPLICA_SIGNATURE_HEADER = 'x-farmhand-replica-signature';
const HEADERS = [REPLICA_HEADER, REPLICA_USER_HEADER, REPLICA_SIGNATURE_HEADER];

/** How far a signature's time may be from the owner's clock (either way): replicas keep their clocks by NTP. */
export const MAX_SKEW_MS = 30_000;

export interface ReplicaCaller {
  /** The calling replica's id. */
  replica: string;
  /** The caller's login; '' for nobody signed in (a page read open to readers). */
  user: string;
  role: Role | undefined;
}

const REPLICA_ID = /^[A-Za-z0-9._-]{1,64}$/;

function mac(secret: Buffer, method: string, path: string, c: ReplicaCaller, t: number): string {
  return createHmac('sha256', secret)
    .update(['farmhand-replica-v1', method.toUpperCase(), path, c.user, c.role ?? '', c.replica, String(t)].join('\n'))
    .digest('hex');
}

/** The three headers of a request for `path` (with its query) made for `caller`, signed now. */
export function signReplicaRequest(secret: Buffer, method: string, path: string, caller: ReplicaCaller, now = Date.now()): Record<string, string> {
  return {
    [REPLICA_HEADER]: caller.replica,
    [REPLICA_USER_HEADER]: encodeURIComponent(caller.user),
    [REPLICA_SIGNATURE_HEADER]: `t=${now};role=${caller.role ?? ''};v1=${mac(secret, method, path, caller, now)}`,
  };
}

/** The caller named by a signed request, or why it is refused. */
export function verifyReplicaRequest(
  secret: Buffer | undefined,
  method: string,
  path: string,
  headers: Record<string, string | string[] | undefined>,
  now = Date.now(),
): ReplicaCaller | { refused: string } {
  if (!secret) return { refused: 'this portal takes no requests from other replicas (replicas.mode is "single")' };
  const one = (h: string) => (typeof headers[h] === 'string' ? (headers[h]) : undefined);
  const replica = one(REPLICA_HEADER)?.trim();
  const userRaw = one(REPLICA_USER_HEADER);
  const m = /^t=(\d{1,15});role=([a-z]*);v1=([0-9a-f]{64})$/.exec(one(REPLICA_SIGNATURE_HEADER)?.trim() ?? '');
  if (!replica || !REPLICA_ID.test(replica) || userRaw === undefined || !m) return { refused: 'the replica headers are incomplete or malformed' };
  let user: string;
  try {
    user = decodeURIComponent(userRaw.trim());
  } catch {
    return { refused: 'the replica user header is malformed' };
  }
  const role = m[2] === '' ? undefined : m[2]!;
  if (role !== undefined && !isRole(role)) return { refused: 'the replica signature names no known role' };
  const t = Number(m[1]);
  const caller: ReplicaCaller = { replica, user, role };
  const want = Buffer.from(mac(secret, method, path, caller, t), 'hex');
  if (!timingSafeEqual(want, Buffer.from(m[3]!, 'hex'))) return { refused: 'the replica signature does not match' };
  if (Math.abs(now - t) > MAX_SKEW_MS) return { refused: `the replica signature is stale (more than ${MAX_SKEW_MS / 1000} s from this replica's clock)` };
  return caller;
}

const callerKey = Symbol('replicaCaller');
type WithCaller = { [callerKey]?: ReplicaCaller };

/** The replica that passed this request on, with the caller it named; undefined for any other request. */
export const replicaCallerOf = (ctx: Context): ReplicaCaller | undefined => (ctx.state as WithCaller)[callerKey];

/**
 * Before authentication: a request with any replica header is a signed, fresh one of another replica, or a 403.
 * The headers are removed either way once read.
 */
export function replicaEdge(secret: Buffer | undefined): Middleware {
  return async function replicaRequests(ctx: Context, next: Next): Promise<void> {
    const h = ctx.request.headers;
    if (h[REPLICA_HEADER] === undefined && h[REPLICA_USER_HEADER] === undefined && h[REPLICA_SIGNATURE_HEADER] === undefined) {
      await next();
      return;
    }
    const v = verifyReplicaRequest(secret, ctx.method, ctx.url, h);
    for (const name of HEADERS) delete h[name];
    if ('refused' in v) {
      throw new FarmError('forbidden', `refused: ${v.refused}; the X-Farmhand-Replica headers are for the portal's replicas only, a client authenticates with its token`);
    }
    (ctx.state as WithCaller)[callerKey] = v;
    await next();
  };
}

/** After authentication: a replica's request is its named caller's (nobody's for ''), with the role it named. */
export const adoptReplicaCaller: Middleware = async (ctx: Context, next: Next): Promise<void> => {
  const c = replicaCallerOf(ctx);
  if (c) {
    const s = ctx.state as { user?: AuthUser; authProblem?: string };
    s.user = c.user ? { login: c.user, tokenId: `replica:${c.user}`, ...(c.role !== undefined && { role: c.role }) } : undefined;
    if (!c.user) s.authProblem = 'missing';
  }
  await next();
};
