/**
 * The bodies of the API as zod schemas: what the server sends (Job, Result,
 * Node, Reservation, the error body, ...) and what it reads. Each schema with
 * an `id` becomes one entry of the document's `components.schemas`; the
 * table of endpoints (src/http/endpoints/) refers to these by value.
 *
 * Response objects are strict (`additionalProperties: false` in the
 * document): a field the server adds without documenting it fails the suite's
 * contract check, which is the point.
 */
import { INFRASTRUCTURE_KINDS } from '../../core/infrastructure.js';
import { DEFAULT_LIMITS, MAX_WAIT_SECS, reservationMessages, type ReservationLimits } from '../../core/reservations.js';
import { categoryProblem, MAX_TEST_CASES, RUN_TESTS_MESSAGES } from '../../core/runRequest.js';
import { isTimeZoneText, RESULT_QUERY_MESSAGES, sortOfText } from '../../core/query.js';
import { JUNIT_CLASSNAMES, type JunitClassname } from '../formats/junit.js';
import { z } from 'zod';
import { STATUS } from '../errors.js';
import { FARM_NODE_FIELDS } from './farmNodeFields.js';
import { PATTERNS, type DualPattern } from './patterns.js';

/** ISO 8601 date-time text, as every timestamp of the API. */
const isoTime = () => z.string().meta({ description: 'ISO 8601 date-time, e.g. 2026-11-23T09:19:15.123Z' });
const count = () => z.number().int().min(0);

/** A string zod checks with `p.regex`, published with `p.pattern` (interoperable: patterns.ts). */
const patterned = (p: DualPattern, base: z.ZodString = z.string()) => base.regex(p.regex).meta({ pattern: p.pattern });

/**
 * Codes of the error body: the domain's (core/errors.ts), the two the router answers for methods, and
 * the two the HTTP server answers before routing (daemon.ts answerClientError), and the refusal of a
 * request another web site made a browser send (src/http/crossSite.ts).
 */
export const ERROR_CODES = ['method_not_allowed', 'not_implemented', 'headers_too_large', 'request_timeout', 'cross_site_request', ...Object.keys(STATUS)] as [string, ...string[]];

export const ErrorBody = z
  .object({
    error: z.enum(ERROR_CODES).meta({ description: 'Machine-readable snake_case code; clients check this, never the message.' }),
    message: z.string().meta({ description: 'What went wrong and what to do about it, for people.' }),
  })
  .meta({ id: 'Error', description: 'Every 4xx and 5xx answer of the API (docs/api-notes.md).' });

export const ResultCounts = z
  .object({ pass: count(), fail: count(), error: count(), total: count() })
  .meta({ id: 'ResultCounts', description: '`total` can exceed pass+fail+error while running or after a premature stop.' });

export const Job = z
  .object({
    job_uid: z.string().meta({ description: '`/<node_id>/<hex>/<number>`' }),
    job_url: z.string(),
    status: z.enum(['running', 'exited']),
    start_time: isoTime(),
    end_time: isoTime().nullable(),
    result_counts: ResultCounts,
  })
  .meta({ id: 'Job' });

export const V1RunTestsAnswer = Job.extend({ job_id: z.number().int().meta({ description: 'Deprecated: the number part of job_uid.' }) }).meta({
  id: 'V1RunTestsAnswer',
});

/** What the owner of an interrupted reservation is told, once, with their next answer about it. */
export const InterruptionNotice = z
  .object({ reservation_id: z.number().int(), node_id: z.string(), interrupted_by: z.string(), message: z.string(), time: isoTime() })
  .meta({ id: 'InterruptionNotice' });

const notices = z.array(InterruptionNotice).optional().meta({ description: 'Present only when the caller has notices (docs/reservations.md).' });

export const JobWithNotices = Job.extend({ notices }).meta({ id: 'JobWithNotices' });

/** `await_completion` of a node that has never run a job. */
export const NoJob = z.object({ job_uid: z.null(), status: z.literal('exited') }).meta({ id: 'NoJob' });

export const ArtifactListing = z
  .record(z.string(), z.object({ size: count(), md5: patterned(PATTERNS.md5) }))
  .meta({ id: 'ArtifactListing', description: 'Relative file path -> size in bytes and md5 hex digest.' });

const summaryFields = {
  result_id: z.string().meta({ description: '`<job_uid>/<YYYY-MM-DD>_<hh.mm.ss>`' }),
  result_url: z.string(),
  job_uid: z.string(),
  start_time: isoTime(),
  end_time: isoTime(),
  test_case: z.string(),
  test_pack_sha: z.string(),
  result: z.enum(['pass', 'fail', 'error']),
  failure_reason: z.string().nullable(),
};

