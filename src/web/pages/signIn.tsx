/**
 * `/app/sign-in` and `/app/sign-out` (docs/portal.md, "Signing in"): a person
 * signs in once with a v2 access token and gets a session cookie
 * (src/http/session.ts). Both forms are always reachable, whatever
 * `auth.v1_requires_token` says, and refuse posts from other sites: the
 * browser's `Sec-Fetch-Site` or `Origin` must name this site. Sign-out also
 * needs the session's CSRF token (the form's hidden `csrf` field, or the
 * `X-CSRF-Token` header).
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { FarmError } from '../../core/errors.js';
import { userOf } from '../../http/auth.js';
import { bodyOf } from '../../http/body.js';
import { sendPage, wantsPage } from '../layout.js';
import { clearSessionCookie, csrfMatches, sessionOf, setSessionCookie, setSessionOf, type WebSessionStore } from '../../http/session.js';
import { mount } from '../../http/endpoints/mount.js';

/**
 * Where to go after signing in: a path of this site only, else `/`. The check is made on the URL as a
 * browser resolves it (`new URL(next, origin)`: dot segments and `%2e%2e` resolved), and again on what is
 * answered: a result whose path begins `//` (`/..//evil.example` resolves to `//evil.example`) would be read
 * by the browser as another site, so it is refused too.
 */
export function safeNext(raw: unknown): string {
  if (typeof raw !== 'string' || !raw.startsWith('/') || raw.startsWith('//') || raw.startsWith('/\\') || hasControlOrBackslash(raw)) return '/';
  try {
    const base = 'http://farmhand.invalid';
    const u = new URL(raw, base);
    if (u.origin !== base) return '/';
    const out = `${u.pathname}${u.search}${u.hash}`;
    // The answer itself, read again as the browser will read the Location header: same origin, a single leading `/`.
    if (!out.startsWith('/') || out.startsWith('//') || hasControlOrBackslash(out) || new URL(out, base).origin !== base) return '/';
    return out;
  } catch {
    return '/';
  }
}

/** Browsers drop tabs and newlines from URLs and read `\` as `/`: such a `next` is refused whole. */
const hasControlOrBackslash = (s: string): boolean => [...s].some((c) => c === '\\' || c.charCodeAt(0) < 0x20 || c.charCodeAt(0) === 0x7f);

/** 403 for a form post another site made the browser send (login CSRF, forced sign-out). */
function refuseCrossSite(ctx: Context): void {
  const site = ctx.get('Sec-Fetch-Site');
  const origin = ctx.get('Origin');
  const own = `${ctx.protocol}://${ctx.host}`;
  if ((site && site !== 'same-origin' && site !== 'none') || (origin && origin !== own)) {
    throw new FarmError('forbidden', `this form only accepts posts from the portal's own pages (${own}); open ${own}/app/sign-in and use the form there`);
  }
}

function SignInForm(p: { next: string; error?: string; login?: string; farm: boolean; oidc?: string }) {
  return (
    <section class="sign-in">
      <h1>Sign in</h1>
      {p.login ? (
        <p class="signed-in">
          You are signed in as <strong>{p.login}</strong>. Signing in again replaces that session.
        </p>
      ) : null}
      {p.oidc ? (
        <p class="sign-in-oidc">
          <a class="button" href={`/app/sign-in/oidc?next=${encodeURIComponent(p.next)}`}>
            Sign in with {p.oidc}
          </a>
        </p>
      ) : null}
      <p>
        {p.oidc ? 'Or sign in' : 'Sign in'} with your access token: the text that{' '}
        {p.farm ? <code>farmhand farm token create &lt;name&gt;</code> : <code>farmhand token create --user &lt;name&gt;</code>} printed (it starts
        with <code>fh_</code>). The portal keeps you signed in with a cookie until you sign out, stay away for 12 hours, or the
        token is revoked.
      </p>
      <form method="post" action="/app/sign-in" class="sign-in-form">
        <input type="hidden" name="next" value={p.next} />
        <div class="field">
          <label for="token">Access token</label>
          <input
            id="token"
            name="token"
            type="password"
            autocomplete="off"
            spellcheck={false}
            required
            autofocus
            aria-invalid={p.error ? 'true' : undefined}
            aria-describedby={p.error ? 'token-error' : undefined}
          />
          {p.error ? (
            <p id="token-error" class="field-error" role="alert">
              {p.error}
            </p>
          ) : null}
        </div>
        <button type="submit">Sign in</button>
      </form>
      <p class="hint">
        {p.farm
          ? "No token? Ask the farm's administrator: tokens are made for the portal with the command above, and work on every node of the farm."
          : "No token? Ask the node's administrator: tokens are made on the node with the command above."}
      </p>
    </section>
  );
}

const BAD_TOKEN =
  "That token was not accepted: it is unknown, revoked, or not whole (tokens look like fh_<8 hex digits>_<43 characters>). Paste it again, or ask the node's administrator for a new one.";

/** `farm`: the farm's portal (its token command, its navigation); `oidc`: the provider's name for the "Sign in with" button. */
export function signInRouter(sessions: WebSessionStore, o: { farm?: boolean; oidc?: string } = {}): Router {
  const r = new Router();
  const farm = o.farm ?? false;
  const oidc = o.oidc;

  mount(r, 'GET /app/sign-in', (ctx) => {
    sendPage(ctx, <SignInForm next={safeNext(ctx.query.next)} login={userOf(ctx)?.login} farm={farm} oidc={oidc} />, { title: 'Sign in', section: 'sign-in', farm });
  });

  mount(r, 'POST /app/sign-in', async (ctx) => {
    refuseCrossSite(ctx);
    const form = bodyOf(ctx) as Record<string, unknown>;
    const next = safeNext(form.next);
    const token = typeof form.token === 'string' ? form.token.trim() : '';
    const session = token ? await sessions.create(token) : undefined;
    if (!session) {
      const message = token ? BAD_TOKEN : 'Enter your access token.';
      // A program posting the form gets the API's JSON error; a browser gets the form again with the error.
      if (!wantsPage(ctx)) throw new FarmError(token ? 'forbidden' : 'invalid_request', message);
      sendPage(ctx, <SignInForm next={next} error={message} farm={farm} oidc={oidc} />, { title: 'Sign in', section: 'sign-in', farm }, token ? 403 : 400);
      return;
    }
    const old = sessionOf(ctx);
    if (old) await sessions.end(old.id);
    setSessionOf(ctx, session);
    setSessionCookie(ctx, session);
    ctx.status = 303;
    ctx.redirect(next);
  });

  mount(r, 'POST /app/sign-out', async (ctx) => {
    refuseCrossSite(ctx);
    const session = sessionOf(ctx);
    if (session) {
      const form = bodyOf(ctx) as Record<string, unknown>;
      if (!csrfMatches(session, ctx.get('X-CSRF-Token') || form.csrf)) {
        throw new FarmError('forbidden', 'signing out needs the session\'s CSRF token (the sign-out button\'s form carries it): reload the page and press "Sign out" again');
      }
      await sessions.end(session.id);
    }
    clearSessionCookie(ctx);
    ctx.status = 303;
    ctx.redirect('/');
  });

  return r;
}
