/**
 * The security headers of every answer, in one place (docs/portal.md, "Security
 * headers", gives the table). Set before the routes run, so an answer a route streams
 * itself (a file, the live stream) carries them too; a page replaces the CSP
 * with its own (src/web/layout.tsx, src/http/openapi/routes.ts), an artifact
 * of an active type with the sandbox of `ARTIFACT_CSP` (src/http/files.ts).
 *
 * - `X-Content-Type-Options: nosniff`: a browser takes each answer as the type
 *   it is sent with, never guesses HTML or script from the bytes.
 * - `Referrer-Policy: same-origin`: a link out of a page (a job's git URL, a
 *   link in a test's report) does not tell another site which result, job or
 *   node a person was looking at; farmhand's own requests keep it. Not
 *   `no-referrer`: under it Chromium sends `Origin: null` with a form's POST,
 *   and the sign-in form (and every check of a request's `Origin`) would take
 *   the person's own sign-in for another site's.
 * - `X-Frame-Options: DENY` beside CSP `frame-ancestors 'none'`: no page of
 *   farmhand is shown inside another site's frame (clickjacking), for
 *   browsers that do not read CSP level 2 too. farmhand frames none of its own.
 * - `Content-Security-Policy: default-src 'none'; frame-ancestors 'none'; sandbox`
 *   for every answer that sets no CSP of its own (JSON, CSV, logs, errors):
 *   if a browser ever renders one as a document, nothing in it loads or runs,
 *   and it has no origin of its own (sandbox), so it reaches no session.
 */
import type { Context, Next } from 'koa';

export const DEFAULT_CSP = "default-src 'none'; frame-ancestors 'none'; sandbox";

/**
 * An artifact of an active type (HTML, SVG, XML ...): readable, inert. No script
 * runs (no `script-src`, no `allow-scripts`), no form is sent (`sandbox`
 * without `allow-forms`, `form-action 'none'`), the document has an opaque
 * origin (no `allow-same-origin`: it cannot read the session's pages or cookies
 * or send the CSRF token), and it loads nothing but images, styles and media
 * of the same site (the report's own pictures and style sheet, inline styles).
 */
export const ARTIFACT_CSP =
  "sandbox; default-src 'none'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; media-src 'self'; font-src 'self' data:; form-action 'none'; base-uri 'none'; frame-ancestors 'none'";

/** Every answer's, before a route replaces the CSP with its own; also the answers before the app starts (src/daemon.ts). */
export const SECURITY_HEADERS: Readonly<Record<string, string>> = {
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'same-origin',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy': DEFAULT_CSP,
};

export async function securityHeaders(ctx: Context, next: Next): Promise<void> {
  ctx.set(SECURITY_HEADERS);
  await next();
}
