/**
 * THE list of endpoints farmhand serves, one entry each: the OpenAPI document
 * (document.ts), the reference page (page.ts) and the suite's contract check
 * (test/helpers/contract.ts) are all made from it. Adding an endpoint is
 * adding its entry here (docs/openapi.md).
 *
 * The errors every endpoint of a kind can answer are added by the builder,
 * not listed per entry: 403 (token), 429 (rate limit), 500; and 400, 413,
 * 415 for methods with a body. An entry lists its own answers, including its
 * own 4xx (404 unknown id, 409 busy, ...).
 */
import { z } from 'zod';
import type { Answer, Endpoint } from './endpoint.js';
import { PORTAL_ENDPOINTS } from './pages.js';
import * as S from './schemas.js';

export type { Answer, Body, Endpoint, Method } from './endpoint.js';
export { MULTI_SEGMENT } from './endpoint.js';

const json = (schema: z.ZodType, description: string): Answer => ({ description, content: { 'application/json': schema } });
const none = (description: string): Answer => ({ description });
const file = (type: string, description: string): Answer => ({ description, content: { [type]: 'binary' } });
const text = (type: string, description: string): Answer => ({ description, content: { [type]: 'text' } });
const error = (description: string): Answer => json(S.ErrorBody, description);

const JOB_PARAMS = {
  node: 'The node id: the first segment of the job_uid (job_uid `/<node>/<hex>/<num>` is written without its leading slash).',
  hex: 'The second segment of the job_uid.',
  num: 'The third segment of the job_uid (the job number).',
};
const RESULT_PARAMS = { ...JOB_PARAMS, stamp: 'The run stamp `<YYYY-MM-DD>_<hh.mm.ss>`: the last segment of the result_id.' };
const JOB = '{node}/{hex}/{num}';
const RESULT = '{node}/{hex}/{num}/{stamp}';
const NODE = { node_id: "This node's id; any other is a 404." };

const resultsQuery = z.object({
  filter: z.string().optional().meta({ description: 'Search expression (docs/filters.md); `job:<job_uid>` selects one job.' }),
  sort: z.string().optional().meta({ description: '`<field>:asc|desc`, field one of category, date, duration, job, testcase, result. Default `date:desc`.' }),
  tz: z.string().optional().meta({ description: 'IANA time zone for dates in the filter; default UTC.' }),
});
export const AUDIT_QUERY = z.object({
  user: z.string().optional().meta({ description: 'Entries of this user.' }),
  action: z.string().optional().meta({ description: 'An action (`job.run`) or a family (`reservation`).' }),
  node: z.string().optional().meta({ description: 'Entries about this node.' }),
  since: z.string().optional().meta({ description: 'ISO 8601 time with a zone, or a date: entries at or after it.' }),
  until: z.string().optional().meta({ description: 'ISO 8601 time with a zone, or a date: entries at or before it.' }),
  before: z.string().optional().meta({ description: "The previous page's `next_before`." }),
  limit: z.string().optional().meta({ description: 'At most this many, 1 to 1000; default 100.' }),
});
const tzQuery = z.object({ tz: z.string().optional().meta({ description: 'IANA time zone of the timestamps (v2 log) or of the page; default UTC.' }) });

const pictures = (base: string, params: Record<string, string> | undefined, tag: Endpoint['tag'], auth: Endpoint['auth']): Endpoint[] =>
  (['screenshot.png', 'thumbnail.jpg'] as const).map((name): Endpoint => ({
    method: 'get',
    path: `${base}/${name}`,
    summary: name === 'screenshot.png' ? 'Screenshot of the device under test' : 'Small thumbnail of the screenshot',
    tag,
    auth,
    params,
    responses: pictureAnswers(name, params !== undefined),
  }));

