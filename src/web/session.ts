/**
 * Sign-in for people: a session cookie (HttpOnly, SameSite=Strict) and the
 * CSRF token that every state-changing browser request sends back.
 *
 * SKELETON: the sign-in piece of issue 9 fills this in. Until then no request
 * has a session and pages render without a CSRF token.
 */
import type { Context } from 'koa';

/** The CSRF token of the request's session, for the page's `<meta name="csrf-token">`; none without a session. */
export function csrfTokenOf(_ctx: Context): string | undefined {
  return undefined;
}
