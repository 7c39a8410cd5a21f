/**
 * The OpenAPI 3.1 document, built from the table of endpoints (src/http/endpoints/, as operations:
 * endpoint.ts) with zod's own JSON
 * Schema output (draft 2020-12, the dialect of OpenAPI 3.1). Schemas with an
 * `id` go to `components.schemas` and are referred to by `$ref`. Built once
 * per process: the table does not change while the daemon runs.
 */
import { z } from 'zod';
import { MULTI_SEGMENT, OPERATIONS, type Answer, type Body, type Operation } from './endpoint.js';
import { ErrorBody } from './schemas.js';

type Json = Record<string, unknown>;

const REF_PREFIX = '#/components/schemas/';

/** A zod schema as JSON Schema; named sub-schemas become `$ref`s into components, collected in `components`. */
function toSchema(schema: z.ZodType, io: 'input' | 'output', components: Record<string, Json>): Json {
  const out = z.toJSONSchema(schema, { target: 'draft-2020-12', io, unrepresentable: 'any' }) as Json;
  const defs = (out.$defs ?? {}) as Record<string, Json>;
  delete out.$defs;
  delete out.$schema;
  for (const [id, def] of Object.entries(defs)) components[id] = rewriteRefs(def) as Json;
  // A named schema at the top comes out as `{$ref}` to its own definition.
  return rewriteRefs(out) as Json;
}

function rewriteRefs(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(rewriteRefs);
  if (v === null || typeof v !== 'object') return v;
  const o: Json = {};
  for (const [k, x] of Object.entries(v)) {
    o[k] = k === '$ref' && typeof x === 'string' ? x.replace(/^#\/\$defs\//, REF_PREFIX) : rewriteRefs(x);
  }
  return o;
}

function content(body: Body, components: Record<string, Json>): Json {
  if (body === 'binary') return { schema: { type: 'string', contentMediaType: 'application/octet-stream' } };
  if (body === 'text') return { schema: { type: 'string' } };
  return { schema: toSchema(body, 'output', components) };
}

const ERROR = (description: string): Answer => ({ description, content: { 'application/json': ErrorBody } });

/** The answers every endpoint of a kind can give, besides its own. */
export function commonAnswers(e: Operation): Record<number, Answer> {
  const out: Record<number, Answer> = {};
  if (['post', 'put', 'delete'].includes(e.method)) {
    out[400] = ERROR('The body is not valid JSON (or not valid for its Content-Encoding), or a field is invalid.');
    out[413] = ERROR('The body is too large.');
    out[415] = ERROR('Unsupported Content-Encoding.');
  }
  if (e.query) out[400] ??= ERROR('A query parameter is invalid.');
  if (e.params) out[400] ??= ERROR('A path parameter is malformed.');
  if (e.auth === 'token') out[403] = ERROR('Missing or invalid access token.');
  if (e.auth === 'v1') out[403] = ERROR('Missing or invalid access token (only with `auth.v1_requires_token`).');
  if (['post', 'put', 'patch', 'delete'].includes(e.method)) {
    const own = 'A browser sent it for another web site (`cross_site_request`: Sec-Fetch-Site cross-site or same-site, or a foreign Origin; src/http/crossSite.ts).';
    out[403] = ERROR(out[403] ? `${out[403].description} Or: ${own}` : own);
  }
  // A portal answers a request for one node 503 with Retry-After while that node is not connected, or is between
  // replicas past replicas.hold_secs, or while the portal stops (src/farm/portal/nodePlace.ts, drain.ts).
  if (e.farm && e.farm.answer !== 'itself') {
    out[503] = ERROR('Through a farm portal: the node is not connected, or is between portal replicas (`device_unavailable`); retry after Retry-After.');
  }
  if (e.rateLimited !== false) out[429] = ERROR('Rate limited; retry after the Retry-After seconds.');
  out[431] = ERROR('The request line or headers are too large (`headers_too_large`, answered before routing).');
  out[500] = ERROR('Internal error; the daemon log has the details.');
  return out;
}

/** Every answer of an endpoint: its own first, the common ones where it has none of that status. */
export const answersOf = (e: Operation): Record<number, Answer> => ({ ...commonAnswers(e), ...e.responses });

function parameters(e: Operation, components: Record<string, Json>): Json[] {
  const out: Json[] = [];
  for (const [name, description] of Object.entries(e.params ?? {})) {
    const multi = MULTI_SEGMENT.has(name);
    out.push({
      name,
      in: 'path',
      required: true,
      description: multi ? `${description} (Spans the rest of the path, slashes included.)` : description,
      schema: { type: 'string' },
      ...(multi ? { 'x-multi-segment': true } : {}),
    });
  }
  const query = e.query ? (toSchema(e.query, 'input', components) as { properties?: Record<string, Json>; required?: string[] }) : {};
  for (const [name, schema] of Object.entries(query.properties ?? {})) {
    const { description, ...rest } = schema;
    out.push({ name, in: 'query', required: query.required?.includes(name) ?? false, ...(description ? { description } : {}), schema: rest });
  }
  for (const [name, description] of Object.entries(e.headers ?? {})) out.push({ name, in: 'header', required: false, description, schema: { type: 'string', maxLength: 255 } });
  return out;
}

function operation(e: Operation, components: Record<string, Json>): Json {
  const responses: Json = {};
  const answers = answersOf(e);
  for (const status of Object.keys(answers).sort()) {
    const a = answers[Number(status)]!;
    responses[status] = {
      description: a.description,
      ...(a.content ? { content: Object.fromEntries(Object.entries(a.content).map(([type, body]) => [type, content(body, components)])) } : {}),
    };
  }
  const params = parameters(e, components);
  return {
    operationId: operationId(e),
    // Who may call it, from the table of endpoints: a role, public, or node.
    'x-farmhand-role': e.role,
    summary: e.summary,
    ...(e.description ? { description: e.description } : {}),
    tags: [e.tag],
    security: e.auth === 'token' ? [{ token: [] }] : e.auth === 'v1' ? [{}, { token: [] }] : [],
    ...(params.length ? { parameters: params } : {}),
    ...(e.body ? { requestBody: { required: true, content: { 'application/json': { schema: toSchema(e.body, 'input', components) } } } } : {}),
    responses,
  };
}

/** `get /api/v2/jobs/{node}/{hex}/{num}` -> `get_api_v2_jobs_node_hex_num`: stable and unique. */
export const operationId = (e: Pick<Operation, 'method' | 'path'>): string =>
  `${e.method}${e.path.replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+/g, '_')}`.replace(/_+$/, '');

export interface DocumentInfo {
  version: string;
}

export function buildDocument(info: DocumentInfo, endpoints: readonly Operation[] = OPERATIONS): Json {
  const components: Record<string, Json> = {};
  const paths: Record<string, Json> = {};
  for (const e of endpoints) {
    const item = (paths[e.path] ??= {});
    if (item[e.method]) throw new Error(`table of endpoints: ${e.method.toUpperCase()} ${e.path} is listed twice`);
    item[e.method] = operation(e, components);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'farmhand',
      version: info.version,
      description: DESCRIPTION,
      license: { name: 'MIT', identifier: 'MIT' },
    },
    jsonSchemaDialect: 'https://json-schema.org/draft/2020-12/schema',
    servers: [{ url: '/' }],
    tags: [...new Set(endpoints.map((e) => e.tag))].map((name) => ({ name })),
    paths,
    components: {
      schemas: Object.fromEntries(Object.entries(components).sort(([a], [b]) => a.localeCompare(b))),
      securitySchemes: {
        token: {
          type: 'apiKey',
          in: 'header',
          name: 'Authorization',
          description: "`Authorization: token <token>` (or `Bearer <token>`); tokens are made with `farmhand token create --user <name>`.",
        },
      },
    },
  };
}

