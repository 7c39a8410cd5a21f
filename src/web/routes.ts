/**
 * The web portal's routes (docs/portal.md): every page, and the static client
 * scripts and style sheet under /static/. Each page lives in its own module;
 * this file only puts them together.
 */
import Router from '@koa/router';
import type { Services } from '../http/context.js';
import { apiReferenceRouter } from './pages/apiReference.js';
import { auditPageRouter } from './pages/audit.js';
import { frontRouter } from './pages/front.js';
import { jobRouter } from './pages/job.js';
import { liveRouter } from './pages/live.js';
import { resultRouter } from './pages/result.js';
import { nodeResults, resultsRouter } from './pages/results.js';
import { signInRouter } from './pages/signIn.js';
import type { SessionStore } from '../http/session.js';
import { staticRouter } from './static.js';

export function portalRouters(s: Services, sessions: SessionStore): Router[] {
  return [staticRouter(), ...pageRouters(s, sessions)];
}

function pageRouters(s: Services, sessions: SessionStore): Router[] {
  const audit = s.audit ? [auditPageRouter(s.audit)] : [];
  return [signInRouter(sessions), frontRouter(s), resultsRouter(nodeResults(s)), resultRouter(s), jobRouter(s), liveRouter(s), apiReferenceRouter(s), ...audit];
}
