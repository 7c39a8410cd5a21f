/**
 * The table's entries for the web pages (src/web/), on a node and on the portal: static files, sign-in, the
 * front door, results, jobs, the live view and web remote, the audit trail, the API reference.
 */
import { z } from 'zod';
import { ROLES } from '../../core/roles.js';
import { queryCheck } from './checks.js';
import { e, error, JOB, json, page, pageOrError, redirect, RESULT, type Answer, type Endpoint } from './entry.js';

/** `GET /app/session` on the portal (src/farm/portal/routes.ts). */
const AppSession = z
  .object({
    login: z.string().nullable().meta({ description: 'The signed-in user; null when nobody is.' }),
    csrf: z.string().nullable().meta({ description: "The session's CSRF token, for the page's forms and state-changing calls; null without a session." }),
    role: z.enum(ROLES).nullable().meta({ description: "The user's role; null when she has none (no roles) or nobody is signed in." }),
  })
  .meta({ id: 'AppSession' });

const asset = (description: string): Answer => ({ description, content: { 'text/javascript': 'text', 'text/css': 'text', 'image/svg+xml': 'text' } });

/** Static files and sign-in: a person must reach them before signing in (src/web/static.ts, src/web/pages/signIn.tsx, oidcSignIn.ts). */
export const FRONT_DOOR: Endpoint[] = [
  {
    ...e('GET', '/favicon.ico', 'public', 'read the icon'),
    summary: "The pages' icon",
    description: 'An SVG (`image/svg+xml`) under the name browsers ask for; also `/static/favicon.svg`.',
    tag: 'web',
    auth: 'none',
    responses: { 200: { description: 'The icon.', content: { 'image/svg+xml': 'text' } } },
  },
  {
    ...e('GET', '/static/:file', 'public', 'read static files'),
    summary: "The portal's client scripts and style sheet",
    description: 'A fixed set of files shipped with the daemon; any other name is a 404.',
    tag: 'web',
    auth: 'none',
    params: { file: 'A file name, e.g. `api.js`, `portal.css`.' },
    responses: { 200: asset('The file.'), 404: error('No such file.') },
  },
  {
    ...e('GET', '/app/sign-in', 'public', 'sign in'),
    summary: 'The sign-in form',
    description: 'Always open. `next`: the path of this site to return to after signing in.',
    tag: 'web',
    auth: 'none',
    responses: { 200: page('The form.') },
  },
  {
    ...e('POST', '/app/sign-in', 'public', 'sign in'),
    summary: 'Sign in with an access token; sets the session cookie',
    description:
      'A urlencoded form: `token` (a v2 access token), `next` (a path of this site). Refused when another site made the browser post it (`Sec-Fetch-Site`, `Origin`).',
    tag: 'web',
    auth: 'none',
    responses: {
      303: redirect('Signed in: the `farmhand_session` cookie (HttpOnly, SameSite=Strict) and a redirect to `next`.'),
      400: pageOrError('No token given: the form again, with the error next to the box (JSON to a client that does not ask for HTML).'),
      403: pageOrError('The token is not valid (the form again, with the error; JSON to a client that does not ask for HTML), or the post came from another site (JSON).'),
      413: error('The form is too large.'),
      415: error('An unsupported Content-Encoding.'),
    },
  },
  {
    ...e('POST', '/app/sign-out', 'public', 'sign out'),
    summary: 'End the session',
    description: "A urlencoded form with the session's CSRF token in `csrf` (or the `X-CSRF-Token` header).",
    tag: 'web',
    auth: 'none',
    responses: {
      303: redirect('Signed out (the cookie is cleared): to `/`.'),
      403: error('Without the CSRF token, or posted by another site.'),
      413: error('The form is too large.'),
      415: error('An unsupported Content-Encoding.'),
    },
  },
  {
    // OIDC sign-in: open, as the sign-in form is.
    ...e('GET', '/app/sign-in/oidc', 'public', 'sign in'),
    mountedWhen: 'oidc',
    summary: 'Sign in with OpenID Connect: start (only when `oidc` is configured)',
    description:
      'Always open. `next`: the path of this site to return to. Sends the browser to the identity provider (Authorization Code with PKCE, state and nonce) with the `farmhand_oidc` flow cookie (HttpOnly, SameSite=Lax, Path=/app/oidc/callback, 10 minutes). docs/auth.md, "Sign-in with OpenID Connect".',
    tag: 'web',
    auth: 'none',
    responses: {
      303: redirect("To the identity provider's authorization endpoint."),
      404: error('OIDC sign-in is not configured.'),
      503: pageOrError('The identity provider cannot be reached (`provider_unreachable`): a page with a retry link, or JSON.'),
    },
  },
  {
    ...e('GET', '/app/oidc/callback', 'public', 'sign in'),
    mountedWhen: 'oidc',
    summary: "Sign in with OpenID Connect: the provider's answer",
    description:
      'Always open. Checks the answer (the flow cookie, state, then the code exchange with the PKCE verifier and the ID token: issuer, audience, nonce, signature), maps the claims to a user name and a role and makes a session.',
    tag: 'web',
    auth: 'none',
    responses: {
      200: page('Signed in: the `farmhand_session` cookie and a page that moves on to `next` by itself (a same-site navigation, which carries the SameSite=Strict cookie).'),
      400: pageOrError('No flow of this browser (`sign_in_expired`: not started here, older than 10 minutes, already used) or a state that differs (`bad_state`).'),
      403: pageOrError('The provider refused (`provider_refused`, e.g. the person cancelled), or the claims give no user name (`no_username`) or no role (`no_role`).'),
      404: error('OIDC sign-in is not configured.'),
      502: pageOrError("The provider's answer could not be verified (`sign_in_failed`)."),
      503: pageOrError('The identity provider cannot be reached (`provider_unreachable`).'),
    },
  },
];

