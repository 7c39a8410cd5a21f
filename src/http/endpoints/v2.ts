/**
 * The table's entries for v2 (src/http/v2/routes.ts, nodeRoutes.ts; the event stream, src/http/events.ts; the
 * audit trail, src/http/audit.ts; the results: results.ts). On the portal the same paths cover the farm.
 */
import { z } from 'zod';
import * as S from '../openapi/schemas.js';
import { e, error, JOB, JOB_PARAMS, json, NODE, NODE_PARAMS, none, text, type Endpoint } from './entry.js';
import { resultEntries } from './results.js';
import { MaintenanceCheck, queryCheck } from './checks.js';
import { pictures, resultsQuery, resultsQueryCheck, testCaseNames } from './v1.js';

const tzQuery = z.object({ tz: z.string().optional().meta({ description: 'IANA time zone of the timestamps (v2 log) or of the page; default UTC.' }) });
const RESERVATION = { reservation_id: 'A positive integer.' };

const AUDIT_QUERY = z.object({
  user: z.string().optional().meta({ description: 'Entries of this user.' }),
  action: z.string().optional().meta({ description: 'An action (`job.run`) or a family (`reservation`).' }),
  node: z.string().optional().meta({ description: 'Entries about this node.' }),
  since: z.string().optional().meta({ description: 'ISO 8601 time with a zone, or a date: entries at or after it.' }),
  until: z.string().optional().meta({ description: 'ISO 8601 time with a zone, or a date: entries at or before it.' }),
  before: z.string().optional().meta({ description: "The previous page's `next_before`." }),
  limit: z.string().optional().meta({ description: 'At most this many, 1 to 1000; default 100.' }),
});

const OFF_SECS = 'off_secs must be a number of seconds from 0 to 600';
/** The body of a power-cycle (src/http/v2/power.ts; docs/power.md): an object, every field optional. */
export const PowerCycleRequest = z
  // No body at all (the button's, curl's -X POST) is the empty object: every default.
  .preprocess((v) => (v === undefined || v === null || v === '' ? {} : v), z.strictObject(
    {
      off_secs: z
        .number({ error: OFF_SECS })
        .min(0, { error: OFF_SECS })
        .max(600, { error: OFF_SECS })
        .nullish()
        .meta({ description: "How long the outlet stays off, 0 to 600 seconds; default the power.uri's off_secs (5)." }),
    },
    { error: (i) => (i.code === 'unrecognized_keys' ? `unknown field ${i.keys.join(', ')}: the body takes only off_secs` : 'the body must be a JSON object, e.g. {"off_secs": 5}, or none') },
  ))
  .meta({ id: 'PowerCycleRequest' });
export const PowerCycleAnswer = z
  .object({
    node_id: z.string(),
    off_secs: z.number().meta({ description: 'How long the outlet was left off.' }),
    started: z.string().meta({ description: 'ISO 8601 (UTC): when the outlet was asked to switch off.' }),
    ended: z.string().meta({ description: 'ISO 8601 (UTC): when the outlet read on again.' }),
  })
  .meta({ id: 'PowerCycleAnswer' });

const stopAnswers = (unknown: string) => ({
  200: json(S.JobWithNotices, 'Stopped (or had already exited).'),
  202: json(S.JobWithNotices, 'Still stopping; retry.'),
  403: error('The node is reserved by someone else.'),
  404: error(unknown),
});

/** `GET /api/v2/events` (docs/events.md); the portal's `/app/events` is the same stream under the web pages' rule. */
const EVENTS: Endpoint = {
  ...e('GET', '/api/v2/events', 'read', 'read events'),
  summary: 'Server-sent events: jobs, runs, node online/offline, reservations, key presses',
  description:
    'A `text/event-stream` that stays open: each event has an `id:`, an `event:` type and JSON `data:`. ' +
    'Resume with the `Last-Event-ID` header (or `last_event_id`) from a bounded buffer; when events were missed, a ' +
    '`stream.missed` event says so first. One request for the rate limiter however long it stays open.',
  tag: 'v2',
  auth: 'token',
  query: S.EventsQuery,
  check: { query: S.EventsQuery },
  portalCheck: { query: S.EventsQuery },
  responses: {
    200: text('text/event-stream', 'The stream of events.'),
    400: error('A malformed last event id.'),
    503: error('Too many event-stream clients (`events.max_clients`); retry after Retry-After.'),
  },
};

