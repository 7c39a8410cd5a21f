/**
 * Sign-in for people: a session cookie (HttpOnly, SameSite=Strict) and the
 * CSRF token that every state-changing browser request sends back
 * (docs/portal.md, "Signing in").
 *
 * On a node, sessions live in memory only ({@link SessionStore}); on the portal, in PostgreSQL
 * (src/farm/webSessions.ts), behind the same {@link WebSessionStore} interface. A random 256-bit id (the cookie) maps to the
 * person, the access token they signed in with, and a second random 256-bit
 * CSRF token. Every request re-verifies the session's token, so revoking the
 * token (`farmhand token revoke`) ends its sessions at once. A session ends
 * after {@link SESSION_IDLE_MS} without a request and at most
 * {@link SESSION_MAX_MS} after sign-in; a daemon restart ends them all (a portal restart ends none).
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { Context } from 'koa';
import type { TokenVerifier } from '../core/auth.js';
import type { Role } from '../core/roles.js';

export const SESSION_COOKIE = 'farmhand_session';
/** Idle expiry: a working day without a request. */
export const SESSION_IDLE_MS = 12 * 3600 * 1000;
/** Absolute expiry: a week after sign-in, whatever the use. */
export const SESSION_MAX_MS = 7 * 24 * 3600 * 1000;
/** More than this many live sessions: the least recently used one is dropped (memory stays bounded). */
export const SESSION_LIMIT = 10_000;
/**
 * More than this many live sessions of one user: that user's least recently used session is dropped,
 * so one person signing in over and over (a script, a leaked token) ends only their own sessions,
 * never another person's (the global {@link SESSION_LIMIT} is never reached by one user).
 */
export const SESSIONS_PER_USER = 20;

export interface Session {
  id: string;
  login: string;
  tokenId: string;
  csrf: string;
  /** The token signed in with, kept in memory only, to notice its revocation; none for an OIDC sign-in. */
  token?: string;
  /**
   * The user's role: for a token's session, the token's, looked up again at every use (a change applies at
   * once); for an OIDC session, what the identity provider's claims gave at sign-in (docs/auth.md).
   */
  role?: Role;
  created: number;
  lastSeen: number;
  /** This session's absolute lifetime (OIDC: `oidc.session_max_hours`); default {@link SESSION_MAX_MS}. */
  maxMs?: number;
}

/** A person the identity provider vouched for (src/http/oidc.ts): no token behind the session. */
export interface OidcIdentity {
  login: string;
  role: Role;
  /** The session ends this long after sign-in at the latest. */
  maxMs: number;
}

const newSecret = (): string => randomBytes(32).toString('base64url');

