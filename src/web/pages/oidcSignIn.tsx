/**
 * Sign-in with OpenID Connect, the routes (docs/auth.md, "Sign-in with OpenID Connect"; the flow is
 * src/http/oidc.ts):
 *
 * - `GET /app/sign-in/oidc?next=<path>`: starts a flow and sends the browser to the provider.
 * - `GET /app/oidc/callback`: the provider sends the browser back here; the answer is checked, the
 *   claims give the user name and the role, and a session is made (src/http/session.ts), as a token
 *   sign-in makes one. Then to `next` (a path of this site only: safeNext).
 *
 * Every failure is a page saying what happened with a link to try again (a browser), or the API's
 * JSON error (anyone else); never a 500.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { AuthUser } from '../../core/auth.js';
import { identityFromClaims } from '../../core/oidc.js';
import type { Role } from '../../core/roles.js';
import { sendError } from '../../http/errors.js';
import { CALLBACK_PATH, FLOW_COOKIE, FLOW_TTL_MS, OidcFailure, type OidcSignIn } from '../../http/oidc.js';
import { sessionOf, setSessionCookie, setSessionOf, type WebSessionStore } from '../../http/session.js';
import { sendPage, wantsPage } from '../layout.js';
import { safeNext } from './signIn.js';
import { mount } from '../../http/endpoints/mount.js';

/** What the app adds to a sign-in (the portal: the users table); answers the role the session gets. */
/** Records the person (the portal's `users`); `from` is the address the browser came from (for the audit trail). */
export type OnOidcSignIn = (who: { login: string; role: Role; from: string }) => Promise<Role>;

const STATUS: Record<string, number> = {
  provider_unreachable: 503,
  sign_in_expired: 400,
  bad_state: 400,
  provider_refused: 403,
  sign_in_failed: 502,
  no_username: 403,
  no_role: 403,
};

function FailurePage(p: { message: string; retry: string; provider: string }) {
  return (
    <section class="sign-in">
      <h1>Sign-in failed</h1>
      <p class="sign-in-error" role="alert">
        {p.message.charAt(0).toUpperCase() + p.message.slice(1)}.
      </p>
      <p>
        <a href={p.retry} class="button">
          Try again with {p.provider}
        </a>{' '}
        or <a href="/app/sign-in">sign in with an access token</a>.
      </p>
    </section>
  );
}

function Continue(p: { login: string; role: Role; next: string }) {
  return (
    <section class="sign-in">
      <meta http-equiv="refresh" content={`0;url=${p.next}`} />
      <h1>Signed in</h1>
      <p>
        You are signed in as <strong>{p.login}</strong> ({p.role}). <a href={p.next}>Continue</a>
      </p>
    </section>
  );
}

/** Lax, not Strict: the provider's redirect back is a navigation from another site, which must carry it. */
const flowCookie = (ctx: Context, value: string, maxAge: number) =>
  ctx.cookies.set(FLOW_COOKIE, value, { httpOnly: true, sameSite: 'lax', path: CALLBACK_PATH, secure: ctx.protocol === 'https', overwrite: true, maxAge });

export function oidcSignInRouter(sessions: WebSessionStore, oidc: OidcSignIn, o: { farm?: boolean; onSignIn?: OnOidcSignIn } = {}): Router {
  const r = new Router();
  const farm = o.farm ?? false;
  const retryUrl = (next: string) => `/app/sign-in/oidc?next=${encodeURIComponent(next)}`;

  const fail = (ctx: Context, code: string, message: string, next: string) => {
    const status = STATUS[code] ?? 400;
    if (!wantsPage(ctx)) {
      sendError(ctx, status, code, message);
      return;
    }
    sendPage(ctx, <FailurePage message={message} retry={retryUrl(next)} provider={oidc.name} />, { title: 'Sign-in failed', section: 'sign-in', farm }, status);
  };

  mount(r, 'GET /app/sign-in/oidc', async (ctx) => {
    const next = safeNext(ctx.query.next);
    try {
      const { url, flowId } = await oidc.start(`${ctx.protocol}://${ctx.host}`, next);
      flowCookie(ctx, flowId, FLOW_TTL_MS);
      ctx.set('Cache-Control', 'no-store');
      ctx.status = 303;
      ctx.redirect(url.href);
    } catch (e) {
      if (!(e instanceof OidcFailure)) throw e;
      fail(ctx, e.code, e.message, next);
    }
  });

  mount(r, `GET ${CALLBACK_PATH}`, async (ctx) => {
    const flowId = ctx.cookies.get(FLOW_COOKIE);
    // Used once: the cookie goes whatever happens next.
    if (flowId) flowCookie(ctx, '', 0);
    ctx.set('Cache-Control', 'no-store');
    let result: { claims: Record<string, unknown>; next: string };
    try {
      result = await oidc.finish(flowId, new URLSearchParams(ctx.querystring));
    } catch (e) {
      if (!(e instanceof OidcFailure)) throw e;
      fail(ctx, e.code, e.message, e.next);
      return;
    }
    const who = identityFromClaims(result.claims, oidc.rules);
    if ('problem' in who) {
      fail(ctx, who.problem, who.message, result.next);
      return;
    }
    const role = o.onSignIn ? await o.onSignIn({ login: who.login, role: who.role, from: ctx.ip }) : who.role;
    const session = await sessions.createOidc({ login: who.login, role, maxMs: oidc.sessionMaxMs });
    const old = sessionOf(ctx);
    if (old) await sessions.end(old.id);
    setSessionOf(ctx, session);
    setSessionCookie(ctx, session);
    // This answer is already the person's (the page header: who, the role, sign-out).
    (ctx.state as { user?: AuthUser }).user = { login: session.login, tokenId: session.tokenId, role };
    // Not a 303: the browser came here from the provider's site, and Chromium keeps a SameSite=Strict
    // cookie off every request of a redirect chain that began on another site, so the page of `next`
    // would be answered as signed out. A page of this site that moves on by itself starts a new,
    // same-site navigation, which carries the cookie.
    sendPage(ctx, <Continue login={who.login} role={role} next={result.next} />, { title: 'Signed in', section: 'sign-in', farm });
  });

  return r;
}
