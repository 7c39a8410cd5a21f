/**
 * The one mounter: a route is mounted by its key in the table of endpoints, `METHOD path` with the router's
 * own pattern (`mount(r, 'POST /api/v2/run_tests', handler)`). A key the table does not have throws when the
 * router is built, i.e. when the daemon or the portal starts: a route cannot be served without its entry
 * (its role, its validation, its OpenAPI description, its audit action). Role checks and validation are then
 * bound to the mounted routes by `bindEndpoints` (authorize.ts), once every router is mounted.
 */
import type Router from '@koa/router';
import type { RouterMiddleware } from '@koa/router';
import { endpointOf, type Endpoint } from './table.js';

const VERBS = { GET: 'get', POST: 'post', PUT: 'put', DELETE: 'delete', PATCH: 'patch' } as const;

/** The entry of a key (`GET /api/v2/user`); throws for a key with no entry. */
export function entryOfKey(key: string): Endpoint {
  const space = key.indexOf(' ');
  const method = key.slice(0, space);
  const path = key.slice(space + 1);
  const e = space > 0 ? endpointOf(method, path) : undefined;
  if (!e || e.method === 'PATCH' || !(method in VERBS)) {
    throw new Error(`no entry ${JSON.stringify(key)} in the table of endpoints (src/http/endpoints/): add one before mounting the route`);
  }
  return e;
}

type Handler = RouterMiddleware;

/** Mount `handlers` on `router` for the entry `key` (`METHOD path`), or for each of several keys of one method. */
export function mount(router: Router, key: string | readonly string[], ...handlers: Handler[]): void {
  const entries = (typeof key === 'string' ? [key] : key).map(entryOfKey);
  const method = entries[0]!.method as Exclude<Endpoint['method'], 'PATCH'>;
  if (entries.some((e) => e.method !== method)) throw new Error(`mount: ${JSON.stringify(key)} mixes methods`);
  // A key is the whole path; a router with a prefix adds it itself.
  const prefix = router.opts.prefix ?? '';
  const paths = entries.map((e) => {
    if (!e.path.startsWith(prefix)) throw new Error(`mount: ${e.method} ${e.path} is outside the router's prefix ${prefix}`);
    return e.path.slice(prefix.length);
  });
  // The router's own verbs, so that a GET serves HEAD and the router's options apply as to any route.
  router[VERBS[method]](paths, ...handlers);
}
