/**
 * THE table of endpoints: every route the node and the portal serve, with who may call it.
 * Authorisation reads it (src/http/endpoints/authorize.ts); a test fails when a mounted route has no
 * entry here (test/http/endpoint-roles.test.ts), and docs/auth.md's table is checked against it.
 *
 * An entry is keyed by its method and the router's own path pattern (as written in `router.get(...)`,
 * prefix included), so one entry covers a route on the node and the same route on the portal.
 *
 * `role` is what the caller needs (src/core/roles.ts: read < manual < run < admin):
 * - a Role: a signed-in caller whose role is below it gets 403 `{"error": "forbidden", "message":
 *   "<role> may not <action>: ..."}`. Callers without a role (a node with no roles configured, a portal
 *   user acting through the node's portal link) and callers without a credential (where
 *   `auth.v1_requires_token` lets them in at all) are not checked by role: docs/auth.md, "Roles".
 * - 'public': open by design (probes, static files, sign-in, the push webhook, the OpenAPI document).
 * - 'node': the nodes' own API on the portal, authenticated by node credentials, never by a person.
 *
 * The shape is meant to grow into issue 21 item 1 (request validation from this table, one mounter, the
 * OpenAPI registry made from it): the fields that would come next are a zod schema per entry and the
 * handler; nothing here needs to change for them.
 */
import type { Role } from '../../core/roles.js';

export type Need = Role | 'public' | 'node';
export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
/** Where the route is served: by a node, by the portal, or both. */
export type Served = 'node' | 'portal' | 'both';

export interface Endpoint {
  method: Method;
  /** The router's pattern (path-to-regexp syntax, as mounted). */
  path: string;
  role: Need;
  /** What the caller would do, for the 403 message: "<role> may not <action>". */
  action: string;
  served: Served;
}

const e = (method: Method, path: string, role: Need, action: string, served: Served = 'both'): Endpoint => ({ method, path, role, action, served });

const RESULT = '/:node/:hex/:num/:stamp';
const JOB = '/:node/:hex/:num';
const NODE = '/api/v2/nodes/:node_id';

