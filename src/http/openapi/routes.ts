/**
 * `GET /api/openapi.json` (no token, cacheable) and the reference page
 * `GET /app/api` (under the web pages' rule: a token only with
 * `auth.v1_requires_token`).
 */
import Router from '@koa/router';
import { h } from 'preact';
import { sendPage } from '../../web/layout.js';
import type { Services } from '../context.js';
import { buildDocument, documentJson } from './document.js';
import { apiPage } from './page.js';
import { ENDPOINTS } from './registry.js';

export function openApiRouter(s: Services): Router {
  const r = new Router();
  let page: string | undefined;
  r.get('/api/openapi.json', (ctx) => {
    // The document changes only with the daemon's version: an hour of caching is safe, and ETag-free revalidation is cheap.
    ctx.set('Cache-Control', 'public, max-age=3600');
    ctx.type = 'application/json; charset=utf-8';
    ctx.body = documentJson({ version: s.version });
  });
  r.get('/app/api', (ctx) => {
    page ??= apiPage(buildDocument({ version: s.version }) as Parameters<typeof apiPage>[0], ENDPOINTS);
    // Inside the layout (its header names who is signed in): not cached, as every page.
    sendPage(ctx, h('div', { dangerouslySetInnerHTML: { __html: page } }), { title: 'API reference', section: 'api', scripts: ['api-reference.js'] });
  });
  return r;
}
