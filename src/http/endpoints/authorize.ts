/**
 * Authorisation from the table of endpoints (table.ts). `bindEndpoints(app)` runs once, when the app is
 * built: for every route mounted on the app's routers it looks the route up in the table and puts a check in
 * front of the route's own handlers. A request therefore pays for no lookup at all: the check of the route
 * it reached is already bound to its entry, and costs a property read and a comparison (bench/auth-bench.ts).
 *
 * The check runs where the route's handlers run: after authentication (src/http/auth.ts, which sets
 * `AuthUser.role`), the rate limit and the token rule (`guardApi`), and for exactly the route the router
 * chose (never a guess by matching the path a second time).
 *
 * A mounted route missing from the table fails closed: it needs `admin` (and the test of the table fails).
 */
import type Router from '@koa/router';
import type Koa from 'koa';
import type { Context, Middleware, Next } from 'koa';
import { FarmError } from '../../core/errors.js';
import { permits, type Role } from '../../core/roles.js';
import type { AuthUser } from '../../core/auth.js';
import { endpointOf, type Endpoint } from './table.js';
import { validator, type Side } from './validate.js';

/** A route as mounted: its methods (HEAD folded into GET) and the router's pattern. */
export interface MountedRoute {
  method: string;
  path: string;
  /** Whether bindEndpoints has given the route its check (a router mounted after it was called has none). */
  checked?: boolean;
}

interface Layer {
  methods: string[];
  path: string | RegExp;
  stack: Middleware[];
}

/** Layers already given their check (a router mounted twice is checked once). */
const guarded = new WeakSet<Layer>();

/** The routers mounted on a Koa app (`app.use(router.routes())` keeps the router on the middleware). */
function routersOf(app: Koa): Router[] {
  return (app.middleware as (Middleware & { router?: Router })[]).flatMap((m) => (m.router ? [m.router] : []));
}

const layersOf = (app: Koa): Layer[] => routersOf(app).flatMap((r) => r.stack as unknown as Layer[]);

/** The methods a layer answers, HEAD left out where GET is there (a GET route serves HEAD too). */
const methodsOf = (l: Layer): string[] => l.methods.filter((m) => !(m === 'HEAD' && l.methods.includes('GET')));

/** Every route mounted on the app, one per method, in mount order (routes mounted twice appear twice). */
export function mountedRoutes(app: Koa): MountedRoute[] {
  return layersOf(app).flatMap((l) => methodsOf(l).map((method) => ({ method, path: String(l.path), checked: guarded.has(l) })));
}

/** Fail closed: a route the table does not know needs an administrator. */
const UNLISTED = (method: string, path: string): Endpoint => ({ method: 'GET', path, role: 'admin', action: `call ${method} ${path} (a route missing from the table of endpoints)`, served: 'both' });

/** The 403 for a caller whose role is below the entry's. */
export function forbidden(role: Role, e: Endpoint): FarmError {
  // details: what the web pages' 403 page says (src/web/pages/forbidden.tsx); the JSON answer carries only the message.
  return new FarmError('forbidden', `${role} may not ${e.action}: this needs the role ${e.role} or above; ask an administrator to change the user's role`, { role, need: e.role, action: e.action });
}

/** The check in front of one route's handlers, bound to its entry. */
function guard(e: Endpoint, need: Role): Middleware {
  return function authorizeRoute(ctx: Context, next: Next): Promise<unknown> {
    const role = (ctx.state as { user?: AuthUser }).user?.role;
    if (role !== undefined && !permits(role, need)) throw forbidden(role, e);
    return next();
  };
}

export interface BindOptions {
  /** Role checks (default true; bench/auth-bench.ts turns them off to measure them). */
  roles?: boolean;
  /**
   * Request validation (validate.ts): `node`, the entries' `check` (the node's app, whose handlers own the
   * requests); `portal`, their `portalCheck` (the portal's own reservation and results routes; what it
   * forwards to a node, the node checks). Default: none.
   */
  validate?: Side;
}

/**
 * Bind the table to the app's routes: in front of each mounted route's handlers, its role check, then its
 * request validation (validate.ts). Call once, after every router is mounted. Returns the routes that had no
 * entry (each then needs `admin`).
 */
export function bindEndpoints(app: Koa, o: BindOptions = {}): MountedRoute[] {
  const unlisted: MountedRoute[] = [];
  for (const layer of layersOf(app)) {
    if (guarded.has(layer)) continue;
    guarded.add(layer);
    const methods = methodsOf(layer);
    // router.use() middleware (no methods) is not a route.
    if (methods.length === 0) continue;
    const path = String(layer.path);
    // One layer may serve several methods (router.all, or GET with HEAD): the strictest entry among them.
    let chosen: { e: Endpoint; need: Role } | undefined;
    const checks: Middleware[] = [];
    for (const method of methods) {
      const found = endpointOf(method, path);
      if (!found) unlisted.push({ method, path });
      const e = found ?? UNLISTED(method, path);
      const check = o.validate ? validator(e, o.validate) : undefined;
      if (check) checks.push(check);
      if (e.role === 'public' || e.role === 'node') continue;
      if (!chosen || !permits(chosen.need, e.role)) chosen = { e, need: e.role };
    }
    if (checks.length > 1) throw new Error(`table of endpoints: ${path} is mounted for ${methods.join(', ')} at once, and more than one of them has a check`);
    layer.stack.unshift(...(chosen && o.roles !== false ? [guard(chosen.e, chosen.need)] : []), ...checks);
  }
  return unlisted;
}

/** The portal's: the role checks, and the checks of the requests it answers itself (`portalCheck`). */
export const authorizeRoutes = (app: Koa): MountedRoute[] => bindEndpoints(app, { validate: 'portal' });
