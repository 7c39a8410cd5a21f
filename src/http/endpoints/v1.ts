/** The table's entries for v1, the single appliance's API (src/http/v1/routes.ts; the results: results.ts). */
import { z } from 'zod';
import * as S from '../openapi/schemas.js';
import { e, error, file, JOB, JOB_PARAMS, json, type Answer, type Endpoint, type Need, type Served, type Tag } from './entry.js';
import { resultEntries } from './results.js';

/** `screenshot.png` and `thumbnail.jpg` of the device under test, under `base` (v1's device, v2's node). */
export function pictures(base: string, params: Record<string, string> | undefined, tag: Tag, auth: 'v1' | 'token', served: Served): Endpoint[] {
  return (['screenshot.png', 'thumbnail.jpg'] as const).map((name): Endpoint => ({
    ...e('GET', `${base}/${name}`, 'read', 'read screenshots', served),
    summary: name === 'screenshot.png' ? 'Screenshot of the device under test' : 'Small thumbnail of the screenshot',
    tag,
    auth,
    params,
    responses: answers(name, params !== undefined),
  }));
}

function answers(name: string, hasNode: boolean): Record<number, Answer> {
  const out: Record<number, Answer> = {
    200: file(name.endsWith('.png') ? 'image/png' : 'image/jpeg', 'The picture now.'),
    503: error('The node is offline (no picture from the capture).'),
  };
  if (hasNode) out[404] = error('Unknown node_id.');
  return out;
}

/** `GET /api/<v>/test_pack/<revision>/test_case_names`. */
export const testCaseNames = (v: 'v1' | 'v2', role: Need, served: Served): Endpoint => ({
  ...e('GET', `/api/${v}/test_pack/*rev/test_case_names`, role, 'read the test pack', served),
  summary: 'Test case names at a revision of the test pack',
  tag: v,
  auth: v === 'v1' ? 'v1' : 'token',
  params: { test_pack_revision: 'Branch, tag or commit SHA; may contain `/`.' },
  responses: { 200: json(S.TestCaseNames, 'The names, usable in run_tests.'), 404: error('No such revision in the test pack.'), 503: error('The test pack cannot be fetched.') },
});

/** The results lists' query, documented and checked (schemas.ts `ResultsQuery`; the filter's grammar is the handler's). */
export const resultsQuery = S.ResultsQuery;
/** Checked on a node and, where the portal answers the route itself, on the portal. */
export const resultsQueryCheck = { check: { query: resultsQuery }, portalCheck: { query: resultsQuery } };

export const V1: Endpoint[] = [
  ...pictures('/api/v1/device', undefined, 'v1', 'v1', 'node'),
  testCaseNames('v1', 'run', 'node'),
  {
    ...e('POST', '/api/v1/run_tests', 'run', 'run tests', 'node'),
    audit: 'job.run',
    summary: 'Start a job (v1)',
    tag: 'v1',
    auth: 'v1',
    body: S.V1RunTestsRequest,
    check: { body: S.V1RunTestsRequest },
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
    ...e('GET', `/api/v1/jobs${JOB}`, 'read', 'read jobs'),
    summary: 'Job status (v1)',
    tag: 'v1',
    auth: 'v1',
    params: JOB_PARAMS,
    responses: { 200: json(S.Job, 'The job.'), 404: error('Unknown job_uid.') },
  },
  {
    ...e('POST', `/api/v1/jobs${JOB}/stop`, 'run', 'stop tests', 'node'),
    audit: 'job.stop',
    summary: 'Stop a job (v1)',
    tag: 'v1',
    auth: 'v1',
    params: JOB_PARAMS,
    responses: { 200: json(S.Job, 'The job is stopped (or had already exited).'), 202: json(S.Job, 'Still stopping; retry.'), 403: error('The node is reserved by someone else.'), 404: error('Unknown job_uid.') },
  },
  {
    ...e('GET', `/api/v1/jobs${JOB}/results`, 'read', 'read results', 'node'),
    summary: 'Results of one job (v1)',
    tag: 'v1',
    auth: 'v1',
    params: JOB_PARAMS,
    query: resultsQuery.omit({ filter: true }),
    check: { query: resultsQuery.omit({ filter: true }) },
    responses: { 200: json(z.array(S.ResultSummaryV1), 'The job’s results.'), 404: error('Unknown job_uid.') },
  },
  {
    ...e('GET', '/api/v1/results', 'read', 'read results', 'node'),
    summary: 'Results list (v1)',
    description: 'At most 2,000 runs; runs in progress are left out.',
    tag: 'v1',
    auth: 'v1',
    query: resultsQuery,
    ...resultsQueryCheck,
    responses: { 200: json(z.array(S.ResultSummaryV1), 'Matching results.') },
  },
  ...resultEntries('v1'),
];
