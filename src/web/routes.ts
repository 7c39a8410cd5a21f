/**
 * The web portal's routes (docs/portal.md): every page, and the static client
 * scripts and style sheet under /static/. Each page lives in its own module;
 * this file only puts them together.
 */
import Router from '@koa/router';
import type { Services } from '../http/context.js';
import { liveRouter } from './pages/live.js';
import { staticRouter } from './static.js';

export function portalRouters(s: Services): Router[] {
  return [staticRouter(), ...pageRouters(s)];
}

function pageRouters(s: Services): Router[] {
  return [liveRouter(s)];
}
