/**
 * The shape of one entry of the table of endpoints (table.ts), and the helpers the area files (ops.ts, v1.ts,
 * v2.ts, results.ts, web.ts, farm.ts) write their entries with. In a module of its own so that the area files
 * and table.ts, which concatenates them, do not import each other.
 */
import type { z } from 'zod';
import type { AuditAction } from '../../core/audit.js';
import type { Role } from '../../core/roles.js';
import { ErrorBody } from '../openapi/schemas.js';

export type Need = Role | 'public' | 'node';
export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';
/** Where the route is served: by a node, by the portal, or both. */
export type Served = 'node' | 'portal' | 'both';
/**
 * On a farm portal, a request for one node (docs/openapi.md, "Adding an endpoint"):
 * - `id`: where its node id is: a path parameter of the entry's pattern (`node_id`, `node`), or `body.node_id`.
 * - `answer`: how a portal answers it. `forward`: passed to the node (routes.ts, one generic handler: no portal code);
 *   `itself`: from the portal's own copy (the database), never held for a node between owners (the node's status);
 *   `held`: a long poll on a job's end, held for the node that owns the job (answered 202 by a stopping portal).
 * - `reserved`: before forwarding, 403 when another user holds the node's reservation, naming this ("press a key").
 * - `job`: the node's answer is small JSON the portal reads whole: `settle`, a Job held until the node's events
 *   before it are folded (read your writes); `whole`, read whole so the audit trail can record what it answered (the
 *   job a run_tests started, a power cycle's off_secs).
 * The placement (nodePlace.ts: which replica answers) and the portal's router (routes.ts) read it, nothing else.
 */
export interface FarmScope {
  id: string;
  answer: 'forward' | 'itself' | 'held';
  reserved?: string;
  job?: 'settle' | 'whole';
}

/** What the audit trail records a request of the route as; `remote.press` is gathered into manual control sessions (src/http/audit.ts). */
export type AuditRouteAction = AuditAction | 'remote.press';

/** An entry's request checks (validate.ts), run in this order: path parameters, query string, body. */
export interface Checks {
  /** The router's `ctx.params` (strings). */
  params?: z.ZodType;
  /** Koa's `ctx.query`: a string per parameter, an array of strings for one given more than once. */
  query?: z.ZodType;
  body?: z.ZodType;
  /** The error code of a refusal (default `invalid_request`): the one the entry documents for a bad request (`invalid_filter`). */
  code?: 'invalid_request' | 'invalid_filter';
}

/** One content type of an answer: a zod schema for JSON, or the kind of bytes. */
export type Body = z.ZodType | 'text' | 'binary';

export interface Answer {
  description: string;
  /** Content type -> body; none for an answer without a body (204). */
  content?: Record<string, Body>;
}

/** Groups of the API reference page and the document's tags, in their order there. */
export const TAGS = ['meta', 'web', 'v1', 'results', 'v2', 'extras', 'v2 nodes'] as const;
export type Tag = (typeof TAGS)[number];

/** The OpenAPI side of an entry (docs/openapi.md). */
export interface ApiFields {
  summary: string;
  description?: string;
  tag: Tag;
  /** Who must send a token: every v2 call; v1 and the web pages only with `auth.v1_requires_token`; nobody. */
  auth: 'token' | 'v1' | 'none';
  /**
   * Path parameter descriptions, one per parameter of `path` and in its order. The keys are the names the
   * OpenAPI document uses (`{test_pack_revision}` for the router's `*rev`): the k-th key names the k-th
   * parameter of the pattern.
   */
  params?: Record<string, string>;
  query?: z.ZodObject;
  /** Request headers the entry reads, name -> description (documented as header parameters, all optional). */
  headers?: Record<string, string>;
  body?: z.ZodType;
  /** The entry's own answers, its own 4xx included; the common ones (403 token, 429, 500, ...) are added by the builder. */
  responses: Record<number, Answer>;
  /** false: not counted by the rate limiter (long polls). */
  rateLimited?: boolean;
}