export const ResultSummaryV1 = z.object(summaryFields).meta({ id: 'ResultSummaryV1' });
export const ResultSummaryV2 = z.object({ ...summaryFields, triage_url: z.string() }).meta({ id: 'ResultSummaryV2' });

const detailFields = {
  job_category: z.string(),
  traceback: z.string().nullable(),
  artifacts: ArtifactListing,
  infrastructure_error: z
    .enum(INFRASTRUCTURE_KINDS)
    .nullable()
    .meta({ description: 'For an error the node caused rather than the script, its kind (docs/health-checks.md); else null.' }),
};

export const ResultDetailV1 = z.object({ ...summaryFields, ...detailFields }).meta({ id: 'ResultDetailV1' });
export const ResultDetailV2 = z
  .object({
    ...summaryFields,
    triage_url: z.string(),
    test_pack_branch: z.string().nullable(),
    username: z.string(),
    tags: z.record(z.string(), z.string()),
    checks_url: z.string().nullable().meta({
      description:
        "The run's stbt checks (match, wait_for_match, ocr, match_text, wait_for_motion, is_screen_black), one JSON object a line, " +
        'served as the artifact `checks.jsonl`; each names its saved frame (`checks/<n>.jpg`, another artifact). Null when the run recorded none. ' +
        'See docs/test-scripts.md, "Why a check failed".',
    }),
    ...detailFields,
  })
  .meta({ id: 'ResultDetailV2' });

export const Reservation = z
  .object({
    reservation_id: z.number().int(),
    node_id: z.string(),
    username: z.string(),
    start_time: isoTime(),
    expires: isoTime().nullable().meta({ description: 'null: made without duration_secs, never expires.' }),
    message: z.string(),
    message_html: z.string(),
    reserved_by_you: z.boolean(),
    // Farm extension (docs/farm.md, "Reservations"): only on a reservation made with lease_secs.
    lease_secs: z.number().int().optional().meta({ description: 'Farm only: the lease; the reservation ends unless extended within this many seconds.' }),
    lease_until: isoTime().optional().meta({ description: 'Farm only: when the lease runs out unless the holder extends it.' }),
  })
  .meta({ id: 'Reservation' });

export const ReservationsAnswer = z.object({ reservations: z.array(Reservation), notices }).meta({ id: 'ReservationsAnswer' });

export const NodeJob = Job.extend({ log_url: z.string(), triage_url: z.string() }).meta({ id: 'NodeJob' });

export const Node = z
  .object({
    node_id: z.string(),
    node_url: z.string(),
    available: z.boolean(),
    not_available_reason: z.string().nullable(),
    online: z.boolean(),
    config: z.record(z.string(), z.record(z.string(), z.string())).meta({ description: "The node's INI file from the test pack's main branch, by section." }),
    device_type: z.string().nullable(),
    friendly_name: z.string().nullable(),
    external_ip_address: z.string().nullable(),
    local_ip_address: z.string().nullable(),
    geoip_city: z.string().nullable(),
    geoip_country: z.string().nullable(),
    job: NodeJob.nullable(),
    last_used_by: z.string().nullable(),
    last_used_time: isoTime().nullable(),
    licence_expiry: z.string().meta({ description: 'YYYY-MM-DD' }),
    reservation: Reservation.nullable(),
    test_pack_problem: z.string().optional().meta({ description: 'Not in the spec: present only while the test pack cannot be fetched.' }),
    video_problem: z.string().optional().meta({ description: 'Not in the spec: present only while runs are not recorded on video though configured.' }),
    maintenance: z
      .object({ message: z.string(), by: z.string(), since: isoTime() })
      .optional()
      .meta({ description: 'Not in the spec: present only while an administrator holds the node in maintenance (POST /api/v2/nodes/{node_id}/maintenance).' }),
    notices,
    farm: z
      .object({
        connected: z.boolean(),
        offline_reason: z.string().nullable(),
        version: z.string().nullable(),
        last_seen: isoTime().nullable(),
      })
      .optional()
      .meta({ description: "Not in the spec: on a farm portal only (docs/farm.md), the portal's view of the node's connection." }),
    ...FARM_NODE_FIELDS,
  })
  .meta({ id: 'Node' });

export const TestCaseNames = z.array(z.string()).meta({ id: 'TestCaseNames', description: 'Test case names `<file>::<function>`.' });

export const User = z.object({ login: z.string() }).meta({ id: 'User' });

