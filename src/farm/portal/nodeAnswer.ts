/**
 * What the portal passes on of a node's answer, and what it adds of its own (docs/farm.md, "What a node can
 * do to the portal"). Everything the portal serves from a node is the portal's origin, so a node, or anything
 * holding its credential, must not get to speak as the portal there:
 *
 * - only the headers that describe the content pass (type, length, range, caching, encoding, download name,
 *   Retry-After, the live frame's X-Frame-Seq), a Location only to a path of the portal, a Refresh only as a
 *   reload of the same page; never `Set-Cookie`, a CSP, CORS or anything else of the node's;
 * - every answer gets the portal's own Content-Security-Policy and `nosniff`: a node's HTML page (the result,
 *   job and live pages) the portal's page policy, in which scripts and styles are only the portal's own files
 *   under /static/ (not `'self'`: a node serves paths of the portal's origin too, and a script it serves there
 *   must not run); anything else a sandbox where nothing runs (src/http/securityHeaders.ts: the answers'
 *   default, or the artifact sandbox);
 * - a page request tells the node neither who is reading nor her session's CSRF token, only whether she is
 *   signed in (pageUser): the page's scripts are the portal's, and fetch the token from the portal
 *   (GET /app/session).
 */
import type { Context } from 'koa';
import { userOf } from '../../http/auth.js';
import { ARTIFACT_CSP, DEFAULT_CSP } from '../../http/securityHeaders.js';
import { SIGNED_IN_HEADER } from '../protocol.js';

/** Headers of a node's answer that describe its content; the only ones the portal passes on. */
const CONTENT_HEADERS = new Set([
  'content-type',
  'content-length',
  'content-range',
  'accept-ranges',
  'last-modified',
  'etag',
  'cache-control',
  'content-encoding',
  'content-disposition',
  'retry-after',
  // The live view's frame.png names its frame (docs/web.md); a number.
  'x-frame-seq',
]);

/** The portal's scripts a node's page may load (result, job and live pages, and what they import). */
const PAGE_SCRIPTS = ['result.js', 'job.js', 'live.js', 'api.js'];

/**
 * The policy of anything of a node's that is not one of its pages: the answers' default (JSON, an event stream) or
 * the artifact sandbox (a result's files, anything else: an HTML report still reads), both with nothing run.
 */
export function nodeContentCsp(contentType: string): string {
  return /^\s*(application\/json|text\/event-stream)\b/i.test(contentType) ? DEFAULT_CSP : ARTIFACT_CSP;
}

/** Request paths whose answer is a node's web page (forwarded by routes.ts). */
const PAGE_PATH = /^\/app\/(results|jobs|nodes)\//i;

/** A page read: the web pages and the v1 reads they make (open to readers, as on a node). */
export const isPageRead = (ctx: Context): boolean => /^\/(app|api\/v1)\//i.test(ctx.path);

/**
 * The user a forwarded request names to the node: the caller for the v2 API (the node acts for them: a job's
 * username, last_used_by), nobody ('') for a page read, where the node only learns whether the reader is
 * signed in (SIGNED_IN_HEADER, set by pageHeaders).
 */
export function forwardedUser(ctx: Context): string {
  return isPageRead(ctx) ? '' : (userOf(ctx)?.login ?? 'anonymous');
}

/** Add to a page read's forwarded headers whether the reader is signed in on the portal (nothing else of hers). */
export function pageHeaders(ctx: Context, headers: Record<string, string>): Record<string, string> {
  if (isPageRead(ctx) && userOf(ctx)) headers[SIGNED_IN_HEADER] = '1';
  return headers;
}

/** A host the portal may name in a CSP (a request's own Host: no spaces, quotes or semicolons). */
const HOST = /^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$/;

/** The origins this request reached the portal by (its own Host, and the configured public_url). */
function origins(ctx: Context, publicUrl: string | undefined): string[] {
  const out = new Set<string>();
  if (HOST.test(ctx.host)) out.add(`${ctx.protocol}://${ctx.host}`);
  if (publicUrl) {
    try {
      out.add(new URL(publicUrl).origin);
    } catch {
      // parsePortalConfig checks public_url; nothing to add otherwise.
    }
  }
  return [...out];
}

/**
 * The portal's policy for a node's page: the pages' strict policy (src/web/layout.tsx), with scripts and the style
 * sheet limited to the portal's own files (an http source also matches its https form), forms to sign-out.
 */
export function nodePageCsp(ctx: Context, publicUrl?: string): string {
  const o = origins(ctx, publicUrl);
  const files = (names: string[]) => o.flatMap((origin) => names.map((n) => `${origin}/static/${n}`));
  const policy: [string, string[]][] = [
    ['default-src', ["'none'"]],
    ['script-src', files(PAGE_SCRIPTS)],
    ['style-src', files(['portal.css'])],
    ['img-src', ["'self'", 'data:', 'blob:']],
    ['media-src', ["'self'", 'blob:']],
    ['connect-src', ["'self'"]],
    ['form-action', o.map((origin) => `${origin}/app/sign-out`)],
    ['base-uri', ["'none'"]],
    ['frame-ancestors', ["'none'"]],
  ];
  return policy.map(([k, v]) => `${k} ${v.length ? v.join(' ') : "'none'"}`).join('; ');
}

/**
 * Answer `ctx` with a node's status and headers: the content headers only, the portal's CSP and nosniff. `body`
 * and `Content-Length` are the caller's to set.
 */
export function setNodeAnswerHeaders(ctx: Context, status: number, headers: Record<string, string>, publicUrl?: string): void {
  ctx.status = status;
  for (const [k, v] of Object.entries(headers)) {
    const name = k.toLowerCase();
    if (CONTENT_HEADERS.has(name)) ctx.set(k, v);
    // A redirect to a path of the portal (a node's sign-in redirect, say); never to another site.
    else if (name === 'location' && /^\/(?![/\\])/.test(v) && !/[\s\\]/.test(v)) ctx.set('Location', v);
    // A page that reloads itself (a running result's page); no redirect.
    else if (name === 'refresh' && /^\s*[0-9]{1,5}\s*$/.test(v)) ctx.set('Refresh', v.trim());
  }
  const type = ctx.response.get('Content-Type');
  const html = /^\s*text\/html\b/i.test(type);
  ctx.set('Content-Security-Policy', html && PAGE_PATH.test(ctx.path) ? nodePageCsp(ctx, publicUrl) : nodeContentCsp(type));
  ctx.set('X-Content-Type-Options', 'nosniff');
}
