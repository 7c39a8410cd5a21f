/**
 * The web portal's routes (docs/portal.md): every page, and the static client
 * scripts and style sheet under /static/. Each page lives in its own module;
 * this file only puts them together.
 */
import Router from '@koa/router';
import type { Services } from '../http/context.js';
import { staticRouter } from './static.js';
import { jobRouter } from './pages/job.js';
import { resultsRouter } from './pages/results.js';

export function portalRouters(s: Services): Router[] {
  return [staticRouter(), ...pageRouters(s)];
}

function pageRouters(s: Services): Router[] {
  return [
    resultsRouter(s),
    jobRouter(s),
  ];
}
