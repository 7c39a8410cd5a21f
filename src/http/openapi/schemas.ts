/**
 * The bodies of the API as zod schemas: what the server sends (Job, Result,
 * Node, Reservation, the error body, ...) and what it reads. Each schema with
 * an `id` becomes one entry of the document's `components.schemas`; the
 * registry (registry.ts) refers to these by value.
 *
 * Response objects are strict (`additionalProperties: false` in the
 * document): a field the server adds without documenting it fails the suite's
 * contract check, which is the point.
 */
import { INFRASTRUCTURE_KINDS } from '../../core/infrastructure.js';
import { z } from 'zod';
import { STATUS } from '../errors.js';
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
  })
  .meta({ id: 'Node' });

export const TestCaseNames = z.array(z.string()).meta({ id: 'TestCaseNames', description: 'Test case names `<file>::<function>`.' });

export const User = z.object({ login: z.string() }).meta({ id: 'User' });

// --- Requests. The server's own checks (core/runRequest.ts, core/reservations.ts) are the authority; these describe them, and test/unit/openapi-requests.test.ts keeps the two in step.

const testCaseName = patterned(PATTERNS.testCaseName);

const runTestsFields = {
  test_pack_revision: z.string().min(1).max(256).meta({ description: 'Commit SHA, branch, tag or ref name.' }),
  test_cases: z.array(testCaseName).min(1).max(10_000),
  category: patterned(PATTERNS.category).nullish().meta({ description: 'Default `default`. Not empty; no `/`, `:`, `$` or control characters; not starting with `.` or `-`.' }),
  soak: z.enum(['run once', 'run forever']).nullish(),
  shuffle: z.boolean().nullish(),
  remote_control: patterned(PATTERNS.remoteControl).nullish(),
};

export const V1RunTestsRequest = z.looseObject(runTestsFields).meta({ id: 'V1RunTestsRequest' });

const tagName = patterned(PATTERNS.tagName, z.string().max(499));
export const V2RunTestsRequest = z
  .looseObject({ node_id: z.string(), ...runTestsFields, tags: z.record(tagName, z.string().max(499)).nullish() })
  .meta({ id: 'V2RunTestsRequest' });

export const PressRequest = z
  .looseObject({
    key: patterned(PATTERNS.key).meta({ description: 'A key name of the remote control, e.g. KEY_OK.' }),
    test_pack_revision: z.string().nullish(),
    remote_control: z.string().nullish(),
  })
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

const durationSecs = z.number().int().min(1);

export const ReserveRequest = z
  .looseObject({
    node_ids: z.array(z.string().min(1)).min(1),
    message: z.string(),
    duration_secs: durationSecs.nullish(),
    // Farm extensions (docs/farm.md, "Reservations"); a single node ignores them.
    lease_secs: durationSecs.nullish().meta({ description: 'Farm only: end unless extended within this many seconds.' }),
    wait_secs: durationSecs.max(3600).nullish().meta({ description: 'Farm only: wait (first come, first served) up to this long instead of a 409.' }),
  })
  .meta({ id: 'ReserveRequest' });

export const ExtendRequest = z.looseObject({ duration_secs: durationSecs }).meta({ id: 'ExtendRequest' });
export const InterruptRequest = z.looseObject({ message: patterned(PATTERNS.notBlank).meta({ description: 'Not blank; shown to the owner.' }) }).meta({ id: 'InterruptRequest' });

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
// A node's checks (src/service/readiness.ts) and a portal's (src/farm/portal/ops.ts: database, portal_lock).
const checkName = z.enum(['capture', 'test_pack', 'data_dir', 'disk', 'startup', 'database', 'portal_lock']);

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
    via: z.enum(['token', 'session', 'portal', 'cli', 'none']),
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
