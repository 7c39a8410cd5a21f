/**
 * The API reference page, `GET /app/api` (under the web pages' rule: a token only with
 * `auth.v1_requires_token`): the OpenAPI document (src/http/openapi/) rendered as HTML inside the pages'
 * layout. It lives with the pages so that the HTTP layer imports nothing of the web layer.
 */
import Router from '@koa/router';
import { h } from 'preact';
import type { Services } from '../../http/context.js';
import { buildDocument } from '../../http/openapi/document.js';
import { OPERATIONS } from '../../http/openapi/endpoint.js';
import { apiPage } from '../../http/openapi/page.js';
import { sendPage } from '../layout.js';
import { mount } from '../../http/endpoints/mount.js';

export function apiReferenceRouter(s: Services): Router {
  const r = new Router();
  let page: string | undefined;
  mount(r, 'GET /app/api', (ctx) => {
    page ??= apiPage(buildDocument({ version: s.version }) as Parameters<typeof apiPage>[0], OPERATIONS);
    // Inside the layout (its header names who is signed in): not cached, as every page.
    sendPage(ctx, h('div', { dangerouslySetInnerHTML: { __html: page } }), { title: 'API reference', section: 'api', scripts: ['api-reference.js'] });
  });
  return r;
}
