/**
 * Requests another web site makes a browser send are refused (docs/auth.md, "Requests from other
 * sites"): an unsafe method (POST, PUT, PATCH, DELETE) with `Sec-Fetch-Site: cross-site` or
 * `same-site`, or with an `Origin` header that is not this server's own, is a 403
 * `{"error": "cross_site_request"}` before any body is read or any route runs. Without it, any page
 * a lab member opens could post a `text/plain` form (which browsers send without asking the server,
 * and which the API parses as JSON, COMPAT.md) and start or stop jobs on the open v1 API.
 *
 * Programs are not affected: curl, CI scripts and the COMPAT.md clients send neither header. Browsers
 * send `Sec-Fetch-Site: same-origin` and their own `Origin` from this server's pages, and `none` when
 * a person typed the address.
 *
 * `same-site` is refused too: a "site" ignores ports and sub-domains, so every other service on the
 * same host or domain (a CI server, another node, a test's report server) is same-site to farmhand,
 * and none of them may act for the person whose browser it is.
 *
 * "Our own origin": the request's own host (`Host`, whatever the scheme, so a TLS-terminating proxy
 * that passes `Host` on works), or the configured `public_url`. An `Origin: null` (a sandboxed frame,
 * a page opened from a file, a redirect across sites) is never our own.
 *
 * Requests of the node's own portal link (`viaPortal`: the portal checked the person's request
 * already, and the link passes the browser's headers on) are not checked again, so this middleware
 * goes after `authenticate`.
 */
import type { Context, Middleware, Next } from 'koa';
import { viaPortal } from './auth.js';
import { sendError } from './errors.js';

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export function refuseCrossSiteRequests(o: { publicUrl?: string } = {}): Middleware {
  const configured = originOf(o.publicUrl);
  return async function refuseCrossSite(ctx: Context, next: Next): Promise<void> {
    if (UNSAFE.has(ctx.method) && !viaPortal(ctx)) {
      const why = crossSiteReason(ctx, configured);
      if (why) {
        sendError(
          ctx,
          403,
          'cross_site_request',
          `${why}: farmhand refuses ${ctx.method} requests that another web site makes a browser send. Use farmhand's own pages, or call the API from a program (which sends no Origin header) with 'Authorization: token <token>'`,
        );
        return;
      }
    }
    await next();
  };
}

function crossSiteReason(ctx: Context, configured: string | undefined): string | undefined {
  const site = ctx.get('Sec-Fetch-Site').trim().toLowerCase();
  if (site === 'cross-site' || site === 'same-site') return `the browser says this request comes from another site (Sec-Fetch-Site: ${site})`;
  const origin = ctx.get('Origin').trim();
  if (!origin) return undefined;
  const own = originOf(origin);
  if (own && (own === configured || hostOf(own) === ctx.host.toLowerCase())) return undefined;
  return `the request comes from ${JSON.stringify(origin.slice(0, 100))}, not from this server`;
}

/** `scheme://host[:port]`, lower case, for a URL; undefined for anything else (`null` included). */
function originOf(url: string | undefined): string | undefined {
  if (!url) return undefined;
  try {
    const u = new URL(url);
    return u.protocol === 'http:' || u.protocol === 'https:' ? u.origin.toLowerCase() : undefined;
  } catch {
    return undefined;
  }
}

/** The `host[:port]` of an origin as a Host header would carry it (the scheme's default port left out, as URL does). */
const hostOf = (origin: string): string => new URL(origin).host;
