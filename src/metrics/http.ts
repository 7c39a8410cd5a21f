/**
 * Koa middleware counting every answered request by method, matched route
 * pattern and status. The pattern comes from @koa/router (`/api/v1/jobs/:node/:hex/:num`),
 * never the raw path, so ids never become labels; a request no route matched
 * (a 404, or one refused before routing: 429, 403) is counted as route `unmatched`.
 */
import type { Context, Middleware, Next } from 'koa';
import type { FarmMetrics } from './metrics.js';

/** Methods outside this set are counted as `OTHER` (a client may send any token as a method). */
const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS']);

export function httpMetrics(metrics: FarmMetrics): Middleware {
  return async function countRequest(ctx: Context, next: Next): Promise<void> {
    const start = performance.now();
    try {
      await next();
    } finally {
      // The outermost middleware: errorHandler below it has already turned a throw into a status.
      const route = (ctx as Context & { _matchedRoute?: string | RegExp })._matchedRoute;
      const method = METHODS.has(ctx.method) ? ctx.method : 'OTHER';
      metrics.recordHttp(method, typeof route === 'string' ? route : 'unmatched', ctx.status, (performance.now() - start) / 1000);
    }
  };
}