const listQuery = z.object({
  filter: z.string().optional().describe('The filter grammar of GET /api/v2/results (docs/filters.md).'),
  sort: z.string().optional().describe('`<field>:asc|desc`, field one of category, date, duration, job, testcase, result; default date:desc.'),
  tz: z.string().optional().describe('IANA zone for the dates of the filter and the times shown; default UTC.'),
});
const rowQuery = z.object({ result_id: z.string().describe('A finished result.'), filter: listQuery.shape.filter, tz: listQuery.shape.tz });
const resultPageQuery = z.object({ tz: z.string().optional().meta({ description: 'IANA time zone of the times and log stamps on the page; default UTC.' }) });
const jobPageQuery = z.object({ tz: listQuery.shape.tz });
const auditPageQuery = z.object({
  user: z.string().optional(),
  action: z.string().optional(),
  node: z.string().optional(),
  since: z.string().optional(),
  until: z.string().optional(),
  before: z.string().optional(),
  limit: z.string().optional(),
});
const frameQuery = z.object({
  name: z.string().optional().meta({ description: 'Download as `<name>.png` (letters, digits, `_ . -`).' }),
  x: z.string().optional().meta({ description: 'Left edge, pixels.' }),
  y: z.string().optional().meta({ description: 'Top edge, pixels.' }),
  width: z.string().optional().meta({ description: 'Width, pixels (at least 1).' }),
  height: z.string().optional().meta({ description: 'Height, pixels (at least 1).' }),
});
const labelsQuery = z.object({
  labels: z.string().optional().describe('On a farm portal: only the nodes with all of these labels, `key=value` separated by commas (e.g. `device=roku,room=lab2`; docs/queue.md).'),
});
const wallFramesQuery = z.object({ nodes: z.string().describe('The node ids whose pictures to send, separated by commas (at most 500), each a registered node.') });
/** A page the portal renders itself, as a node does: its query checked on both. */
const bothSides = (q: z.ZodObject, code?: 'invalid_filter') => ({ check: { query: queryCheck(q), ...(code && { code }) }, portalCheck: { query: queryCheck(q), ...(code && { code }) } });
const PAGE_RESULT_PARAMS = {
  node: 'The node id: the first segment of the result_id.',
  hex: 'The job uid`s hex segment.',
  num: 'The job number.',
  stamp: 'The run stamp `<YYYY-MM-DD>_<hh.mm.ss>`: the last segment of the result_id.',
};

