/**
 * What a held connection (an event stream, src/http/events.ts) needs to know about its caller after
 * the request was answered: who it counts against (`key`), whether it is signed in, whether its
 * credential is still good (a revoked token, an ended session), and a way to hear at once that its
 * session ended (signed out, dropped, expired). Mounted right after `authenticate`; it only records.
 *
 * Keys: `token:<token id>` for a token or a session (a session counts against the token it was
 * signed in with), `portal:<login>` for a person the node's portal link acts for, and
 * `address:<ip>` for everyone else.
 */
import type { Context, Middleware, Next } from 'koa';
import type { TokenVerifier } from '../core/auth.js';
import { tokenFromHeader, userOf, viaPortal } from './auth.js';
import { sessionOf, type Session, type WebSessionStore } from './session.js';

export interface HeldCredential {
  /** What the per-caller share counts against. */
  key: string;
  /** Signed in (a token, a session, a portal user): may use the slots kept for people who are. */
  authenticated: boolean;
  /** Whether the credential is still good now (false: revoked, signed out, expired). */
  valid(): boolean;
  /** Call `fn` as soon as the credential is known to have ended; returns the unsubscribe. */
  onEnd(fn: () => void): () => void;
}

interface HeldState {
  heldCredential?: HeldCredential;
}

/** The caller of this request, as `rememberCredential` recorded it; a fallback from the request itself when it is not mounted. */
export function heldCredentialOf(ctx: Context): HeldCredential {
  const held = (ctx.state as HeldState).heldCredential;
  if (held) return held;
  const user = userOf(ctx);
  return { key: user ? `token:${user.tokenId}` : `address:${ctx.ip}`, authenticated: !!user, valid: () => true, onEnd: () => () => undefined };
}

export function rememberCredential(verifier: TokenVerifier, sessions: WebSessionStore): Middleware {
  // Sessions that end: their held connections are told at once.
  const watchers = new Map<string, Set<() => void>>();
  sessions.onEnd((s) => {
    const fns = watchers.get(s.id);
    watchers.delete(s.id);
    for (const fn of fns ?? []) fn();
  });
  const watchSession = (s: Session) => (fn: () => void) => {
    let set = watchers.get(s.id);
    if (!set) watchers.set(s.id, (set = new Set()));
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0 && watchers.get(s.id) === set) watchers.delete(s.id);
    };
  };
  const never = () => () => undefined;

  return async function rememberHeldCredential(ctx: Context, next: Next): Promise<void> {
    const user = userOf(ctx);
    let held: HeldCredential;
    const session = sessionOf(ctx);
    if (!user) {
      held = { key: `address:${ctx.ip}`, authenticated: false, valid: () => true, onEnd: never };
    } else if (viaPortal(ctx)) {
      // The portal checked the person; the link is the node's own connection.
      held = { key: user.tokenId, authenticated: true, valid: () => true, onEnd: never };
    } else if (session) {
      held = { key: `token:${user.tokenId}`, authenticated: true, valid: () => sessions.isLive(session), onEnd: watchSession(session) };
    } else {
      const parsed = tokenFromHeader(ctx.get('Authorization') || undefined);
      const token = 'token' in parsed ? parsed.token : '';
      held = { key: `token:${user.tokenId}`, authenticated: true, valid: () => verifier.verify(token)?.tokenId === user.tokenId, onEnd: never };
    }
    (ctx.state as HeldState).heldCredential = held;
    await next();
  };
}