// --- Requests. The routes' bodies are validated with these before their handlers run (src/http/endpoints/
// validate.ts; an entry's `check`), with the messages the hand validators gave (core/runRequest.ts
// RUN_TESTS_MESSAGES): the first problem found is answered, fields in the order below.

const R = RUN_TESTS_MESSAGES;
const testCaseName = patterned(PATTERNS.testCaseName, z.string({ error: (iss) => R.testCase(iss.input) }));

const runTestsFields = {
  test_pack_revision: z.string({ error: R.revision }).min(1).max(256).meta({ description: 'Commit SHA, branch, tag or ref name.' }),
  test_cases: z.array(testCaseName, { error: R.testCases }).min(1).max(MAX_TEST_CASES),
  category: patterned(PATTERNS.category, z.string({ error: (iss) => categoryProblem(iss.input) }))
    .refine((v) => v.isWellFormed())
    .nullish()
    .meta({ description: 'Default `default`. Not empty; no `/`, `:`, `$` or control characters; not starting with `.` or `-`.' }),
  soak: z.enum(['run once', 'run forever'], { error: R.soak }).nullish(),
  shuffle: z.boolean({ error: R.shuffle }).nullish(),
  remote_control: patterned(PATTERNS.remoteControl, z.string({ error: R.remoteControl })).nullish(),
};

export const V1RunTestsRequest = z.looseObject(runTestsFields, { error: R.body }).meta({ id: 'V1RunTestsRequest' });

const NODE_ID_REQUIRED = 'node_id is required (string)';
const tagName = patterned(PATTERNS.tagName, z.string().max(499));
export const V2RunTestsRequest = z
  .looseObject({ node_id: z.string({ error: NODE_ID_REQUIRED }), ...runTestsFields, tags: z.record(tagName, z.string().max(499)).nullish() }, { error: NODE_ID_REQUIRED })
  .meta({ id: 'V2RunTestsRequest' });
/** What the route checks of a v2 run_tests body: all but `tags`, whose rules (the message names the tag) are core/runRequest.ts's, checked last as before. */
export const V2RunTestsCheck = V2RunTestsRequest.omit({ tags: true });

const KEY_REQUIRED = 'key is required: a key name of the remote control, e.g. "KEY_OK"';
export const PressRequest = z
  .looseObject(
    {
      key: patterned(PATTERNS.key, z.string({ error: KEY_REQUIRED })).meta({ description: 'A key name of the remote control, e.g. KEY_OK.' }),
      test_pack_revision: z.string({ error: 'test_pack_revision must be a string' }).nullish(),
      remote_control: z.string({ error: 'remote_control must be a string' }).nullish(),
    },
    // A body that is no object has no key.
    { error: KEY_REQUIRED },
  )
  .meta({ id: 'PressRequest' });

/** A node's maintenance (core/maintenance.ts; docs/api-notes.md, "Maintenance"). */
export const MaintenanceState = z.object({ message: z.string(), by: z.string(), since: isoTime() }).meta({ id: 'MaintenanceState' });

export const MaintenanceRequest = z
  .object({
    on: z.boolean().meta({ description: 'true: put the node in maintenance; false: take it out.' }),
    message: z.string().max(500).nullish().meta({ description: 'Required with on: true: why, and until when (one line).' }),
  })
  .meta({ id: 'MaintenanceRequest' });

export const MaintenanceAnswer = z.object({ node_id: z.string(), maintenance: MaintenanceState.nullable() }).meta({ id: 'MaintenanceAnswer' });

// Reservations: what a node and the farm portal check (the entries' `check` and `portalCheck`, made with
// the limits of core/reservations.ts and its messages), and what the document publishes (the farm's, with
// the extensions a single node ignores).

/**
 * At most `max` UTF-16 code units, as the hand validators counted (`message.length`): zod's `max` counts
 * code points (an emoji is 1, not 2), so it is kept for the document's `maxLength` and the count is checked again.
 */
const atMost = (base: z.ZodString, max: number, message: string) => base.max(max, { error: message }).refine((v) => v.length <= max, { error: message });

/** A whole number of seconds from 1 to `max`, every problem answered with `message`. */
const seconds = (max: number, message: string) => z.number({ error: message }).int().min(1).max(max);

/** The first node id listed twice, if any (the hand validator's: the first whose earlier twin exists). */
const listedTwice = (ids: readonly string[]): string | undefined => ids.find((n, i) => ids.indexOf(n) !== i);

/**
 * The reservation requests' schemas for `limits`: `node` ignores the farm's extensions (lease_secs,
 * wait_secs) as a single node always did; `farm` checks them. Each answers the hand validators' messages.
 */
