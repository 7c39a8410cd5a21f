/**
 * Presenters: stored records -> the JSON objects of the spec, per API
 * version. v1 and v2 share every service; they differ only here and in
 * routing. Every URL and every piece of HTML of an answer is made here.
 */
import { kindOfRecord } from '../core/infrastructure.js';
import type { ArtifactListing, JobRecord, ResultRecord, ResultSummaryFields } from '../core/model.js';
import type { NodeState } from '../core/node.js';
import type { ReservationRecord } from '../core/reservations.js';
import type { ApiVersion } from './context.js';
import { renderMarkdown } from './markdown.js';

export function presentJob(job: JobRecord, base: string, v: ApiVersion) {
  return {
    job_uid: job.job_uid,
    job_url: `${base}/api/${v}/jobs${job.job_uid}`,
    status: job.status,
    start_time: job.start_time,
    end_time: job.end_time,
    result_counts: { ...job.result_counts },
  };
}

/** v1 run_tests also answers the deprecated integer `job_id`. */
export const presentV1RunTests = (job: JobRecord, base: string) => ({ job_id: job.number, ...presentJob(job, base, 'v1') });

export const resultUrl = (r: { result_id: string }, base: string, v: ApiVersion) =>
  v === 'v1' ? `${base}/api/v1/result${r.result_id}` : `${base}/api/v2/results${r.result_id}`;

export const triageUrl = (r: { result_id: string }, base: string) => `${base}/app/results${r.result_id}`;

/**
 * A job's own log (`GET /api/v2/jobs/<job_uid>/log`, not in the spec): a redirect to the log of its run in
 * progress, else of its latest run; empty while it has none. The node's `job.log_url` until its first run starts.
 */
export const jobLogUrl = (job: { job_uid: string }, base: string) => `${base}/api/v2/jobs${job.job_uid}/log`;

/** A job's page (`/app/jobs/<job_uid>`): the node's `job.triage_url` until its first run starts. */
export const jobPageUrl = (job: { job_uid: string }, base: string) => `${base}/app/jobs${job.job_uid}`;

export function presentResultSummary(r: ResultSummaryFields, base: string, v: ApiVersion) {
  return {
    result_id: r.result_id,
    result_url: resultUrl(r, base, v),
    ...(v === 'v2' ? { triage_url: triageUrl(r, base) } : {}),
    job_uid: r.job_uid,
    start_time: r.start_time,
    end_time: r.end_time,
    test_case: r.test_case,
    test_pack_sha: r.test_pack_sha,
    result: r.result,
    failure_reason: r.failure_reason,
  };
}

/** The stbt checks' records a run writes in its result folder (python/stbt_core/_checks.py). */
export const CHECKS_FILE = 'checks.jsonl';

export function presentResultDetail(r: ResultRecord, artifacts: ArtifactListing, base: string, v: ApiVersion) {
  return {
    ...presentResultSummary(r, base, v),
    // Not in the spec (COMPAT: an extra field is fine): the node's fault that made the run an error, or null (docs/health-checks.md).
    infrastructure_error: kindOfRecord(r),
    ...(v === 'v2'
      ? {
          test_pack_branch: r.test_pack_branch,
          username: r.username,
          tags: r.tags,
          // Not in the spec: the stbt checks' records (docs/test-scripts.md "Why a check failed"), or null when the run made none.
          checks_url: CHECKS_FILE in artifacts ? `${resultUrl(r, base, v)}/artifacts/${CHECKS_FILE}` : null,
        }
      : {}),
    job_category: r.category,
    traceback: r.traceback,
    artifacts,
  };
}

/** The spec's Reservation object, as one caller sees it (`reserved_by_you` depends on who asks). */
export type Reservation = Omit<ReservationRecord, 'ended'> & {
  message_html: string;
  reserved_by_you: boolean;
};

/** Rendered messages by reservation id: a message never changes, and status is read often. */
const htmlCache = new Map<string, string>();
const HTML_CACHE_SIZE = 500;

function messageHtml(message: string): string {
  let html = htmlCache.get(message);
  if (html === undefined) {
    html = renderMarkdown(message);
    if (htmlCache.size >= HTML_CACHE_SIZE) htmlCache.delete(htmlCache.keys().next().value as string);
    htmlCache.set(message, html);
  }
  return html;
}

export function presentReservation(r: ReservationRecord, caller: string | undefined): Reservation {
  const { reservation_id, node_id, username, start_time, expires, message } = r;
  return { reservation_id, node_id, username, start_time, expires, message, message_html: messageHtml(message), reserved_by_you: caller === username };
}

/** The Job object of the spec plus the two links the node status adds (spec: strings, always). */
export type NodeJob = ReturnType<typeof presentJob> & { log_url: string; triage_url: string };

/** The spec's Node (v2) object. */
export type NodeStatus = Omit<NodeState, 'job' | 'job_result_id' | 'reservation' | 'availability'> & {
  node_url: string;
  job: NodeJob | null;
  reservation: Reservation | null;
};

export function presentNode(n: NodeState, caller: string | undefined, base: string): NodeStatus {
  // availability is the portal's (the node's hello and snapshots); the v2 object says it as not_available_reason.
  const { node_id, job, job_result_id: id, reservation, availability: _availability, ...rest } = n;
  return {
    node_id,
    node_url: `${base}/api/v2/nodes/${encodeURIComponent(node_id)}`,
    ...rest,
    // The run in progress (else the job's latest run): its log and page. Before the job's first run starts
    // (the test pack is being checked out) or for a job stopped before it had one: the job's own log and page.
    job: job && {
      ...presentJob(job, base, 'v2'),
      log_url: id === null ? jobLogUrl(job, base) : `${resultUrl({ result_id: id }, base, 'v2')}/farmhand.log`,
      triage_url: id === null ? jobPageUrl(job, base) : triageUrl({ result_id: id }, base),
    },
    reservation: reservation && presentReservation(reservation, caller),
  };
}
