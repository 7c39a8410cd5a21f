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
import type { WebSessionStore } from '../http/session.js';
import type { OidcSignIn } from '../http/oidc.js';
import { oidcSignInRouter } from './pages/oidcSignIn.js';
import { staticRouter } from './static.js';

/** `oidc`: sign-in with OpenID Connect, when configured (docs/auth.md). */
export function portalRouters(s: Services, sessions: WebSessionStore, oidc?: OidcSignIn): Router[] {
  return [staticRouter(), ...(oidc ? [oidcSignInRouter(sessions, oidc)] : []), ...pageRouters(s, sessions, oidc)];
}

function pageRouters(s: Services, sessions: WebSessionStore, oidc?: OidcSignIn): Router[] {
  const audit = s.audit ? [auditPageRouter(s.audit)] : [];
  return [signInRouter(sessions, { ...(oidc && { oidc: oidc.name }) }), frontRouter(s), resultsRouter(nodeResults(s)), resultRouter(s), jobRouter(s), liveRouter(s), apiReferenceRouter(s), ...audit];
}
