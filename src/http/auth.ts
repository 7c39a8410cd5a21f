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
import { createHash, timingSafeEqual } from 'node:crypto';
import type { Context, Middleware, Next } from 'koa';
import { parseToken, type AuthUser, type TokenVerifier } from '../core/auth.js';
import { BASE_URL_HEADER, CLIENT_ADDRESS_HEADER, DELEGATE_HEADER, ON_BEHALF_HEADER, SIGNED_IN_HEADER } from './delegateHeaders.js';
import { FarmError } from '../core/errors.js';
import { clearSessionCookie, csrfMatches, SESSION_COOKIE, setSessionOf, type WebSessionStore } from './session.js';

/** Why a request carries no user; `requireUser` turns it into an actionable message. */
type Problem = 'missing' | 'scheme' | 'malformed' | 'invalid' | 'session';

interface AuthState {
  user?: AuthUser;
  authProblem?: Problem;
  /** The portal's base URL, on a request the node's portal link forwarded (context.ts baseUrl). */
  delegatedBaseUrl?: string;
  /** The request came from the node's portal link (a page seen through the portal). */
  viaPortal?: boolean;
  /** A page the portal forwarded for a person signed in on the portal (who she is, the node is not told). */
  portalSignedIn?: boolean;
  /** On a request the portal forwarded: its caller's address as the portal saw it (the audit trail's `from`). */
  portalClient?: string;
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

/**
 * Whether the person reading the page is signed in: a user of this request, or, on a page the portal
 * forwarded, a person the portal says is signed in there (SIGNED_IN_HEADER: the portal names nobody).
 */
export const signedIn = (ctx: Context): boolean => state(ctx).user !== undefined || state(ctx).portalSignedIn === true;

/** The portal's base URL of a forwarded request; undefined on any other request. */
export const delegatedBaseUrlOf = (ctx: Context): string | undefined => state(ctx).delegatedBaseUrl;

/**
 * Where the request came from, for the audit trail: on a request the portal forwarded, the address its caller
 * called the portal from (the portal says so, with the delegate secret); else this socket's peer.
 */
export const clientAddressOf = (ctx: Context): string | null => state(ctx).portalClient ?? ctx.request.socket.remoteAddress ?? null;

/** Whether the node's portal link made this request (a page is then seen through the portal: its navigation is the farm's). */
export const viaPortal = (ctx: Context): boolean => state(ctx).viaPortal === true;

/**
 * A request the node's own portal link (src/farm/link/h2Server.ts, its header policy in forwardHeaders.ts) makes on behalf of a portal user carries
 * the link's per-process secret in DELEGATE_HEADER. Only then are ON_BEHALF_HEADER (the user) and
 * BASE_URL_HEADER (for job_url etc.) believed; anyone else's copies of them are ignored. The secret
 * never leaves the process (the link talks to this server on loopback) and is never logged.
 */
export interface DelegateRule {
  secret: string;
}

/**
 * The delegated user and base URL, when the request carries the right secret. An empty user name is a
 * page read through the portal: no user (the portal tells a node nobody's name, session or CSRF token for
 * a page), but the portal's base URL still applies, and SIGNED_IN_HEADER says whether the reader is
 * signed in on the portal.
 */
function delegated(ctx: Context, rule: DelegateRule | undefined): { login: string; baseUrl: string | undefined; signedIn: boolean; client: string | undefined } | undefined {
  if (!rule) return undefined;
  const given = ctx.get(DELEGATE_HEADER);
  if (!given || !sameSecret(given, rule.secret)) return undefined;
  const login = ctx.get(ON_BEHALF_HEADER).trim();
  const base = ctx.get(BASE_URL_HEADER).trim();
  const client = ctx.get(CLIENT_ADDRESS_HEADER).trim();
  return {
    login,
    baseUrl: /^https?:\/\/[^\s/]+/i.test(base) ? base : undefined,
    signedIn: login !== '' || ctx.get(SIGNED_IN_HEADER).trim() === '1',
    client: /^[0-9A-Fa-f.:]{2,45}$/.test(client) ? client : undefined,
  };
}

/** Constant-time comparison (of digests, so lengths do not leak either). */
function sameSecret(given: string, secret: string): boolean {
  const h = (v: string) => createHash('sha256').update(v).digest();
  return timingSafeEqual(h(given), h(secret));
}

/** Methods that change nothing: the only ones a session cookie authenticates without the CSRF token. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The portal's form posts (sign-in, sign-out): their body is a urlencoded form,
 * and they check their own cross-site rules (src/web/pages/signIn.tsx), since
 * the CSRF token of the sign-out form is a form field read after body parsing.
 */
export const FORM_PATHS = new Set(['/app/sign-in', '/app/sign-out']);

/** Sign-in with OpenID Connect (src/web/pages/oidcSignIn.tsx): open like the forms, whatever `auth.v1_requires_token` says. */
export const OIDC_PATHS = new Set(['/app/sign-in/oidc', '/app/oidc/callback']);

/**
 * Sets `ctx.state.user = { login, tokenId }` when the request carries a valid
 * token, or, with no Authorization header, a live session cookie (src/http/session.ts).
 * Refuses only one thing: a state-changing request authenticated by the cookie
 * without the session's CSRF token in `X-CSRF-Token` (403); requests with a
 * token header are not affected. With `delegate`, a request of the node's
 * portal link is the portal user it names (DelegateRule).
 */
export function authenticate(verifier: TokenVerifier, sessions?: WebSessionStore, delegate?: DelegateRule): Middleware {
  return async function authenticateRequest(ctx: Context, next: Next): Promise<void> {
    const s = state(ctx);
    s.user = undefined;
    s.delegatedBaseUrl = undefined;
    s.viaPortal = false;
    s.portalSignedIn = false;
    s.portalClient = undefined;
    setSessionOf(ctx, undefined);
    const onBehalf = delegated(ctx, delegate);
    if (onBehalf) {
      // The portal authenticated the caller and checked her role (the node's table is the portal's): the node
      // acts for her as for a token user of a node without roles.
      if (onBehalf.login) s.user = { login: onBehalf.login, tokenId: `portal:${onBehalf.login}` };
      else s.authProblem = 'missing';
      s.delegatedBaseUrl = onBehalf.baseUrl;
      s.viaPortal = true;
      s.portalSignedIn = onBehalf.signedIn;
      s.portalClient = onBehalf.client;
      await next();
      return;
    }
    const parsed = tokenFromHeader(ctx.get('Authorization') || undefined);
    if ('problem' in parsed) {
      s.authProblem = parsed.problem;
      const cookie = sessions ? ctx.cookies.get(SESSION_COOKIE) : undefined;
      if (parsed.problem === 'missing' && cookie) {
        const session = await sessions!.get(cookie);
        if (session) {
          if (!SAFE_METHODS.has(ctx.method) && !FORM_PATHS.has(ctx.path.toLowerCase()) && !csrfMatches(session, ctx.get('X-CSRF-Token'))) {
            throw new FarmError(
              'forbidden',
              ctx.get('X-CSRF-Token')
                ? 'the X-CSRF-Token header does not match this session: reload the page (it carries the token in <meta name="csrf-token">) and try again'
                : 'a request authenticated by the session cookie must send the X-CSRF-Token header (the page\'s <meta name="csrf-token">); programs send an access token instead',
            );
          }
          s.user = { login: session.login, tokenId: session.tokenId, ...(session.role !== undefined && { role: session.role }) };
          setSessionOf(ctx, session);
        } else {
          // Ended, expired, its token revoked, or from before a restart: forget it in the browser too.
          s.authProblem = 'session';
          clearSessionCookie(ctx);
        }
      }
    } else if (!parseToken(parsed.token)) {
      s.authProblem = 'malformed';
    } else {
      const found = verifier.verify(parsed.token);
      // The role is the user's now (the verifier looks it up at each request), so a change applies at once.
      if (found) s.user = { login: found.user, tokenId: found.tokenId, ...(found.role && { role: found.role }) };
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
  session:
    "the session has ended (signed out, idle too long, its token revoked, or the daemon restarted): sign in again at /app/sign-in, or send the header 'Authorization: token <token>'",
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
    if (!needsToken(ctx.path, opts)) {
      await next();
      return;
    }
    // A page read the portal forwarded for a person signed in there: the portal checked her, and names nobody to the node.
    if (state(ctx).portalSignedIn && SAFE_METHODS.has(ctx.method) && !/^\/api\/v2(\/|$)/.test(normalise(ctx.path))) {
      await next();
      return;
    }
    if (!state(ctx).user && asksForPage(ctx)) {
      // A person in a browser: the sign-in page, then back here (API clients keep the JSON 403).
      ctx.status = 303;
      ctx.redirect(`/app/sign-in?next=${encodeURIComponent(ctx.originalUrl)}`);
      return;
    }
    await check(ctx, next);
  };
}

/** A browser asking for a web page (not the event stream, not JSON): GET or HEAD of `/` or `/app/...` with Accept text/html. */
export function asksForPage(ctx: Context): boolean {
  if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return false;
  if (!/^\/(app(\/|$)|$)/.test(normalise(ctx.path))) return false;
  return ctx.accepts('application/json', 'text/html') === 'text/html' && /text\/html/i.test(ctx.get('Accept'));
}

/**
 * Whether a request path needs a token under these options. The router
 * matches paths case-insensitively (`/API/V2/user` reaches the v2 handler),
 * so this compares a lower-cased, percent-decoded path with runs of `/`
 * folded: when in doubt, a path is guarded. The sign-in and sign-out forms
 * and the OIDC sign-in's two paths are always open (a person must reach them to sign in at all).
 */
export function needsToken(path: string, opts: GuardOptions): boolean {
  const p = normalise(path);
  if (/^\/api\/v2(\/|$)/.test(p)) return true;
  if (FORM_PATHS.has(p) || OIDC_PATHS.has(p)) return false;
  // The web pages (the front door `/`, `/app/...`) and /metrics show what the v1 reads show, so they follow v1's rule.
  return opts.v1RequiresToken && (p === '/' || /^\/(api\/v1|app|metrics)(\/|$)/.test(p));
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
