/**
 * `GET /api/openapi.json` (no token, cacheable). The reference page made from the same document, `GET
 * /app/api`, is one of the portal's pages (src/web/pages/apiReference.ts).
 */
import Router from '@koa/router';
import type { Services } from '../context.js';
import { documentJson } from './document.js';
import { mount } from '../endpoints/mount.js';

export function openApiRouter(s: Services): Router {
  const r = new Router();
  mount(r, 'GET /api/openapi.json', (ctx) => {
    // The document changes only with the daemon's version: an hour of caching is safe, and ETag-free revalidation is cheap.
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = documentJson({ version: s.version });
  });
  return r;
}