/** The live view and web remote (src/web/pages/live.tsx), at `/app/live` and under a node's id. */
function live(base: string, served: 'node' | 'both'): Endpoint[] {
  const byNode = base !== '/app/live';
  const node = (x: Endpoint): Endpoint =>
    byNode ? { ...x, summary: `${x.summary} (by node id)`, params: { node_id: "This node's id; another id is a 404." }, responses: { ...x.responses, 404: error('Not this node.') } } : x;
  const entries: Endpoint[] = [
    {
      ...e('GET', base, 'manual', 'use the live view'),
      summary: 'Live view and web remote',
      description:
        "The live picture of the device under test, the remote control built from the test pack's `config/remote-control/*.lircd.conf` " +
        "(presses go to `POST /api/v2/nodes/{node_id}/press`), and reference images. Under the web pages' rule (a token or a session only with `auth.v1_requires_token`).",
      tag: 'web',
      auth: 'v1',
      responses: { 200: page('The page.') },
    },
    {
      ...e('GET', `${base}/stream.mjpeg`, 'manual', 'use the live view', served),
      summary: 'The live picture as Motion JPEG',
      description:
        'A `multipart/x-mixed-replace` stream that stays open: one JPEG part per live frame (`capture.live_fps` a second, at `capture.live_width`) that differs from ' +
        'the last one sent (a still picture is sent once; a new client gets the last picture at once), each with ' +
        '`Content-Length` and `X-Frame-Seq`. An `<img>` shows it. A client that reads slowly skips frames; it never slows capture or other viewers.',
      tag: 'web',
      auth: 'v1',
      responses: {
        200: { description: 'The stream.', content: { 'multipart/x-mixed-replace': 'binary' } },
        503: error('No capture, or too many viewers (32); retry after Retry-After.'),
      },
    },
    {
      ...e('GET', `${base}/frame.png`, 'manual', 'use the live view', served),
      summary: 'One captured frame as PNG, whole or a rectangle of it',
      description:
        'The exact pixels of the latest captured frame (lossless). With `x`, `y`, `width`, `height` (frame pixels) only that rectangle: ' +
        'a reference image for `wait_for_match`. With `name`, offered as a download `<name>.png`. `X-Frame-Seq` names the frame.',
      tag: 'web',
      auth: 'v1',
      query: frameQuery,
      check: { query: queryCheck(frameQuery) },
      responses: {
        200: { description: 'The PNG.', content: { 'image/png': 'binary' } },
        400: error('A bad name or a rectangle outside the frame.'),
        503: error('Capture is offline.'),
      },
    },
  ];
  return entries.map(node);
}