export interface Endpoint extends Partial<ApiFields> {
  method: Method;
  /** The router's pattern (path-to-regexp syntax, as mounted). */
  path: string;
  role: Need;
  /** What the caller would do, for the 403 message: "<role> may not <action>". */
  action: string;
  served: Served;
  /**
   * Checked before the route's handlers on a node (validate.ts): the path parameters, then the query string,
   * then the body; a request a schema refuses is a 400 with the message of its first problem. The body's is
   * usually `body` itself; a rule a schema leaves out is the handler's (docs/openapi.md).
   */
  check?: Checks;
  /**
   * The same, on the portal, for the routes it answers itself (reservations, results): the farm's rules where
   * they differ from a node's. Absent: the portal checks nothing of the request (it forwards it to a node,
   * which checks it).
   */
  portalCheck?: Checks;
  /** Mounted only when this part of the configuration is there (`oidc`: the `[oidc]` section); otherwise an unknown path, 404. */
  mountedWhen?: 'oidc';
  /**
   * On a farm portal, a request for one node: where its node id is and how the portal answers it (FarmScope). `e()`
   * gives every person's entry served on the portal whose pattern has `:node_id` or `:node` `{ id, answer: 'forward' }`;
   * an entry says otherwise by setting `farm` itself.
   */
  farm?: FarmScope;
  /** Recorded in the audit trail as this action (docs/auth.md, "Audit trail"); absent: not recorded (reads change nothing). */
  audit?: AuditRouteAction;
}

/** An entry of the OpenAPI document: one with a summary (the routes the document leaves out have none: `*rest` fallbacks, the nodes' upload API). */
export type Documented = Endpoint & ApiFields;
export const isDocumented = (x: Endpoint): x is Documented => x.summary !== undefined;

/** The node id's path parameter of a pattern (`node_id`, else `node`), if it has one. */
const nodeParamOf = (path: string): string | undefined => /:(node_id|node)(?=\/|$)/.exec(path)?.[1];

/**
 * An entry: method, the router's pattern, the role it needs, the action named in a 403, where it is served. Spread
 * it and add the OpenAPI fields, `audit` and `farm`. A person's route the portal serves with the node id in its path
 * is forwarded to that node by default (`farm`).
 */
export function e(method: Method, path: string, role: Need, action: string, served: Served = 'both'): Endpoint {
  const id = served !== 'node' && role !== 'node' && role !== 'public' ? nodeParamOf(path) : undefined;
  return { method, path, role, action, served, ...(id && { farm: { id, answer: 'forward' } }) };
}

// Answers, for the entries' `responses`.
export const json = (schema: z.ZodType, description: string): Answer => ({ description, content: { 'application/json': schema } });
export const none = (description: string): Answer => ({ description });
export const file = (type: string, description: string): Answer => ({ description, content: { [type]: 'binary' } });
export const text = (type: string, description: string): Answer => ({ description, content: { [type]: 'text' } });
export const error = (description: string): Answer => json(ErrorBody, description);
export const page = (description: string): Answer => ({ description, content: { 'text/html': 'text' } });
/** An error answered as a page to a browser (`Accept: text/html`) and as the API's JSON error to anyone else. */
export const pageOrError = (description: string): Answer => ({ description, content: { 'text/html': 'text', 'application/json': ErrorBody } });
export const redirect = (description: string): Answer => ({ description, content: { 'text/html': 'text', 'text/plain': 'text' } });

// Path patterns and parameter descriptions the areas share.
export const RESULT = '/:node/:hex/:num/:stamp';
export const JOB = '/:node/:hex/:num';
export const NODE = '/api/v2/nodes/:node_id';
export const JOB_PARAMS = {
  node: 'The node id: the first segment of the job_uid (job_uid `/<node>/<hex>/<num>` is written without its leading slash).',
  hex: 'The second segment of the job_uid.',
  num: 'The third segment of the job_uid (the job number).',
};
export const RESULT_PARAMS = { ...JOB_PARAMS, stamp: 'The run stamp `<YYYY-MM-DD>_<hh.mm.ss>`: the last segment of the result_id.' };
export const NODE_PARAMS = { node_id: "This node's id; any other is a 404." };
