/**
 * The portal's Koa app: the node's middleware, in the node's order (errors ->
 * who is calling -> rate limit -> token required on v2 -> JSON body -> routes),
 * with the portal's routes behind it. No web pages and no session cookies yet:
 * programs call the portal with v2 tokens.
 */
import Koa from 'koa';
import type Router from '@koa/router';
import type { TokenVerifier } from '../../core/auth.js';
import type { Logger } from '../../core/ports.js';
import { foldTrailingSlash } from '../../http/app.js';
import { authenticate, guardApi } from '../../http/auth.js';
import { jsonBody } from '../../http/body.js';
import { errorHandler } from '../../http/errors.js';
import { rateLimit, type RateLimitSettings } from '../../http/rateLimit.js';
import { databaseUnavailable, isDatabaseUnavailable } from '../db/pool.js';

export interface PortalAppOptions {
  logger: Logger;
  tokens: TokenVerifier;
  rateLimit: RateLimitSettings;
  maxBodyBytes: number;
  /** Mounted in order after the middleware (the portal's routes first; hC, hD, hE add theirs). */
  routers: Router[];
  /**
   * Mounted before the API's middleware: routes that authenticate their callers themselves and read
   * their own bodies (the nodes' upload API, src/farm/uploadRoutes.ts: raw chunks, node credentials,
   * not held to a person's rate limit).
   */
  early?: Router[];
}

export function createPortalApp(o: PortalAppOptions): Koa {
  const app = new Koa();
  app.proxy = false;
  app.silent = true;
  app.use(errorHandler(o.logger));
  // PostgreSQL away (restarting, down): a 503 saying so, never a 500 (docs/farm.md, "Faults").
  app.use(async (_ctx, next) => {
    try {
      await next();
    } catch (e) {
      throw isDatabaseUnavailable(e) ? databaseUnavailable() : e;
    }
  });
  app.use(foldTrailingSlash);
  for (const router of o.early ?? []) app.use(router.routes());
  app.use(authenticate(o.tokens));
  // Long polls are exempt, as on the node: a held request costs a promise, and clients retry them at once.
  const limit = rateLimit(o.rateLimit);
  app.use((ctx, next): Promise<unknown> => (ctx.path.toLowerCase().endsWith('/await_completion') ? next() : limit(ctx, next)));
  app.use(guardApi({ v1RequiresToken: false }));
  app.use(jsonBody(o.maxBodyBytes));
  app.use(async (ctx, next) => {
    if (ctx.path === '/healthz') {
      ctx.body = { status: 'ok' };
      return;
    }
    await next();
  });
  for (const router of o.routers) {
    app.use(router.routes());
    app.use(router.allowedMethods());
  }
  return app;
}
