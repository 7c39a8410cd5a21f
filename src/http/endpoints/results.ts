/**
 * The table's entries for one result's files, v1 (`/api/v1/result/...`) and v2 (`/api/v2/results/...`):
 * the same routes under two prefixes (src/http/resultRoutes.ts; on the portal, src/farm/resultRoutes.ts).
 */
import * as S from '../openapi/schemas.js';
import { e, error, file, json, RESULT, RESULT_PARAMS, text, type Endpoint } from './entry.js';


export function resultEntries(v: 'v1' | 'v2'): Endpoint[] {
  const base = v === 'v1' ? `/api/v1/result${RESULT}` : `/api/v2/results${RESULT}`;
  const common = { tag: 'results' as const, auth: v === 'v1' ? ('v1' as const) : ('token' as const), params: RESULT_PARAMS };
  const missing = { 404: error('Unknown result_id (a run in progress has no result yet), or no such file.'), 410: error('The result was deleted by retention.') };
  const log = (name: string): Endpoint => ({
    ...e('GET', `${base}/${name}`, 'read', 'read logs'),
    ...common,
    summary: `The run log (${name})`,
    description:
      'Lines of an ISO 8601 timestamp, a space and the message; of a run in progress, what is written so far. Supports single Range requests (206/416), also on a run in progress (there without `tz`: how the portal follows a running log)' +
      (v === 'v2' ? '; `tz` rewrites the timestamps.' : '.'),
    ...(v === 'v2' ? { query: S.LogTzQuery, check: { query: S.LogTzQuery }, portalCheck: { query: S.LogTzQuery } } : {}),
    responses: {
      200: text('text/plain', 'The log.'),
      206: text('text/plain', 'The requested byte range.'),
      ...missing,
      416: error('The Range is outside the file.'),
    },
  });
  return [
    {
      ...e('GET', base, 'read', 'read results'),
      ...common,
      summary: `Result detail (${v})`,
      description: 'Also answered with a trailing slash.',
      responses: { 200: json(v === 'v1' ? S.ResultDetailV1 : S.ResultDetailV2, 'The result.'), ...missing },
    },
    log('farmhand.log'),
    log('stbt.log'),
    {
      ...e('GET', `${base}/screenshot.png`, 'read', 'read screenshots'),
      ...common,
      summary: 'Screenshot saved at the end of the run',
      responses: { 200: file('image/png', 'The screenshot.'), 206: file('image/png', 'The requested byte range.'), ...missing, 416: error('The Range is outside the file.') },
    },
    {
      ...e('GET', `${base}/artifacts`, 'read', 'read results', v === 'v1' ? 'node' : 'both'),
      ...common,
      summary: 'Artifact listing',
      description: 'Also answered with a trailing slash.',
      responses: { 200: json(S.ArtifactListing, 'Every file of the run.'), ...missing },
    },
    {
      ...e('GET', `${base}/artifacts/*path`, 'read', 'read results'),
      ...common,
      summary: 'One artifact file',
      description: 'Content-Type by the file extension (text/plain for names without one). Supports single Range requests.',
      params: { ...RESULT_PARAMS, artifact_path: 'Path of the file relative to the run folder; may contain `/`.' },
      responses: { 200: file('*/*', 'The file.'), 206: file('*/*', 'The requested byte range.'), ...missing, 416: error('The Range is outside the file.') },
    },
    // The portal passes any other file of a result on to the node that holds it; not in the document.
    e('GET', `${base}/*rest`, 'read', 'read results', 'portal'),
  ];
}