function pictureAnswers(name: string, hasNode: boolean): Record<number, Answer> {
  const out: Record<number, Answer> = {
    200: file(name.endsWith('.png') ? 'image/png' : 'image/jpeg', 'The picture now.'),
    503: error('The node is offline (no picture from the capture).'),
  };
  if (hasNode) out[404] = error('Unknown node_id.');
  return out;
}

const testCaseNames = (v: 'v1' | 'v2'): Endpoint => ({
  method: 'get',
  path: `/api/${v}/test_pack/{test_pack_revision}/test_case_names`,
  summary: 'Test case names at a revision of the test pack',
  tag: v,
  auth: v === 'v1' ? 'v1' : 'token',
  params: { test_pack_revision: 'Branch, tag or commit SHA; may contain `/`.' },
  responses: { 200: json(S.TestCaseNames, 'The names, usable in run_tests.'), 404: error('No such revision in the test pack.'), 503: error('The test pack cannot be fetched.') },
});

/** The result endpoints of one version (src/http/resultRoutes.ts). */
function resultEndpoints(v: 'v1' | 'v2'): Endpoint[] {
  const base = v === 'v1' ? `/api/v1/result/${RESULT}` : `/api/v2/results/${RESULT}`;
  const common = { tag: 'results' as const, auth: v === 'v1' ? ('v1' as const) : ('token' as const), params: RESULT_PARAMS };
  const missing = { 404: error('Unknown result_id (a run in progress has no result yet), or no such file.'), 410: error('The result was deleted by retention.') };
  const log = (name: string): Endpoint => ({
    ...common,
    method: 'get',
    path: `${base}/${name}`,
    summary: `The run log (${name})`,
    description:
      'Lines of an ISO 8601 timestamp, a space and the message; of a run in progress, what is written so far. Supports single Range requests (206/416), also on a run in progress (there without `tz`: how the portal follows a running log)' +
      (v === 'v2' ? '; `tz` rewrites the timestamps.' : '.'),
    ...(v === 'v2' ? { query: tzQuery } : {}),
    responses: {
      200: text('text/plain', 'The log.'),
      206: text('text/plain', 'The requested byte range.'),
      ...missing,
      416: error('The Range is outside the file.'),
    },
  });
  return [
    {
      ...common,
      method: 'get',
      path: base,
      summary: `Result detail (${v})`,
      description: 'Also answered with a trailing slash.',
      responses: { 200: json(v === 'v1' ? S.ResultDetailV1 : S.ResultDetailV2, 'The result.'), ...missing },
    },
    log('farmhand.log'),
    log('stbt.log'),
    {
      ...common,
      method: 'get',
      path: `${base}/screenshot.png`,
      summary: 'Screenshot saved at the end of the run',
      responses: { 200: file('image/png', 'The screenshot.'), 206: file('image/png', 'The requested byte range.'), ...missing, 416: error('The Range is outside the file.') },
    },
    {
      ...common,
      method: 'get',
      path: `${base}/artifacts`,
      summary: 'Artifact listing',
      description: 'Also answered with a trailing slash.',
      responses: { 200: json(S.ArtifactListing, 'Every file of the run.'), ...missing },
    },
    {
      ...common,
      method: 'get',
      path: `${base}/artifacts/{artifact_path}`,
      summary: 'One artifact file',
      description: 'Content-Type by the file extension (text/plain for names without one). Supports single Range requests.',
      params: { ...RESULT_PARAMS, artifact_path: 'Path of the file relative to the run folder; may contain `/`.' },
      responses: { 200: file('*/*', 'The file.'), 206: file('*/*', 'The requested byte range.'), ...missing, 416: error('The Range is outside the file.') },
    },
  ];
}