export function reservationChecks<S extends 'node' | 'farm'>(limits: Pick<ReservationLimits, 'maxMessageChars' | 'maxNodes' | 'maxDurationSecs'>, side: S) {
  const M = reservationMessages(limits);
  const nodeIds = z
    .array(z.string({ error: M.nodeIds }).min(1), { error: M.nodeIds })
    .min(1)
    .max(limits.maxNodes, { error: M.tooManyNodes })
    .refine((ids) => listedTwice(ids) === undefined, { error: (iss) => M.listedTwice(listedTwice(iss.input as string[])!) })
    .meta({ description: `1 to ${limits.maxNodes} node ids, each once.` });
  const extensions = {
    // Farm extensions (docs/farm.md, "Reservations"); a single node ignores them.
    lease_secs: seconds(limits.maxDurationSecs, M.secs('lease_secs', limits.maxDurationSecs))
      .nullish()
      .meta({ description: 'Farm only: end unless extended within this many seconds.' }),
    wait_secs: seconds(MAX_WAIT_SECS, M.secs('wait_secs', MAX_WAIT_SECS))
      .nullish()
      .meta({ description: 'Farm only: wait (first come, first served) up to this long instead of a 409.' }),
  };
  const shape = {
    node_ids: nodeIds,
    message: atMost(z.string({ error: M.message }), limits.maxMessageChars, M.messageLength).meta({ description: 'Shown to other users while the reservation is active.' }),
    duration_secs: seconds(limits.maxDurationSecs, M.duration(true)).nullish().meta({ description: 'Absent or null: no expiry.' }),
  };
  // The farm's shape has the extensions, a node's not: the type says which, from `side`.
  const sided = (side === 'farm' ? { ...shape, ...extensions } : shape) as typeof shape & (S extends 'farm' ? typeof extensions : unknown);
  const reserve = z.looseObject(sided, { error: M.body });
  const extend = z.looseObject({ duration_secs: seconds(limits.maxDurationSecs, M.duration(false)) }, { error: M.duration(false) });
  const interrupt = z.looseObject(
    {
      message: atMost(patterned(PATTERNS.notBlank, z.string({ error: M.interruptMessage })), limits.maxMessageChars, M.messageLength).meta({ description: 'Not blank; shown to the owner.' }),
    },
    { error: M.interruptMessage },
  );
  const id = z.looseObject({ id: z.string().regex(/^[1-9][0-9]{0,14}$/, { error: (iss) => M.id(iss.input) }) });
  return { reserve, extend, interrupt, id };
}

const NODE_RESERVATIONS = reservationChecks(DEFAULT_LIMITS, 'node');
const FARM_RESERVATIONS = reservationChecks(DEFAULT_LIMITS, 'farm');

/** The checks of the reservation entries on a node (`check`) and on the portal (`portalCheck`). */
export const RESERVATION_CHECKS = {
  reserve: { node: { body: NODE_RESERVATIONS.reserve }, portal: { body: FARM_RESERVATIONS.reserve } },
  extend: { node: { params: NODE_RESERVATIONS.id, body: NODE_RESERVATIONS.extend }, portal: { params: FARM_RESERVATIONS.id, body: FARM_RESERVATIONS.extend } },
  end: { node: { params: NODE_RESERVATIONS.id }, portal: { params: FARM_RESERVATIONS.id } },
  interrupt: { node: { params: NODE_RESERVATIONS.id, body: NODE_RESERVATIONS.interrupt }, portal: { params: FARM_RESERVATIONS.id, body: FARM_RESERVATIONS.interrupt } },
};

export const ReserveRequest = FARM_RESERVATIONS.reserve.meta({ id: 'ReserveRequest' });
export type ReserveBody = z.infer<typeof ReserveRequest>; // as the farm's entry checked it (reservationRoutes.ts)
export const ExtendRequest = FARM_RESERVATIONS.extend.meta({ id: 'ExtendRequest' });
export const InterruptRequest = FARM_RESERVATIONS.interrupt.meta({ id: 'InterruptRequest' });

// --- Query strings the routes check (an entry's `check.query`/`portalCheck.query`, which is also its
// documented `query`). Koa gives a parameter sent once as a string, sent more than once as an array.

const Q = RESULT_QUERY_MESSAGES;
/** A parameter given once (a string), refused with `message` otherwise. */
const once = (message: string) => z.string({ error: message });
const tzParam = (description: string) =>
  once(Q.once('tz'))
    .refine(isTimeZoneText, { error: (iss) => Q.tz(String(iss.input).trim()) })
    .optional()
    .meta({ description });

