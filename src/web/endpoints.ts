/**
 * The portal's entries in the OpenAPI registry (src/http/openapi/registry.ts
 * spreads them in): every page and the static files, so the document lists
 * everything the daemon serves and the suite's contract check covers the
 * portal's answers too. One section per part of the portal.
 */
import { z } from 'zod';
import type { Answer, Endpoint } from '../http/openapi/registry.js';
import { ErrorBody } from '../http/openapi/schemas.js';

// (Type-only imports from the registry: it imports this file, and a value import back would be a cycle.)
export const page = (description: string): Answer => ({ description, content: { 'text/html': 'text' } });
export const json = (schema: z.ZodType, description: string): Answer => ({ description, content: { 'application/json': schema } });
export const error = (description: string): Answer => json(ErrorBody, description);
const asset = (description: string): Answer => ({ description, content: { 'text/javascript': 'text', 'text/css': 'text', 'image/svg+xml': 'text' } });

// --- static files (src/web/static.ts)
const STATIC: Endpoint[] = [
  {
    method: 'get',
    path: '/static/{file}',
    summary: "The portal's client scripts and style sheet",
    description: 'A fixed set of files shipped with the daemon; any other name is a 404.',
    tag: 'web',
    auth: 'none',
    params: { file: 'A file name, e.g. `api.js`, `portal.css`.' },
    responses: { 200: asset('The file.'), 404: error('No such file.') },
  },
];

// --- sign-in and the front door

// --- results list and job page (src/web/pages/results.tsx, job.tsx)
const listQuery = z.object({
  filter: z.string().optional().describe('The filter grammar of GET /api/v2/results (docs/filters.md).'),
  sort: z.string().optional().describe('`<field>:asc|desc`, field one of category, date, duration, job, testcase, result; default date:desc.'),
  tz: z.string().optional().describe('IANA zone for the dates of the filter and the times shown; default UTC.'),
});
const RESULTS_AND_JOBS: Endpoint[] = [
  {
    method: 'get',
    path: '/app/results',
    summary: 'The results list: search, sort, live rows',
    description: 'At most 2,000 rows, as the API; a note says when more matched. A bad filter, sort or tz is a 400 page with the error next to the search box.',
    tag: 'web',
    auth: 'v1',
    query: listQuery,
    responses: { 200: page('The list.'), 400: page('The list with the error in the filter (naming the bad term).') },
  },
  {
    method: 'get',
    path: '/app/results/row',
    summary: "One result's row of the results list, when it matches a filter",
    description: "What the list's script asks for on `run.finished`: the row (HTML, a `<tr>` in a table) rendered as the list renders it, or 204 when the result does not match `filter`.",
    tag: 'web',
    auth: 'v1',
    query: z.object({ result_id: z.string().describe('A finished result.'), filter: listQuery.shape.filter, tz: listQuery.shape.tz }),
    responses: {
      200: page('The row.'),
      204: { description: 'The result does not match the filter.' },
      400: error('A bad filter or tz, or no result_id.'),
      404: error('No such result.'),
      410: error('The result was deleted by retention.'),
    },
  },
  {
    method: 'get',
    path: '/app/jobs/{node}/{hex}/{num}',
    summary: 'The job page: state, counts, the running test and its log, results, Stop',
    tag: 'web',
    auth: 'v1',
    params: { node: 'Node id of the job_uid.', hex: 'Hex part of the job_uid.', num: 'Job number.' },
    query: z.object({ tz: listQuery.shape.tz }),
    responses: { 200: page('The page.'), 400: error('A bad tz.'), 404: page('No such job.') },
  },
];

// --- result page

// --- live view, web remote, reference images

export const PORTAL_ENDPOINTS: Endpoint[] = [...STATIC, ...RESULTS_AND_JOBS];
