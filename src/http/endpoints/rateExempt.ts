/**
 * Which requests the rate limiter leaves alone: those of the table's entries with `rateLimited: false` (long
 * polls, whose held request costs a promise and whose clients call again at once; the load balancer's probes),
 * matched as the routers match them (the same @koa/router layers: case, trailing slash). The node's app and the
 * portal's read it (src/http/app.ts, src/farm/portal/app.ts): an entry marked in the table is exempt on both.
 */
import { Router } from '@koa/router';
import { ENDPOINTS, type Endpoint } from './table.js';

/** A predicate: whether a request (method and path) is one of an exempt entry (HEAD as GET). */
export function rateExempt(entries: readonly Endpoint[] = ENDPOINTS): (method: string, path: string) => boolean {
  const router = new Router();
  for (const x of entries) if (x.rateLimited === false) router.register(x.path, [x.method], () => undefined);
  return (method, path) => router.match(path, method.toUpperCase() === 'HEAD' ? 'GET' : method.toUpperCase()).route;
}