/** `GET /api/v2/events` (docs/events.md); the portal's `/app/events` is the same stream under the web pages' rule. */
const EVENTS_ENDPOINT: Endpoint = {
  method: 'get',
  path: '/api/v2/events',
  summary: 'Server-sent events: jobs, runs, node online/offline, reservations, key presses',
  description:
    'A `text/event-stream` that stays open: each event has an `id:`, an `event:` type and JSON `data:`. ' +
    'Resume with the `Last-Event-ID` header (or `last_event_id`) from a bounded buffer; when events were missed, a ' +
    '`stream.missed` event says so first. One request for the rate limiter however long it stays open.',
  tag: 'v2',
  auth: 'token',
  query: z.object({ last_event_id: z.string().optional().meta({ description: 'The id of the last event received (as the Last-Event-ID header).' }) }),
  responses: {
    200: text('text/event-stream', 'The stream of events.'),
    400: error('A malformed last event id.'),
    503: error('Too many event-stream clients (`events.max_clients`); retry after Retry-After.'),
  },
};

export const ENDPOINTS: Endpoint[] = [
  // --- meta
  {
    method: 'get',
    path: '/api/openapi.json',
    summary: 'This OpenAPI document',
    tag: 'meta',
    auth: 'none',
    responses: { 200: { description: 'The OpenAPI 3.1 document.', content: { 'application/json': z.looseObject({ openapi: z.string() }) } } },
  },
  {
    method: 'get',
    path: '/app/api',
    summary: 'The API reference page (HTML)',
    tag: 'web',
    auth: 'v1',
    responses: { 200: text('text/html', 'The reference page, rendered from this document.') },
  },

  // --- v1 (src/http/v1/routes.ts)
  ...pictures('/api/v1/device', undefined, 'v1', 'v1'),
  testCaseNames('v1'),
  {
    method: 'post',
    path: '/api/v1/run_tests',
    summary: 'Start a job (v1)',
    tag: 'v1',
    auth: 'v1',
    body: S.V1RunTestsRequest,
    responses: {
      200: json(S.V1RunTestsAnswer, 'The job started.'),
      403: error('Licence expired, or the node is reserved by someone else.'),
      404: error('The revision is not in the test pack, or a test case or remote control is unknown.'),
      409: error('A job is already running.'),
      503: error('The node is offline, or the test pack cannot be fetched.'),
      507: error('The disk is full.'),
    },
  },
  {
    method: 'get',
    path: `/api/v1/jobs/${JOB}`,
    summary: 'Job status (v1)',
    tag: 'v1',
    auth: 'v1',
    params: JOB_PARAMS,
    responses: { 200: json(S.Job, 'The job.'), 404: error('Unknown job_uid.') },
  },
  {
    method: 'post',
    path: `/api/v1/jobs/${JOB}/stop`,
    summary: 'Stop a job (v1)',
    tag: 'v1',
    auth: 'v1',
    params: JOB_PARAMS,
    responses: { 200: json(S.Job, 'The job is stopped (or had already exited).'), 202: json(S.Job, 'Still stopping; retry.'), 403: error('The node is reserved by someone else.'), 404: error('Unknown job_uid.') },
  },
  {
    method: 'get',
    path: `/api/v1/jobs/${JOB}/results`,
    summary: 'Results of one job (v1)',
    tag: 'v1',
    auth: 'v1',
    params: JOB_PARAMS,
    query: resultsQuery.omit({ filter: true }),
    responses: { 200: json(z.array(S.ResultSummaryV1), 'The job’s results.'), 404: error('Unknown job_uid.') },
  },
  {
    method: 'get',
    path: '/api/v1/results',
    summary: 'Results list (v1)',
    description: 'At most 2,000 runs; runs in progress are left out.',
    tag: 'v1',
    auth: 'v1',
    query: resultsQuery,
    responses: { 200: json(z.array(S.ResultSummaryV1), 'Matching results.') },
  },
  ...resultEndpoints('v1'),

  // --- v2 (src/http/v2/routes.ts)
  ...pictures('/api/v2/nodes/{node_id}', NODE, 'v2', 'token'),
  {
    method: 'post',
    path: '/api/v2/nodes/{node_id}/press',
    summary: 'Press a key on the remote control (manual control)',
    tag: 'extras',
    auth: 'token',
    params: NODE,
    body: S.PressRequest,
    responses: {
      204: none('Pressed.'),
      403: error('The node is reserved by someone else.'),
      404: error('Unknown node_id, revision, remote control or key.'),
      409: error('A job is running.'),
      503: error('The infrared transport is not answering.'),
    },
  },
  {
    method: 'post',
    path: '/api/v2/nodes/{node_id}/maintenance',
    summary: 'Put the node in maintenance, or take it out (administrators)',
    tag: 'extras',
    auth: 'token',
    params: NODE,
    body: S.MaintenanceRequest,
    responses: {
      200: json(S.MaintenanceAnswer, 'Done: the maintenance now (null: in service).'),
      400: error('A bad body: `on` missing, no message with `on: true`, an unknown field.'),
      403: error('The role is below admin.'),
      404: error('Unknown node_id.'),
      503: error('Through the portal: the node is not connected.'),
    },
  },
  testCaseNames('v2'),
  {
    method: 'post',
    path: '/api/v2/run_tests',
    summary: 'Start a job (v2)',
    tag: 'v2',
    auth: 'token',
    body: S.V2RunTestsRequest,
    responses: {
      200: json(S.JobWithNotices, 'The job started.'),
      403: error('Licence expired, or the node is reserved by someone else.'),
      404: error('Unknown node_id; revision, test case or remote control not found.'),
      409: error('A job is already running.'),
      503: error('The node is offline, or the test pack cannot be fetched.'),
      507: error('The disk is full.'),
    },
  },
  {
    method: 'get',
    path: `/api/v2/jobs/${JOB}`,
    summary: 'Job status',
    tag: 'v2',
    auth: 'token',
    params: JOB_PARAMS,
    responses: { 200: json(S.Job, 'The job.'), 404: error('Unknown job_uid.') },
  },
  {
    method: 'get',
    path: '/api/v2/nodes/{node_id}/job',
    summary: "The node's current job, or its last",
    tag: 'v2',
    auth: 'token',
    params: NODE,
    responses: { 200: json(S.Job, 'The job.'), 404: error('Unknown node_id, or the node has never run a job.') },
  },
  {
    method: 'get',
    path: `/api/v2/jobs/${JOB}/log`,
    summary: "The job's log (not in the spec): the node's job.log_url until its first run starts",
    description:
      "A redirect (302, query kept: `tz`) to the `farmhand.log` of the job's run in progress, else of its latest run; " +
      'while the job has had no run yet (its test pack is being checked out), an empty log so far. Never cached.',
    tag: 'v2',
    auth: 'token',
    params: JOB_PARAMS,
    query: tzQuery,
    responses: {
      200: text('text/plain', 'The job has had no run yet: nothing is written so far.'),
      302: text('text/plain', "`Location` is the log of the job's run in progress, else of its latest run."),
      404: error('Unknown job_uid.'),
    },
  },
  {
    method: 'get',
    path: `/api/v2/jobs/${JOB}/await_completion`,
    summary: 'Long poll until the job ends',
    tag: 'v2',
    auth: 'token',
    params: JOB_PARAMS,
    rateLimited: false,
    responses: { 200: json(S.Job, 'The job has ended.'), 202: json(S.Job, 'Still running after the hold time (55 s); retry.'), 404: error('Unknown job_uid.') },
  },
  {
    method: 'get',
    path: '/api/v2/nodes/{node_id}/job/await_completion',
    summary: "Long poll until the node's current job ends",
    tag: 'v2',
    auth: 'token',
    params: NODE,
    rateLimited: false,
    responses: {
      200: json(z.union([S.Job, S.NoJob]), 'The job has ended, or the node has never run one.'),
      202: json(S.Job, 'Still running after the hold time; retry.'),
      404: error('Unknown node_id.'),
    },
  },
  ...(['put', 'post'] as const).map(
    (method): Endpoint => ({
      method,
      path: `/api/v2/jobs/${JOB}/stop`,
      summary: `Stop a job (${method.toUpperCase()}; PUT and POST are the same)`,
      tag: 'v2',
      auth: 'token',
      params: JOB_PARAMS,
      responses: { 200: json(S.JobWithNotices, 'Stopped (or had already exited).'), 202: json(S.JobWithNotices, 'Still stopping; retry.'), 403: error('The node is reserved by someone else.'), 404: error('Unknown job_uid.') },
    }),
  ),
  {
    method: 'post',
    path: '/api/v2/nodes/{node_id}/job/stop',
    summary: "Stop the node's current job",
    tag: 'v2',
    auth: 'token',
    params: NODE,
    responses: {
      200: json(S.JobWithNotices, 'Stopped (or had already exited).'),
      202: json(S.JobWithNotices, 'Still stopping; retry.'),
      403: error('The node is reserved by someone else.'),
      404: error('Unknown node_id, or the node has never run a job.'),
    },
  },
  {
    method: 'get',
    path: '/api/v2/results',
    summary: 'Results list',
    description: 'At most 2,000 runs; runs in progress are left out.',
    tag: 'v2',
    auth: 'token',
    query: resultsQuery,
    responses: { 200: json(z.array(S.ResultSummaryV2), 'Matching results.') },
  },
  {
    method: 'get',
    path: '/api/v2/results.csv',
    summary: 'Results list as CSV',
    description: 'Columns in docs/results-formats.md.',
    tag: 'v2',
    auth: 'token',
    query: resultsQuery,
    responses: { 200: text('text/csv', 'Matching results.') },
  },
  {
    method: 'get',
    path: '/api/v2/results.xml',
    summary: 'Results list as jUnit XML',
    tag: 'v2',
    auth: 'token',
    query: resultsQuery.extend({
      include_tz: z.enum(['true', 'false']).optional().meta({ description: 'Zone offsets in the timestamps; default false.' }),
      junit_classname: z.string().optional().meta({ description: 'How testcase classnames are made (docs/results-formats.md); default path.' }),
    }),
    responses: { 200: text('application/xml', 'Matching results.') },
  },
  {
    method: 'get',
    path: '/api/v2/user',
    summary: 'Who the token belongs to',
    tag: 'extras',
    auth: 'token',
    responses: { 200: json(S.User, 'The user.') },
  },
  ...resultEndpoints('v2'),

  // --- v2 nodes and reservations (src/http/v2/nodeRoutes.ts)
  {
    method: 'get',
    path: '/api/v2/nodes',
    summary: 'Node list (this one node)',
    tag: 'v2 nodes',
    auth: 'token',
    responses: { 200: json(z.array(S.Node), 'The nodes.') },
  },
  {
    method: 'get',
    path: '/api/v2/nodes/{node_id}',
    summary: 'Node status',
    tag: 'v2 nodes',
    auth: 'token',
    params: NODE,
    responses: { 200: json(S.Node, 'The node.'), 404: error('Unknown node_id.') },
  },
  {
    method: 'post',
    path: '/api/v2/reservations',
    summary: 'Reserve nodes (all or none)',
    tag: 'v2 nodes',
    auth: 'token',
    body: S.ReserveRequest,
    responses: { 200: json(S.ReservationsAnswer, 'All reserved.'), 404: error('Unknown node_id.'), 409: error('A node is reserved or busy; nothing was reserved.') },
  },
  {
    method: 'post',
    path: '/api/v2/reservations/{reservation_id}/extend',
    summary: 'Extend a reservation (its creator only)',
    tag: 'v2 nodes',
    auth: 'token',
    params: { reservation_id: 'A positive integer.' },
    body: S.ExtendRequest,
    responses: { 204: none('Extended.'), 403: error('Not made by the caller.'), 404: error('No such reservation.') },
  },
  {
    method: 'delete',
    path: '/api/v2/reservations/{reservation_id}',
    summary: 'End a reservation (its creator only)',
    tag: 'v2 nodes',
    auth: 'token',
    params: { reservation_id: 'A positive integer.' },
    responses: { 204: none('Ended, or had already ended.'), 403: error('Not made by the caller.'), 404: error('No such reservation.') },
  },
  {
    method: 'post',
    path: '/api/v2/reservations/{reservation_id}/interrupt',
    summary: "End anyone's reservation, with a message to its owner",
    tag: 'v2 nodes',
    auth: 'token',
    params: { reservation_id: 'A positive integer.' },
    body: S.InterruptRequest,
    responses: { 204: none('Interrupted, or had already ended.'), 404: error('No such reservation.') },
  },

  // --- the audit trail (src/http/audit.ts; docs/auth.md, "Audit trail")
  {
    method: 'get',
    path: '/api/v2/audit',
    summary: 'The audit trail: who did what, when, from where (administrators)',
    description:
      'Newest first. Every run, stop, reservation change, manual control session, test-pack fetch, token and role change. ' +
      'On a farm portal, the farm\'s trail (PostgreSQL); on a node, the node\'s (its data directory).',
    tag: 'extras',
    auth: 'token',
    query: AUDIT_QUERY,
    responses: { 200: json(S.AuditPage, 'The entries.'), 400: error('A bad filter (`invalid_filter`), naming it.'), 403: error('The caller is not an administrator.') },
  },

  // --- push events (src/http/events.ts; docs/events.md)
  EVENTS_ENDPOINT,
  {
    // The same stream for the portal's pages, under the web pages' rule (src/http/events.ts).
    ...EVENTS_ENDPOINT,
    path: '/app/events',
    summary: "The same event stream, for the portal's pages",
    description:
      "What `/api/v2/events` sends, under the web pages' rule (a token or a session only with `auth.v1_requires_token`). " + EVENTS_ENDPOINT.description!,
    tag: 'web',
    auth: 'v1',
  },

  // --- operations (src/http/opsRoutes.ts; docs/operations.md)
  {
    method: 'get',
    path: '/healthz',
    summary: 'Liveness: the process answers (constant cost)',
    tag: 'meta',
    auth: 'none',
    responses: { 200: json(S.Health, 'The process is alive; `starting` while it starts.') },
  },
  {
    method: 'get',
    path: '/readyz',
    summary: 'Readiness: capture delivering frames, test pack reachable, data directory writable, disk above the floor',
    description:
      "On a farm portal (`farmhand portal`): the database answers and the portal holds the portal lock (one portal per database); a load balancer's health check (docs/farm.md).",
    tag: 'meta',
    auth: 'none',
    responses: { 200: json(S.Ready, 'Ready to run tests.'), 503: json(S.NotReady, 'Not ready: the failed checks and why.') },
  },
  {
    method: 'get',
    path: '/metrics',
    summary: 'Prometheus metrics (text exposition format 0.0.4)',
    description:
      "Readable like v1 (a token only with `auth.v1_requires_token`). The series are listed in docs/operations.md; a farm portal's (`farmhand_portal_*`) in docs/farm.md.",
    tag: 'meta',
    auth: 'v1',
    responses: { 200: text('text/plain', 'The exposition.') },
  },

  // --- extras (src/http/webhooks.ts); the portal's pages are in pages.ts
  {
    method: 'post',
    path: '/github/post-receive',
    summary: 'Push webhook: fetch the test pack now',
    description: 'No body and no token needed (the sender is a git host).',
    tag: 'extras',
    auth: 'none',
    responses: { 204: none('Fetched.'), 503: error('The test-pack repository could not be fetched.') },
  },
  ...PORTAL_ENDPOINTS,
];
