/**
 * Koa middleware for v2 access tokens. `authenticate` identifies the caller
 * (it never refuses); `requireUser` refuses a request without a valid token
 * with 403, as the spec says for a missing or invalid token. Keeping the two
 * apart lets the rate limiter run in between, keyed on the token id of a
 * known caller and on the address of everyone else.
 *
 * Mount order (see docs/auth.md): errors -> authenticate -> rateLimit ->
 * guardApi (or requireUser per router) -> body parsing -> routes.
 *
 * The Authorization header is never logged, by this module or by the error
 * handler (which logs method and path only): a token in a log is a token
 * anyone with the log can use.
 */
import type { Context, Middleware, Next } from 'koa';
import { parseToken, type AuthUser, type TokenVerifier } from '../core/auth.js';
import { FarmError } from '../core/errors.js';

/** Why a request carries no user; `requireUser` turns it into an actionable message. */
type Problem = 'missing' | 'scheme' | 'malformed' | 'invalid';

interface AuthState {
  user?: AuthUser;
  authProblem?: Problem;
}

const state = (ctx: Context) => ctx.state as AuthState;

/** The authenticated caller of this request, if any. */
export const userOf = (ctx: Context): AuthUser | undefined => state(ctx).user;

/**
 * Split `Authorization: <scheme> <credentials>`. The spec's scheme is
 * `token`; `Bearer` is accepted as well, since generic HTTP clients and
 * proxies speak it and it names the same thing. Schemes are case-insensitive
 * (RFC 9110).
 */
export function tokenFromHeader(header: string | undefined): { token: string } | { problem: Problem } {
  if (header === undefined || header.trim() === '') return { problem: 'missing' };
  const m = /^\s*([A-Za-z]+)\s+(\S+)\s*$/.exec(header);
  if (!m || !/^(token|bearer)$/i.test(m[1]!)) return { problem: 'scheme' };
  return { token: m[2]! };
}

/** Sets `ctx.state.user = { login, tokenId }` when the request carries a valid token; never refuses. */
export function authenticate(verifier: TokenVerifier): Middleware {
  return async function authenticateRequest(ctx: Context, next: Next): Promise<void> {
    const s = state(ctx);
    s.user = undefined;
    const parsed = tokenFromHeader(ctx.get('Authorization') || undefined);
    if ('problem' in parsed) {
      s.authProblem = parsed.problem;
    } else if (!parseToken(parsed.token)) {
      s.authProblem = 'malformed';
    } else {
      const found = verifier.verify(parsed.token);
      if (found) s.user = { login: found.user, tokenId: found.tokenId };
      else s.authProblem = 'invalid';
    }
    await next();
  };
}

const MESSAGES: Record<Problem, string> = {
  missing:
    "this endpoint needs an access token: send the header 'Authorization: token <token>'; an administrator of the node creates one with 'farmhand token create --user <name>'",
  scheme: "the Authorization header must be 'token <token>' (or 'Bearer <token>')",
  malformed: "the access token is not a farmhand token (they look like 'fh_<8 hex digits>_<43 characters>'); check it was copied whole",
  invalid: "the access token is not valid: it is unknown or has been revoked; ask the node's administrator for a new one",
};

/** 403 `forbidden` unless `authenticate` found a valid token. */
export function requireUser(): Middleware {
  return async function requireAuthenticatedUser(ctx: Context, next: Next): Promise<void> {
    const s = state(ctx);
    if (!s.user) throw new FarmError('forbidden', MESSAGES[s.authProblem ?? 'missing']);
    await next();
  };
}

export interface GuardOptions {
  /** The config's `auth.v1_requires_token`: v1 is open unless this is true. */
  v1RequiresToken: boolean;
}

/**
 * One middleware for the whole app: every `/api/v2/...` request needs a
 * token; `/api/v1/...` and the web pages under `/app/...` need one only when
 * the config says so (v1 clients send no credentials), and so does
 * `/metrics`; anything else (the push webhook, `/healthz`, `/readyz`) is left
 * to its own route.
 */
export function guardApi(opts: GuardOptions): Middleware {
  const check = requireUser();
  return async function guardApiPaths(ctx: Context, next: Next): Promise<void> {
    if (needsToken(ctx.path, opts)) await check(ctx, next);
    else await next();
  };
}

/**
 * Whether a request path needs a token under these options. The router
 * matches paths case-insensitively (`/API/V2/user` reaches the v2 handler),
 * so this compares a lower-cased, percent-decoded path with runs of `/`
 * folded: when in doubt, a path is guarded.
 */
export function needsToken(path: string, opts: GuardOptions): boolean {
  const p = normalise(path);
  if (/^\/api\/v2(\/|$)/.test(p)) return true;
  // The web pages (the triage page) and /metrics show what the v1 reads show, so they follow v1's rule.
  return opts.v1RequiresToken && /^\/(api\/v1|app|metrics)(\/|$)/.test(p);
}

function normalise(path: string): string {
  let p = path;
  try {
    p = decodeURIComponent(path);
  } catch {
    // Not valid percent-encoding: no route matches it either; check it as it is.
  }
  return p.toLowerCase().replace(/\/{2,}/g, '/');
}