/** Whether `given` is the session's CSRF token (constant time). */
export function csrfMatches(session: Session, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const a = Buffer.from(given, 'utf8');
  const b = Buffer.from(session.csrf, 'utf8');
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * Where sessions live: the node's memory ({@link SessionStore}), or the portal's PostgreSQL
 * (src/farm/webSessions.ts `PgSessionStore`, seen by every replica, surviving a restart). Callers
 * await every answer but `isLive`, which a held connection asks synchronously.
 */
export interface WebSessionStore {
  /** A new session for a valid token; undefined when the token is not valid. */
  create(token: string): Session | undefined | Promise<Session | undefined>;
  /** A new session for a person the identity provider signed in (OIDC). */
  createOidc(who: OidcIdentity): Session | Promise<Session>;
  /** The live session of this cookie value (its use recorded), or undefined. */
  get(id: string | undefined): Session | undefined | Promise<Session | undefined>;
  /** Sign-out: the session ends (everywhere). */
  end(id: string): void | Promise<void>;
  /** Whether a session got earlier is still live, without recording a use (held connections). */
  isLive(s: Session): boolean;
  /** Called with every session that ends (here or, for the portal's store, on any replica). */
  onEnd(fn: (s: Session) => void): void;
}

/** The node's sessions: in memory, so a restart ends them (a node has no database). */
export class SessionStore implements WebSessionStore {
  /** Insertion order is kept as last-use order (a touched session is re-inserted), so the first is the least recently used. */
  private readonly sessions = new Map<string, Session>();
  /** Live sessions per user name, for {@link SESSIONS_PER_USER}. */
  private readonly perUser = new Map<string, number>();
  private readonly endListeners: ((s: Session) => void)[] = [];

  constructor(
    private readonly verifier: TokenVerifier,
    private readonly now: () => number = Date.now,
  ) {}

  /** A new session for a valid token; undefined when the token is not valid. */
  create(token: string): Session | undefined {
    const found = this.verifier.verify(token);
    if (!found) return undefined;
    const t = this.now();
    return this.add({ id: newSecret(), login: found.user, tokenId: found.tokenId, csrf: newSecret(), token, created: t, lastSeen: t, ...(found.role && { role: found.role }) });
  }

  /**
   * A new session for a person the identity provider signed in (OIDC): no token to re-verify, the role
   * fixed at sign-in, a shorter absolute lifetime. Its `tokenId` is `oidc:<login>` (the rate-limit key).
   */
  createOidc(who: OidcIdentity): Session {
    const t = this.now();
    return this.add({ id: newSecret(), login: who.login, tokenId: `oidc:${who.login}`, csrf: newSecret(), role: who.role, created: t, lastSeen: t, maxMs: who.maxMs });
  }

  private add(s: Session): Session {
    this.sessions.set(s.id, s);
    this.perUser.set(s.login, (this.perUser.get(s.login) ?? 0) + 1);
    if (this.perUser.get(s.login)! > SESSIONS_PER_USER) {
      // Map order is last-use order: the first of this user's is their least recently used.
      for (const other of this.sessions.values()) {
        if (other.login === s.login) {
          this.drop(other.id);
          break;
        }
      }
    }
    while (this.sessions.size > SESSION_LIMIT) this.drop(this.sessions.keys().next().value as string);
    return s;
  }

  /** The live session of this id (its use recorded), or undefined: unknown, idle too long, too old, or its token revoked. */
  get(id: string | undefined): Session | undefined {
    if (!id) return undefined;
    const s = this.sessions.get(id);
    if (!s) return undefined;
    if (!this.valid(s)) {
      this.drop(id);
      return undefined;
    }
    s.lastSeen = this.now();
    this.sessions.delete(id);
    this.sessions.set(id, s);
    return s;
  }

  end(id: string): void {
    this.drop(id);
  }

  /**
   * Whether this session is still live, without recording a use: for a held connection (an event
   * stream) that must end when its session does (signed out, dropped, expired, its token revoked).
   */
  isLive(s: Session): boolean {
    return this.sessions.get(s.id) === s && this.valid(s);
  }

  /** Not idle too long, not too old, and its token (if it has one) still valid. */
  /** Whether the session is still live; a token's session takes the token's role as of now. */
  private valid(s: Session): boolean {
    const t = this.now();
    if (t - s.lastSeen > SESSION_IDLE_MS || t - s.created > Math.min(s.maxMs ?? SESSION_MAX_MS, SESSION_MAX_MS)) return false;
    if (s.token === undefined) return true;
    const found = this.verifier.verify(s.token);
    if (found?.tokenId !== s.tokenId) return false;
    // A role changed since sign-in applies to the session at once, as to its token.
    if (found.role === undefined) delete s.role;
    else s.role = found.role;
    return true;
  }

  /** Called with every session that ends here (signed out, dropped by a cap, found expired or revoked). */
  onEnd(fn: (s: Session) => void): void {
    this.endListeners.push(fn);
  }

  private drop(id: string): void {
    const s = this.sessions.get(id);
    if (!s) return;
    this.sessions.delete(id);
    const n = (this.perUser.get(s.login) ?? 1) - 1;
    if (n > 0) this.perUser.set(s.login, n);
    else this.perUser.delete(s.login);
    for (const fn of this.endListeners) fn(s);
  }

  get size(): number {
    return this.sessions.size;
  }
}

interface SessionState {
  session?: Session;
}

/** The session that authenticated this request, if any (set by `authenticate`, src/http/auth.ts). */
export const sessionOf = (ctx: Context): Session | undefined => (ctx.state as SessionState).session;

export const setSessionOf = (ctx: Context, s: Session | undefined): void => {
  (ctx.state as SessionState).session = s;
};

/**
 * The CSRF token of the request's session, for the page's `<meta name="csrf-token">`; none without a
 * session. A page the portal forwarded has none either: the portal never gives a node a person's token
 * (the page's scripts fetch it from the portal, GET /app/session: src/web/static/api.js).
 */
export function csrfTokenOf(ctx: Context): string | undefined {
  return (ctx.state as SessionState).session?.csrf;
}

/** Set the session cookie: HttpOnly, SameSite=Strict, Path=/, Secure when the request came over https. */
export function setSessionCookie(ctx: Context, s: Session): void {
  ctx.cookies.set(SESSION_COOKIE, s.id, { httpOnly: true, sameSite: 'strict', path: '/', secure: ctx.protocol === 'https', overwrite: true });
}

export function clearSessionCookie(ctx: Context): void {
  ctx.cookies.set(SESSION_COOKIE, '', { httpOnly: true, sameSite: 'strict', path: '/', secure: ctx.protocol === 'https', overwrite: true, expires: new Date(0) });
}
