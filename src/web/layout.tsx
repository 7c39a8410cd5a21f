/**
 * The portal's page frame: one layout for every page (navigation, the signed-in
 * person, the CSRF token the client scripts send back), rendered on the server
 * with Preact. Preact escapes every text and attribute value: no page builds
 * HTML by hand (a string only becomes markup through `dangerouslySetInnerHTML`,
 * which the portal uses only for the API reference, built from the daemon's own
 * endpoint registry, never for anything from a request or a run).
 */
import type { Context } from 'koa';
import type { ComponentChildren, VNode } from 'preact';
import { renderToString } from 'preact-render-to-string';
import { signedIn, userOf, viaPortal } from '../http/auth.js';
import { csrfTokenOf } from '../http/session.js';

/** The sections of the navigation bar; a page names the one it belongs to. */
export type Section = 'node' | 'results' | 'live' | 'api' | 'sign-in';

export interface PageOptions {
  title: string;
  section?: Section;
  /** Client scripts under /static/ (ES modules), loaded at the end of the page. */
  scripts?: string[];
  /** Extra Content-Security-Policy sources, e.g. `{ 'connect-src': ["'self'"] }`; the base policy is strict. */
  csp?: Record<string, string[]>;
  /** The farm's navigation (the portal's pages, and a node's pages seen through the portal); default: a node's own. */
  farm?: boolean;
}

interface LayoutProps extends PageOptions {
  login?: string;
  /** The signed-in person's role, where there is one (an OIDC sign-in's, from the provider's claims). */
  role?: string;
  csrf?: string;
  /**
   * A page the portal forwards, read by a person signed in on the portal: the node is told neither who she is nor
   * her CSRF token, so the page carries a place for both, filled by the portal's own script (api.js, GET /app/session).
   */
  portalSession?: boolean;
  children: ComponentChildren;
}

const NAV: [Section, string, string][] = [
  ['node', '/', 'Node'],
  ['results', '/app/results', 'Results'],
  ['live', '/app/live', 'Live & remote'],
  ['api', '/app/api', 'API'],
];

/** On the farm's portal: the nodes (each node's live view is linked from there) and the farm-wide results. */
const FARM_NAV: [Section, string, string][] = [
  ['node', '/', 'Nodes'],
  ['results', '/app/results', 'Results'],
];

export function Layout(p: LayoutProps): VNode {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        {p.csrf ? <meta name="csrf-token" content={p.csrf} /> : null}
        <title>{`${p.title} - farmhand`}</title>
        <link rel="icon" href="/favicon.ico" type="image/svg+xml" />
        <link rel="stylesheet" href="/static/portal.css" />
      </head>
      <body>
        <a class="skip" href="#main">
          Skip to content
        </a>
        <header class="top">
          <nav aria-label="Portal">
            <ul>
              {(p.farm ? FARM_NAV : NAV).map(([id, href, label]) => (
                <li>
                  <a href={href} aria-current={p.section === id ? 'page' : undefined}>
                    {label}
                  </a>
                </li>
              ))}
            </ul>
          </nav>
          <div class="who">
            {p.portalSession && !p.login ? (
              <form method="post" action="/app/sign-out" data-portal-session="">
                <span>
                  Signed in as <strong data-portal-login=""></strong>
                </span>{' '}
                <input type="hidden" name="csrf" value="" />
                <button type="submit">Sign out</button>
              </form>
            ) : p.login ? (
              <form method="post" action="/app/sign-out">
                <span>
                  Signed in as <strong>{p.login}</strong>
                  {p.role ? (
                    <>
                      {' '}
                      (<span class="role">{p.role}</span>)
                    </>
                  ) : null}
                </span>{' '}
                {p.csrf ? <input type="hidden" name="csrf" value={p.csrf} /> : null}
                <button type="submit">Sign out</button>
              </form>
            ) : (
              <a href="/app/sign-in" aria-current={p.section === 'sign-in' ? 'page' : undefined}>
                Sign in
              </a>
            )}
          </div>
        </header>
        <main id="main">{p.children}</main>
        {(p.scripts ?? []).map((s) => (
          <script type="module" src={`/static/${s}`} />
        ))}
      </body>
    </html>
  );
}

const BASE_CSP: Record<string, string[]> = {
  'default-src': ["'none'"],
  'script-src': ["'self'"],
  'style-src': ["'self'"],
  'img-src': ["'self'", 'data:', 'blob:'],
  'media-src': ["'self'", 'blob:'],
  'connect-src': ["'self'"],
  'form-action': ["'self'"],
  'base-uri': ["'none'"],
  'frame-ancestors': ["'none'"],
};

function csp(extra: Record<string, string[]> = {}): string {
  const all: Record<string, string[]> = { ...BASE_CSP };
  for (const [k, v] of Object.entries(extra)) all[k] = [...(all[k] ?? []), ...v];
  return Object.entries(all)
    .map(([k, v]) => `${k} ${v.join(' ')}`)
    .join('; ');
}

/**
 * Whether an error may be answered as a page: only to a client that asks for HTML (a browser's
 * navigation sends `Accept: text/html,...`). Every other client gets the API's JSON error
 * `{error, message}`, as on every other path.
 */
export function wantsPage(ctx: Context): boolean {
  return /\btext\/html\b/i.test(ctx.get('Accept'));
}

/** Answer `ctx` with a whole page: the layout around `body`, no caching, a strict CSP. */
export function sendPage(ctx: Context, body: ComponentChildren, o: PageOptions, status = 200): void {
  const page = (
    <Layout {...o} farm={o.farm ?? viaPortal(ctx)} login={userOf(ctx)?.login} role={userOf(ctx)?.role} csrf={csrfTokenOf(ctx)} portalSession={viaPortal(ctx) && signedIn(ctx)}>
      {body}
    </Layout>
  );
  ctx.status = status;
  ctx.type = 'text/html; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  ctx.set('Content-Security-Policy', csp(o.csp));
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.body = `<!doctype html>\n${renderToString(page)}`;
}
