/**
 * The Koa application: error handling, trailing-slash folding, JSON bodies,
 * then the v1 routes (v2 mounts beside them).
 */
import Koa from 'koa';
import type { Context, Middleware, Next } from 'koa';
import type { TokenVerifier } from '../core/auth.js';
import { bindEndpoints } from './endpoints/authorize.js';
import { auditRouter, type AuditTrail } from './audit.js';
import { authenticate, FORM_PATHS, guardApi, type DelegateRule } from './auth.js';
import { formBody, jsonBody } from './body.js';
import { refuseCrossSiteRequests } from './crossSite.js';
import { rememberCredential } from './heldCredential.js';
import { rateLimit, type RateLimitSettings } from './rateLimit.js';
import { securityHeaders } from './securityHeaders.js';
import type { Services } from './context.js';
import { errorHandler } from './errors.js';
import { openApiRouter } from './openapi/routes.js';
import { opsRouter, type OpsEndpoints } from './opsRoutes.js';
import { v1Router } from './v1/routes.js';
import { v2Router } from './v2/routes.js';
import { webhookRouter } from './webhooks.js';
import { portalRouters } from '../web/routes.js';
import { forbiddenPages } from '../web/pages/forbidden.js';
import { SessionStore } from './session.js';
import type { OidcSignIn } from './oidc.js';
import { rateExempt } from './endpoints/rateExempt.js';

export interface AppOptions {
  /** Largest JSON body accepted; more is a 413. */
  maxBodyBytes?: number;
  /** Who a v2 token belongs to. */
  tokens: TokenVerifier;
  rateLimit: RateLimitSettings;
  /** v1 is open by default (its clients send no credentials). */
  v1RequiresToken?: boolean;
  /** /healthz, /readyz and /metrics (docs/operations.md); absent: not served. */
  ops?: OpsEndpoints;
  /** Outermost middleware, seeing every request's final status (the HTTP metrics). */
  observe?: Middleware;
  /** Requests of the node's portal link act for the portal's user (auth.ts DelegateRule); absent: no farm. */
  delegate?: DelegateRule;
  /** For bench/auth-bench.ts only: false builds the app without the role checks, to measure what they cost. */
  authorize?: boolean;
  /** Records the audit trail of state-changing requests (src/http/audit.ts); absent: nothing recorded. */
  audit?: AuditTrail;
  /** Sign-in with OpenID Connect (`[oidc]`, docs/auth.md); absent: tokens only. */
  oidc?: OidcSignIn;
}

/** Order: (observe) -> security headers -> errors -> paths -> who is calling -> rate limit -> auth required? -> body -> routes (outline's middleware order). */
export function createApp(s: Services, opts: AppOptions): Koa {
  const app = new Koa();
  app.proxy = false;
  // Koa's own error event would print a second time what errorHandler already logged.
  app.silent = true;
  if (opts.observe) app.use(opts.observe);
  app.use(securityHeaders);
  app.use(errorHandler(s.logger));
  app.use(foldTrailingSlash);
  // People's sign-in sessions (src/http/session.ts): in memory, so a restart ends them.
  const sessions = new SessionStore(opts.tokens);
  app.use(authenticate(opts.tokens, sessions, opts.delegate));
  app.use(refuseCrossSiteRequests({ publicUrl: s.publicUrl }));
  app.use(rememberCredential(opts.tokens, sessions));
  // The table's `rateLimited: false` entries are exempt (long polls, probes: src/http/endpoints/rateExempt.ts).
  const limit = rateLimit(opts.rateLimit);
  const exempt = rateExempt();
  app.use((ctx, next): Promise<unknown> => (exempt(ctx.method, ctx.path) ? next() : limit(ctx, next)));
  if (opts.audit) app.use(opts.audit.middleware);
  app.use(guardApi({ v1RequiresToken: opts.v1RequiresToken ?? false }));
  const json = jsonBody(opts.maxBodyBytes ?? 1024 * 1024);
  // The sign-in and sign-out forms post urlencoded fields; a token and a CSRF token fit in 16 KiB.
  const form = formBody(Math.min(opts.maxBodyBytes ?? 1024 * 1024, 16 * 1024));
  app.use((ctx, next) => (FORM_PATHS.has(ctx.path.toLowerCase()) ? form(ctx, next) : json(ctx, next)));
  // A role check's 403 to a person's browser is a page (src/web/pages/forbidden.tsx); to programs, JSON.
  app.use(forbiddenPages({ admins: () => opts.tokens.admins?.() ?? [] }));
  const eventRouters = s.events ? [s.events.stream.router()] : [];
  if (s.audit) eventRouters.push(auditRouter(s.audit));
  for (const router of [v1Router(s), v2Router(s), ...eventRouters, webhookRouter(s), ...portalRouters(s, sessions, opts.oidc), openApiRouter(s), ...(opts.ops ? [opsRouter(opts.ops)] : [])]) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  // Every route's role check and request validation, from the table of endpoints (src/http/endpoints/).
  bindEndpoints(app, { roles: opts.authorize !== false, validate: 'node' });
  return app;
}

/** COMPAT.md: `/result/<id>/` and `/result/<id>` are the same resource; so are `artifacts/` and `artifacts`. */
export async function foldTrailingSlash(ctx: Context, next: Next): Promise<void> {
  if (ctx.path.length > 1 && ctx.path.endsWith('/')) ctx.path = ctx.path.replace(/\/+$/, '') || '/';
  await next();
}