const DESCRIPTION = [
  'The Test-Farm HTTP API of one farmhand node: v1 (single appliance), v2 (this node only) and the extras real clients call.',
  'Paths are matched case-insensitively and a trailing slash is ignored (`/result/<id>/` is `/result/<id>`).',
  'job_uid (`/<node>/<hex>/<num>`) and result_id (`<job_uid>/<stamp>`) appear in paths without their leading slash, as several segments.',
  'POST/PUT bodies are read as JSON whatever the Content-Type.',
  'Every error is `{"error": "<code>", "message": "<text>"}`; besides the statuses listed, any path answers 404 `not_found` when unknown,',
  '405 `method_not_allowed` for a method it does not serve and 501 `not_implemented` for a method the API never uses; OPTIONS answers 200 with `Allow`.',
].join(' ');

let cached: string | undefined;

/**
 * The document as JSON text, built on first use. Every character outside printable ASCII is written as a
 * `\uXXXX` escape: the patterns hold literal control and space characters (patterns.ts), which a reader
 * of the text should see, not get as invisible bytes.
 */
export function documentJson(info: DocumentInfo): string {
  cached ??= asciiJson(JSON.stringify(buildDocument(info)));
  return cached;
}

/** JSON text with every character outside printable ASCII (JSON.stringify already escapes C0) as `\uXXXX`. */
export const asciiJson = (json: string): string => json.replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