export const ENDPOINTS: readonly Endpoint[] = [
  // Operators' probes and metrics (docs/operations.md).
  e('GET', '/healthz', 'public', 'check health'),
  e('GET', '/readyz', 'public', 'check readiness'),
  e('GET', '/metrics', 'read', 'read the metrics'),
  e('GET', '/api/openapi.json', 'public', 'read the API document', 'node'),
  // Static files and sign-in: a person must reach them before signing in.
  e('GET', '/favicon.ico', 'public', 'read the icon'),
  e('GET', '/static/:file', 'public', 'read static files'),
  e('GET', '/app/sign-in', 'public', 'sign in'),
  e('POST', '/app/sign-in', 'public', 'sign in'),
  e('POST', '/app/sign-out', 'public', 'sign out'),
  // OIDC sign-in (branch oidc): open, as the sign-in form is.
  e('GET', '/app/sign-in/oidc', 'public', 'sign in'),
  e('GET', '/app/oidc/callback', 'public', 'sign in'),
  // COMPAT: a git host's push webhook carries no token.
  e('POST', '/github/post-receive', 'public', 'announce a push'),

  // v1 (single appliance).
  e('GET', '/api/v1/device/screenshot.png', 'read', 'read screenshots', 'node'),
  e('GET', '/api/v1/device/thumbnail.jpg', 'read', 'read screenshots', 'node'),
  e('GET', '/api/v1/test_pack/*rev/test_case_names', 'run', 'read the test pack', 'node'),
  e('POST', '/api/v1/run_tests', 'run', 'run tests', 'node'),
  e('GET', `/api/v1/jobs${JOB}`, 'read', 'read jobs'),
  e('POST', `/api/v1/jobs${JOB}/stop`, 'run', 'stop tests', 'node'),
  e('GET', `/api/v1/jobs${JOB}/results`, 'read', 'read results', 'node'),
  e('GET', '/api/v1/results', 'read', 'read results', 'node'),
  e('GET', `/api/v1/result${RESULT}`, 'read', 'read results'),
  e('GET', `/api/v1/result${RESULT}/farmhand.log`, 'read', 'read logs'),
  e('GET', `/api/v1/result${RESULT}/stbt.log`, 'read', 'read logs'),
  e('GET', `/api/v1/result${RESULT}/screenshot.png`, 'read', 'read screenshots'),
  e('GET', `/api/v1/result${RESULT}/artifacts`, 'read', 'read results', 'node'),
  e('GET', `/api/v1/result${RESULT}/artifacts/*path`, 'read', 'read results'),
  e('GET', `/api/v1/result${RESULT}/*rest`, 'read', 'read results', 'portal'),

  // v2: the caller, nodes and their pictures.
  e('GET', '/api/v2/user', 'read', 'read who they are'),
  e('GET', '/api/v2/nodes', 'read', 'read node status'),
  e('GET', NODE, 'read', 'read node status'),
  e('GET', `${NODE}/screenshot.png`, 'read', 'read screenshots'),
  e('GET', `${NODE}/thumbnail.jpg`, 'read', 'read screenshots'),
  e('POST', `${NODE}/press`, 'manual', 'press keys on the remote control'),
  // v2: tests and jobs.
  e('GET', '/api/v2/test_pack/*rev/test_case_names', 'run', 'read the test pack'),
  e('POST', '/api/v2/run_tests', 'run', 'run tests'),
  e('GET', `/api/v2/jobs${JOB}`, 'read', 'read jobs'),
  e('GET', `${NODE}/job`, 'read', 'read jobs'),
  e('GET', `/api/v2/jobs${JOB}/log`, 'read', 'read logs'),
  e('GET', `/api/v2/jobs${JOB}/await_completion`, 'read', 'read jobs'),
  e('GET', `${NODE}/job/await_completion`, 'read', 'read jobs'),
  e('PUT', `/api/v2/jobs${JOB}/stop`, 'run', 'stop tests'),
  e('POST', `/api/v2/jobs${JOB}/stop`, 'run', 'stop tests'),
  e('POST', `${NODE}/job/stop`, 'run', 'stop tests'),
  // v2: results.
  e('GET', '/api/v2/results', 'read', 'read results'),
  e('GET', '/api/v2/results.csv', 'read', 'read results'),
  e('GET', '/api/v2/results.xml', 'read', 'read results'),
  e('GET', `/api/v2/results${RESULT}`, 'read', 'read results'),
  e('GET', `/api/v2/results${RESULT}/farmhand.log`, 'read', 'read logs'),
  e('GET', `/api/v2/results${RESULT}/stbt.log`, 'read', 'read logs'),
  e('GET', `/api/v2/results${RESULT}/screenshot.png`, 'read', 'read screenshots'),
  e('GET', `/api/v2/results${RESULT}/artifacts`, 'read', 'read results'),
  e('GET', `/api/v2/results${RESULT}/artifacts/*path`, 'read', 'read results'),
  e('GET', `/api/v2/results${RESULT}/*rest`, 'read', 'read results', 'portal'),
  // v2: reservations. The spec: extend and end are the owner's, interrupt is open to any authenticated
  // user. Reserving and extending need `run`; ending one's own and interrupting stay open to every
  // signed-in user (an owner whose role was lowered can still give the node back).
  e('POST', '/api/v2/reservations', 'run', 'reserve nodes'),
  e('POST', '/api/v2/reservations/:id/extend', 'run', 'extend reservations'),
  e('DELETE', '/api/v2/reservations/:id', 'read', 'end reservations'),
  e('POST', '/api/v2/reservations/:id/interrupt', 'read', 'interrupt reservations'),
  // The event stream (docs/events.md), for programs and for the pages.
  e('GET', '/api/v2/events', 'read', 'read events'),
  e('GET', '/app/events', 'read', 'read events'),
  // The audit trail (branch audit).
  e('GET', '/api/v2/audit', 'admin', 'read the audit trail'),
  // Maintenance of a node (docs/api-notes.md): an administrator takes it out of service and back.
  e('POST', `${NODE}/maintenance`, 'admin', 'put nodes in maintenance'),

  // Web pages.
  e('GET', '/', 'read', 'read node status'),
  e('GET', '/app/results', 'read', 'read results'),
  e('GET', '/app/results/row', 'read', 'read results'),
  e('GET', `/app/results${RESULT}`, 'read', 'read results'),
  e('GET', `/app/results${RESULT}/log.vtt`, 'read', 'read logs'),
  e('GET', `/app/results${RESULT}/*rest`, 'read', 'read results', 'portal'),
  e('GET', `/app/jobs${JOB}`, 'read', 'read jobs'),
  e('GET', '/app/api', 'read', 'read the API reference', 'node'),
  e('GET', '/app/session', 'read', 'read their session', 'portal'),
  e('GET', '/app/audit', 'admin', 'read the audit trail'),
  // The live view and web remote (manual control).
  e('GET', '/app/live', 'manual', 'use the live view'),
  e('GET', '/app/live/stream.mjpeg', 'manual', 'use the live view', 'node'),
  e('GET', '/app/live/frame.png', 'manual', 'use the live view', 'node'),
  e('GET', '/app/nodes/:node_id/live', 'manual', 'use the live view'),
  e('GET', '/app/nodes/:node_id/live/stream.mjpeg', 'manual', 'use the live view'),
  e('GET', '/app/nodes/:node_id/live/frame.png', 'manual', 'use the live view'),

  // The nodes' upload API on the portal (node credentials; src/farm/uploadRoutes.ts).
  e('GET', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('PUT', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('POST', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('DELETE', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('PUT', `/farm/v1/results${RESULT}/record`, 'node', 'upload results', 'portal'),
  e('POST', `/farm/v1/results${RESULT}/complete`, 'node', 'upload results', 'portal'),
];

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
