/**
 * THE table of endpoints: every route the node and the portal serve, one entry each, with who may call it,
 * how the OpenAPI document describes it, and what the audit trail records it as. Everything reads it:
 * authorisation (authorize.ts), the OpenAPI document and the API reference page (src/http/openapi/), the
 * suite's contract check (test/helpers/contract.ts), the audit trail (src/http/audit.ts) and docs/auth.md's
 * table (doc.ts). Adding an endpoint is adding its entry to the file of its area (docs/openapi.md).
 *
 * An entry (entry.ts) is keyed by its method and the router's own path pattern (as written in
 * `router.get(...)`, prefix included), so one entry covers a route on the node and the same route on the
 * portal.
 *
 * `role` is what the caller needs (src/core/roles.ts: read < manual < run < admin):
 * - a Role: a signed-in caller whose role is below it gets 403 `{"error": "forbidden", "message":
 *   "<role> may not <action>: ..."}`. Callers without a role (a node with no roles configured, a portal
 *   user acting through the node's portal link) and callers without a credential (where
 *   `auth.v1_requires_token` lets them in at all) are not checked by role: docs/auth.md, "Roles".
 * - 'public': open by design (probes, static files, sign-in, the push webhook, the OpenAPI document).
 * - 'node': the nodes' own API on the portal, authenticated by node credentials, never by a person.
 *
 * The entries live in one file per area: ops.ts, web.ts, v1.ts, v2.ts (results.ts: one result's files),
 * farm.ts. A small entry is `e(method, path, role, action, served)`; one in the OpenAPI document spreads it
 * and adds `summary`, `tag`, `auth`, `params`, `query`, `body`, `responses` (and `audit`).
 */
import type { Endpoint } from './entry.js';
import { FARM } from './farm.js';
import { OPS } from './ops.js';
import { V1 } from './v1.js';
import { V2 } from './v2.js';
import { FRONT_DOOR, PAGES } from './web.js';

export { e, isDocumented, TAGS } from './entry.js';
export type { Answer, ApiFields, AuditRouteAction, Body, Documented, Endpoint, FarmScope, Method, Need, Served, Tag } from './entry.js';

/** Entries of no area yet (`e(...)` from entry.ts; better, in their area's file). */
const OTHER: Endpoint[] = [];

export const ENDPOINTS: readonly Endpoint[] = [...OPS, ...FRONT_DOOR, ...V1, ...V2, ...PAGES, ...FARM, ...OTHER];

/** `GET /api/v2/user` -> its entry; the key of the table's lookup. */
export const endpointKey = (method: string, path: string): string => `${method.toUpperCase()} ${path}`;

const BY_KEY = new Map(ENDPOINTS.map((x) => [endpointKey(x.method, x.path), x]));

/** The entry of a route (method and the router's pattern); HEAD is GET's. */
export function endpointOf(method: string, path: string): Endpoint | undefined {
  const m = method.toUpperCase();
  return BY_KEY.get(endpointKey(m === 'HEAD' ? 'GET' : m, path));
}

/** A path with every parameter (`:x`, `*x`, `{x}`) made `{}`: the same route in the router's and in OpenAPI's syntax. */
export const pathShape = (path: string): string => path.replace(/:\w+|\*\w+|\{\w+\}/g, '{}');

const BY_SHAPE = new Map(ENDPOINTS.map((x) => [endpointKey(x.method, pathShape(x.path)), x]));

/** The entry of an OpenAPI operation (`get`, `/api/v2/jobs/{node}/{hex}/{num}`), for its `x-farmhand-role`. */
export const endpointOfOperation = (method: string, openApiPath: string): Endpoint | undefined => BY_SHAPE.get(endpointKey(method, pathShape(openApiPath)));