export const PAGES: Endpoint[] = [
  {
    ...e('GET', '/', 'read', 'read node status'),
    summary: 'The front door: the node, its reservation, the running job, the latest results',
    description: 'Readable without JavaScript. With `auth.v1_requires_token`, a browser without a session is sent to the sign-in page.',
    tag: 'web',
    auth: 'v1',
    responses: {
      200: page('The page.'),
      303: redirect('No session (only with `auth.v1_requires_token`, for a browser): to `/app/sign-in?next=/`.'),
      403: error('No token or session (only with `auth.v1_requires_token`).'),
      // The contract check folds dot segments as clients do (`/api/v1/jobs/../../..` is `/` to it); the daemon routes the raw path.
      404: error('A raw path with dot segments that a client would fold to `/`: no route.'),
      400: pageOrError('On a farm portal: a malformed `labels` filter, said beside the filter box (JSON to a client that does not ask for HTML).'),
    },
    query: labelsQuery,
    // A node has one node and no labels: it takes the same query (a text) and shows its page.
    check: { query: queryCheck(labelsQuery) },
    portalCheck: { query: queryCheck(labelsQuery) },
  },
  // The farm's queue pages and video wall (src/web/pages/queue.tsx, wall.tsx; docs/video-wall.md).
  {
    ...e('GET', '/app/queue', 'read', 'read the queue', 'portal'),
    summary: 'The queue: every label set with waiting jobs; with `labels`, that set\'s waiting jobs in order and why each waits',
    description:
      'Without `labels`: each label set (the labels jobs were queued with) that has waiting jobs, their number, the highest priority, the oldest, the nodes of the set and why its first job waits. ' +
      'With `labels`: the jobs queued with exactly these labels, in the order they will start (priority, then oldest), who queued each, since when and why it waits; then the last ended ones. docs/queue.md.',
    tag: 'web',
    auth: 'v1',
    query: labelsQuery,
    portalCheck: { query: queryCheck(labelsQuery) },
    responses: { 200: page('The page.'), 400: pageOrError('A malformed `labels`, said beside the filter box (JSON to a client that does not ask for HTML).') },
  },
  {
    ...e('GET', '/app/wall', 'read', 'read node status', 'portal'),
    summary: "The video wall: every node's live thumbnail, state and job",
    description:
      'A tile per node (with `labels`, the nodes with all of them): its picture about once a second while the tile is on screen (over `/app/wall/frames`), its state, its job, its labels; a tile opens the node\'s live view. docs/video-wall.md.',
    tag: 'web',
    auth: 'v1',
    query: labelsQuery,
    portalCheck: { query: queryCheck(labelsQuery) },
    responses: { 200: page('The page.'), 400: pageOrError('A malformed `labels`, said beside the filter box (JSON to a client that does not ask for HTML).') },
  },
  {
    ...e('GET', '/app/wall/frames', 'read', 'read screenshots', 'portal'),
    summary: "The video wall's pictures: the listed nodes' thumbnails as server-sent events",
    description:
      'A stream that stays open: `event: frame` `{"node_id", "seq", "jpeg"}` (a 320-wide JPEG, base64) each time a node\'s picture changes, asked of each node at most once a second whatever the number of walls; ' +
      '`event: nopicture` `{"node_id", "seq", "reason"}` while a node has none (offline, capture down). A wall that reads slowly skips pictures.',
    tag: 'web',
    auth: 'v1',
    query: wallFramesQuery,
    portalCheck: { query: queryCheck(wallFramesQuery) },
    responses: {
      200: { description: 'The stream.', content: { 'text/event-stream': 'text' } },
      400: error('No `nodes`, too many, or a node id that is not registered.'),
      503: error('Too many walls open on this portal (200); retry after Retry-After.'),
    },
  },
  // Results list and job page (src/web/pages/results.tsx, job.tsx).
  {
    ...e('GET', '/app/results', 'read', 'read results'),
    summary: 'The results list: search, sort, live rows',
    description: 'At most 2,000 rows, as the API; a note says when more matched. A bad filter, sort or tz is a 400 page with the error next to the search box.',
    tag: 'web',
    auth: 'v1',
    query: listQuery,
    ...bothSides(listQuery),
    responses: { 200: page('The list.'), 400: pageOrError('The list with the error in the filter, naming the bad term (JSON to a client that does not ask for HTML).') },
  },
  {
    ...e('GET', '/app/results/row', 'read', 'read results'),
    summary: "One result's row of the results list, when it matches a filter",
    description: "What the list's script asks for on `run.finished`: the row (HTML, a `<tr>` in a table) rendered as the list renders it, or 204 when the result does not match `filter`.",
    tag: 'web',
    auth: 'v1',
    query: rowQuery,
    ...bothSides(rowQuery),
    responses: {
      200: page('The row.'),
      204: { description: 'The result does not match the filter.' },
      400: error('A bad filter or tz, or no result_id.'),
      404: error('No such result.'),
      410: error('The result was deleted by retention.'),
    },
  },
  // The result page (src/web/pages/result.tsx).
  {
    ...e('GET', `/app/results${RESULT}`, 'read', 'read results'),
    summary: 'Result page of a result (the v1/v2 triage_url)',
    description:
      'The video beside the run log on one clock, the failure, the end screenshot, failed matches, the artifacts as a tree, tags, ' +
      '"run this test case again" and the other runs of the test case (docs/portal.md). Of a run in progress: a page that reloads ' +
      '(`Refresh: 5`) until the result is recorded. Open like v1 (a token only with `auth.v1_requires_token`).',
    tag: 'web',
    auth: 'v1',
    params: PAGE_RESULT_PARAMS,
    query: resultPageQuery,
    check: { query: queryCheck(resultPageQuery) },
    responses: { 200: page('The page.'), 400: error('Unknown tz.'), 403: error('A token is needed (auth.v1_requires_token).'), 404: error('Unknown result_id.'), 410: error('The result was deleted by retention.') },
  },
  {
    ...e('GET', `/app/results${RESULT}/log.vtt`, 'read', 'read logs'),
    summary: "The run log as a WebVTT track on the video's clock",
    description: "The result page's `<track>`: lines with one stamp make one cue, shown until the next stamp; times are seconds from the video's first frame (`video.json`, docs/portal.md).",
    tag: 'web',
    auth: 'v1',
    params: PAGE_RESULT_PARAMS,
    responses: { 200: { description: 'The track.', content: { 'text/vtt': 'text' } }, 403: error('A token is needed (auth.v1_requires_token).'), 404: error('Unknown result_id.'), 410: error('The result was deleted by retention.') },
  },
  e('GET', `/app/results${RESULT}/*rest`, 'read', 'read results', 'portal'),
  {
    ...e('GET', `/app/jobs${JOB}`, 'read', 'read jobs'),
    summary: 'The job page: state, counts, the running test and its log, results, Stop',
    tag: 'web',
    auth: 'v1',
    params: { node: 'Node id of the job_uid.', hex: 'Hex part of the job_uid.', num: 'Job number.' },
    query: jobPageQuery,
    check: { query: queryCheck(jobPageQuery) },
    responses: { 200: page('The page.'), 400: error('A bad tz.'), 404: pageOrError('No such job (JSON to a client that does not ask for HTML).') },
  },
  {
    ...e('GET', '/app/api', 'read', 'read the API reference', 'node'),
    summary: 'The API reference page (HTML)',
    tag: 'web',
    auth: 'v1',
    responses: { 200: page('The reference page, rendered from this document.') },
  },
  {
    ...e('GET', '/app/session', 'read', 'read their session', 'portal'),
    summary: 'Who reads the page: the signed-in user, her CSRF token and role (the portal\'s scripts on a node\'s page)',
    description:
      'A node renders its pages through the portal without the reader\'s name, CSRF token or role; the portal\'s scripts (api.js, live.js) ask here, ' +
      'same origin only, never cached. `role` is null when the reader has none (nobody signed in, or no roles); live.js shows the Power cycle from `manual` up (docs/power.md).',
    tag: 'web',
    auth: 'v1',
    responses: { 200: json(AppSession, 'The reader (every field null when nobody is signed in).') },
  },
  // The audit trail (src/web/pages/audit.tsx).
  {
    ...e('GET', '/app/audit', 'admin', 'read the audit trail'),
    summary: 'The audit trail, with filters (administrators)',
    description: 'The entries of `GET /api/v2/audit`, newest first, with its filters as a form; a signed-in administrator only.',
    tag: 'web',
    auth: 'token',
    query: auditPageQuery,
    ...bothSides(auditPageQuery, 'invalid_filter'),
    responses: { 200: page('The entries.'), 400: pageOrError('A bad filter, said above the form.'), 403: pageOrError('Not an administrator.') },
  },
  // The live view and web remote (manual control). The same three under the node's id (the page reads its
  // picture from there): the farm's portal forwards `/app/nodes/<node_id>/live...` to that node, so one page
  // works on the node and through the portal.
  ...live('/app/live', 'node'),
  ...live('/app/nodes/:node_id/live', 'both'),
];