export const V2: Endpoint[] = [
  // The caller, nodes and their pictures.
  { ...e('GET', '/api/v2/user', 'read', 'read who they are'), summary: 'Who the token belongs to', tag: 'extras', auth: 'token', responses: { 200: json(S.User, 'The user.') } },
  { ...e('GET', '/api/v2/nodes', 'read', 'read node status'), summary: 'Node list (this one node)', tag: 'v2 nodes', auth: 'token', responses: { 200: json(z.array(S.Node), 'The nodes.') } },
  {
    // On a portal: from the farm's database (fresh from the node when it is connected), by any replica.
    ...e('GET', NODE, 'read', 'read node status'),
    farm: { id: 'node_id', answer: 'itself' },
    summary: 'Node status',
    tag: 'v2 nodes',
    auth: 'token',
    params: NODE_PARAMS,
    responses: { 200: json(S.Node, 'The node.'), 404: error('Unknown node_id.') },
  },
  ...pictures(NODE, NODE_PARAMS, 'v2', 'token', 'both'),
  {
    // Maintenance of a node (docs/api-notes.md): an administrator takes it out of service and back.
    ...e('POST', `${NODE}/maintenance`, 'admin', 'put nodes in maintenance'),
    audit: 'node.maintenance',
    summary: 'Put the node in maintenance, or take it out (administrators)',
    tag: 'extras',
    auth: 'token',
    params: NODE_PARAMS,
    body: S.MaintenanceRequest,
    check: { body: MaintenanceCheck },
    responses: {
      200: json(S.MaintenanceAnswer, 'Done: the maintenance now (null: in service).'),
      400: error('A bad body: `on` missing, no message with `on: true`, an unknown field.'),
      403: error('The role is below admin.'),
      404: error('Unknown node_id.'),
      503: error('Through the portal: the node is not connected.'),
    },
  },
  {
    ...e('POST', `${NODE}/press`, 'manual', 'press keys on the remote control'),
    farm: { id: 'node_id', answer: 'forward', reserved: 'press a key' },
    audit: 'remote.press',
    summary: 'Press a key on the remote control (manual control)',
    tag: 'extras',
    auth: 'token',
    params: NODE_PARAMS,
    body: S.PressRequest,
    check: { body: S.PressRequest },
    responses: {
      204: none('Pressed.'),
      403: error('The node is reserved by someone else.'),
      404: error('Unknown node_id, revision, remote control or key.'),
      409: error('A job is running.'),
      503: error('The infrared transport is not answering.'),
    },
  },
  {
    // An extension of v2 (issue 33): the node's outlet off and on again (src/http/v2/power.ts; docs/power.md).
    ...e('POST', `${NODE}/power/cycle`, 'manual', 'power-cycle the device under test'),
    // whole: the portal reads the node's small answer whole, so its audit row records the off_secs it answered.
    farm: { id: 'node_id', answer: 'forward', reserved: 'power-cycle the device', job: 'whole' },
    audit: 'power.cycle',
    summary: 'Power-cycle the device under test (extension of v2)',
    description:
      "Not in stb-tester's API: a farmhand extension of v2. The node's outlet (`power.uri`, docs/power.md) is switched off, left off " +
      '`off_secs`, and switched on; the answer comes once the outlet reads on again. Refused while a job runs or another cycle is under way.',
    tag: 'extras',
    auth: 'token',
    params: NODE_PARAMS,
    body: PowerCycleRequest,
    check: { body: PowerCycleRequest },
    responses: {
      200: json(PowerCycleAnswer, 'Done: the outlet was off `off_secs` and reads on again.'),
      400: error('A bad body: off_secs not a number from 0 to 600, an unknown field.'),
      403: error('The role is below manual, or the node is reserved by someone else.'),
      404: error('Unknown node_id, or the node has no outlet (power.uri none).'),
      409: error('A job is running, or a cycle is already under way.'),
      503: error('The outlet failed: unreachable, too slow, refused, or did not switch (the message says what to check); through the portal, the node is not connected.'),
    },
  },
  // Tests and jobs.
  testCaseNames('v2', 'run', 'both'),
  {
    ...e('POST', '/api/v2/run_tests', 'run', 'run tests'),
    farm: { id: 'body.node_id', answer: 'forward', reserved: 'run tests', job: 'whole' },
    audit: 'job.run',
    summary: 'Start a job (v2)',
    tag: 'v2',
    auth: 'token',
    headers: {
      'Idempotency-Key':
        'Not in the spec. A key of the caller\'s choosing (a UUID): the same key from the same user again answers the job it started (or is starting) instead of starting another, ' +
        'whatever the node\'s state, over the node\'s last 1000 jobs. So a start whose answer was lost can be sent again. 1 to 255 visible ASCII characters.',
    },
    body: S.V2RunTestsRequest,
    check: { body: S.V2RunTestsCheck },
    responses: {
      200: json(S.JobWithNotices, 'The job started.'),
      403: error('Licence expired, or the node is reserved by someone else.'),
      404: error('Unknown node_id; revision, test case or remote control not found.'),
      409: error('A job is already running.'),
      503: error('The node is offline, or the test pack cannot be fetched.'),
      507: error('The disk is full.'),
    },
  },
  { ...e('GET', `/api/v2/jobs${JOB}`, 'read', 'read jobs'), farm: { id: 'node', answer: 'forward', job: 'settle' }, summary: 'Job status', tag: 'v2', auth: 'token', params: JOB_PARAMS, responses: { 200: json(S.Job, 'The job.'), 404: error('Unknown job_uid.') } },
  {
    ...e('GET', `${NODE}/job`, 'read', 'read jobs'),
    farm: { id: 'node_id', answer: 'forward', job: 'settle' },
    summary: "The node's current job, or its last",
    tag: 'v2',
    auth: 'token',
    params: NODE_PARAMS,
    responses: { 200: json(S.Job, 'The job.'), 404: error('Unknown node_id, or the node has never run a job.') },
  },
  {
    ...e('GET', `/api/v2/jobs${JOB}/log`, 'read', 'read logs'),
    summary: "The job's log (not in the spec): the node's job.log_url until its first run starts",
    description:
      "A redirect (302, query kept: `tz`) to the `farmhand.log` of the job's run in progress, else of its latest run; " +
      'while the job has had no run yet (its test pack is being checked out), an empty log so far. Never cached.',
    tag: 'v2',
    auth: 'token',
    params: JOB_PARAMS,
    query: tzQuery,
    check: { query: queryCheck(tzQuery) },
    responses: {
      200: text('text/plain', 'The job has had no run yet: nothing is written so far.'),
      302: text('text/plain', "`Location` is the log of the job's run in progress, else of its latest run."),
      404: error('Unknown job_uid.'),
    },
  },
  {
    ...e('GET', `/api/v2/jobs${JOB}/await_completion`, 'read', 'read jobs'),
    farm: { id: 'node', answer: 'held' },
    summary: 'Long poll until the job ends',
    tag: 'v2',
    auth: 'token',
    params: JOB_PARAMS,
    rateLimited: false,
    responses: { 200: json(S.Job, 'The job has ended.'), 202: json(S.Job, 'Still running after the hold time (55 s); retry.'), 404: error('Unknown job_uid.') },
  },
  {
    ...e('GET', `${NODE}/job/await_completion`, 'read', 'read jobs'),
    farm: { id: 'node_id', answer: 'held' },
    summary: "Long poll until the node's current job ends",
    tag: 'v2',
    auth: 'token',
    params: NODE_PARAMS,
    rateLimited: false,
    responses: {
      200: json(z.union([S.Job, S.NoJob]), 'The job has ended, or the node has never run one.'),
      202: json(S.Job, 'Still running after the hold time; retry.'),
      404: error('Unknown node_id.'),
    },
  },
  ...(['PUT', 'POST'] as const).map(
    (method): Endpoint => ({
      ...e(method, `/api/v2/jobs${JOB}/stop`, 'run', 'stop tests'),
      farm: { id: 'node', answer: 'forward', reserved: 'stop the job', job: 'settle' },
      audit: 'job.stop',
      summary: `Stop a job (${method}; PUT and POST are the same)`,
      tag: 'v2',
      auth: 'token',
      params: JOB_PARAMS,
      responses: stopAnswers('Unknown job_uid.'),
    }),
  ),
  {
    ...e('POST', `${NODE}/job/stop`, 'run', 'stop tests'),
    farm: { id: 'node_id', answer: 'forward', reserved: 'stop the job', job: 'settle' },
    audit: 'job.stop',
    summary: "Stop the node's current job",
    tag: 'v2',
    auth: 'token',
    params: NODE_PARAMS,
    responses: stopAnswers('Unknown node_id, or the node has never run a job.'),
  },
  // Results (one result's files: results.ts).
  {
    ...e('GET', '/api/v2/results', 'read', 'read results'),
    summary: 'Results list',
    description: 'At most 2,000 runs; runs in progress are left out.',
    tag: 'v2',
    auth: 'token',
    query: resultsQuery,
    ...resultsQueryCheck,
    responses: { 200: json(z.array(S.ResultSummaryV2), 'Matching results.') },
  },
  {
    ...e('GET', '/api/v2/results.csv', 'read', 'read results'),
    summary: 'Results list as CSV',
    description: 'Columns in docs/results-formats.md.',
    tag: 'v2',
    auth: 'token',
    query: resultsQuery,
    ...resultsQueryCheck,
    responses: { 200: text('text/csv', 'Matching results.') },
  },
  {
    ...e('GET', '/api/v2/results.xml', 'read', 'read results'),
    summary: 'Results list as jUnit XML',
    tag: 'v2',
    auth: 'token',
    query: S.JunitQuery,
    check: { query: S.JunitQuery },
    portalCheck: { query: S.JunitQuery },
    responses: { 200: text('application/xml', 'Matching results.') },
  },
  ...resultEntries('v2'),
  // Reservations. The spec: extend and end are the owner's, interrupt is open to any authenticated user.
  // Reserving and extending need `run`; ending one's own and interrupting stay open to every signed-in user
  // (an owner whose role was lowered can still give the node back).
  {
    ...e('POST', '/api/v2/reservations', 'run', 'reserve nodes'),
    audit: 'reservation.create',
    summary: 'Reserve nodes (all or none)',
    tag: 'v2 nodes',
    auth: 'token',
    body: S.ReserveRequest,
    check: S.RESERVATION_CHECKS.reserve.node,
    portalCheck: S.RESERVATION_CHECKS.reserve.portal,
    responses: { 200: json(S.ReservationsAnswer, 'All reserved.'), 404: error('Unknown node_id.'), 409: error('A node is reserved or busy; nothing was reserved.') },
  },
  {
    ...e('POST', '/api/v2/reservations/:id/extend', 'run', 'extend reservations'),
    audit: 'reservation.extend',
    summary: 'Extend a reservation (its creator only)',
    tag: 'v2 nodes',
    auth: 'token',
    params: RESERVATION,
    body: S.ExtendRequest,
    check: S.RESERVATION_CHECKS.extend.node,
    portalCheck: S.RESERVATION_CHECKS.extend.portal,
    responses: { 204: none('Extended.'), 403: error('Not made by the caller.'), 404: error('No such reservation.') },
  },
  {
    ...e('DELETE', '/api/v2/reservations/:id', 'read', 'end reservations'),
    audit: 'reservation.end',
    summary: 'End a reservation (its creator only)',
    tag: 'v2 nodes',
    auth: 'token',
    params: RESERVATION,
    check: S.RESERVATION_CHECKS.end.node,
    portalCheck: S.RESERVATION_CHECKS.end.portal,
    responses: { 204: none('Ended, or had already ended.'), 403: error('Not made by the caller.'), 404: error('No such reservation.') },
  },
  {
    ...e('POST', '/api/v2/reservations/:id/interrupt', 'read', 'interrupt reservations'),
    audit: 'reservation.interrupt',
    summary: "End anyone's reservation, with a message to its owner",
    tag: 'v2 nodes',
    auth: 'token',
    params: RESERVATION,
    body: S.InterruptRequest,
    check: S.RESERVATION_CHECKS.interrupt.node,
    portalCheck: S.RESERVATION_CHECKS.interrupt.portal,
    responses: { 204: none('Interrupted, or had already ended.'), 404: error('No such reservation.') },
  },
  // The event stream (docs/events.md), for programs and for the pages.
  EVENTS,
  {
    // The same stream for the portal's pages, under the web pages' rule (src/http/events.ts).
    ...EVENTS,
    ...e('GET', '/app/events', 'read', 'read events'),
    summary: "The same event stream, for the portal's pages",
    description: "What `/api/v2/events` sends, under the web pages' rule (a token or a session only with `auth.v1_requires_token`). " + EVENTS.description!,
    tag: 'web',
    auth: 'v1',
  },
  // The audit trail (src/http/audit.ts; docs/auth.md, "Audit trail").
  {
    ...e('GET', '/api/v2/audit', 'admin', 'read the audit trail'),
    summary: 'The audit trail: who did what, when, from where (administrators)',
    description:
      'Newest first. Every run, stop, reservation change, manual control session, test-pack fetch, token and role change. ' +
      "On a farm portal, the farm's trail (PostgreSQL); on a node, the node's (its data directory).",
    tag: 'extras',
    auth: 'token',
    query: AUDIT_QUERY,
    check: { query: queryCheck(AUDIT_QUERY), code: 'invalid_filter' },
    portalCheck: { query: queryCheck(AUDIT_QUERY), code: 'invalid_filter' },
    responses: { 200: json(S.AuditPage, 'The entries.'), 400: error('A bad filter (`invalid_filter`), naming it.'), 403: error('The caller is not an administrator.') },
  },
];