/**
 * The results lists' query (`GET /api/v1/results`, `/api/v2/results`, `.csv`, `.xml`; a v1 job's results
 * without `filter`): `tz`, `sort` and `filter` each once, a known zone, a known sort, in the order the hand
 * checks had. The filter's grammar is the domain's (core/query.ts: `invalid_filter`, naming the term).
 */
export const ResultsQuery = z.object({
  tz: tzParam('IANA time zone for dates in the filter; default UTC.'),
  sort: once(Q.once('sort'))
    .refine((v) => sortOfText(v) !== undefined, { error: (iss) => Q.sort(String(iss.input).trim()) })
    .optional()
    .meta({ description: '`<field>:asc|desc`, field one of category, date, duration, job, testcase, result. Default `date:desc`.' }),
  filter: once(Q.once('filter')).optional().meta({ description: 'Search expression (docs/filters.md); `job:<job_uid>` selects one job.' }),
});

/** results.xml's own parameters besides the list's (src/http/formats/junit.ts). */
export const JunitQuery = ResultsQuery.extend({
  include_tz: z.enum(['true', 'false'], { error: 'include_tz must be "true" or "false"' }).optional().meta({ description: 'Zone offsets in the timestamps; default false.' }),
  junit_classname: z
    .enum(JUNIT_CLASSNAMES as [JunitClassname, ...JunitClassname[]], { error: `junit_classname must be one of ${JUNIT_CLASSNAMES.join(', ')} (default path)` })
    .optional()
    .meta({ description: 'How testcase classnames are made (docs/results-formats.md); default path.' }),
});

/** A v2 log's `tz` (its timestamps rewritten in that zone). */
export const LogTzQuery = z.object({ tz: tzParam('IANA time zone of the timestamps (v2 log) or of the page; default UTC.') });

/** The event stream's resume point, given once; whether it is an event id is the stream's to say (its ids' form). */
export const EventsQuery = z.object({
  last_event_id: once('last_event_id: give it once').optional().meta({ description: 'The id of the last event received (as the Last-Event-ID header).' }),
});

// --- operations (src/http/opsRoutes.ts; docs/operations.md)

export const Health = z
  .object({
    status: z.literal('ok'),
    version: z.string(),
    starting: z.boolean().meta({ description: 'True while the daemon is still starting (recovery, first frame).' }),
    uptime_seconds: count(),
  })
  .meta({ id: 'Health', description: 'The process answers (GET /healthz).' });

const check = z.object({ ok: z.boolean(), detail: z.string() });
// A node's checks (src/service/readiness.ts) and a portal's (src/farm/portal/ops.ts: database, portal_lock or replica_lease).
const checkName = z.enum(['capture', 'test_pack', 'data_dir', 'disk', 'startup', 'database', 'portal_lock', 'replica_lease']);

export const Ready = z
  .object({ ready: z.literal(true), failed: z.array(checkName).max(0), checks: z.partialRecord(checkName, check) })
  .meta({ id: 'Ready', description: 'Every readiness check passed (GET /readyz).' });

export const NotReady = z
  .object({
    error: z.literal('not_ready'),
    message: z.string(),
    ready: z.literal(false),
    failed: z.array(checkName).min(1),
    checks: z.partialRecord(checkName, check),
  })
  .meta({ id: 'NotReady', description: 'Which readiness checks failed and why (`startup` while the daemon is starting).' });

/** One entry of the audit trail (docs/auth.md, "Audit trail"). */
export const AuditEntry = z
  .object({
    id: z.string().meta({ description: 'Opaque; orders the entries. Pass the last one of a page as `before`.' }),
    at: z.string().meta({ description: 'ISO 8601, UTC.' }),
    who: z.string().meta({ description: 'The user; `anonymous` (a v1 caller without a token); `cli` (a command on the machine).' }),
    via: z.enum(['token', 'session', 'portal', 'cli', 'oidc', 'none']),
    token_id: z.string().nullable(),
    from: z.string().nullable().meta({ description: "The caller's address; behind a portal, the address the portal saw." }),
    action: z.string(),
    node: z.string().nullable(),
    target: z.string().nullable(),
    detail: z.record(z.string(), z.unknown()),
    outcome: z.number().int().meta({ description: 'The HTTP status answered; a command\'s exit code.' }),
  })
  .meta({ id: 'AuditEntry' });

export const AuditPage = z
  .object({ entries: z.array(AuditEntry), next_before: z.string().nullable().meta({ description: 'The next page: pass as `before`; null on the last page.' }) })
  .meta({ id: 'AuditPage' });
