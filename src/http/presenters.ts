/**
 * Presenters: stored records -> the JSON objects of the spec, per API
 * version. v1 and v2 share every service; they differ only here and in
 * routing.
 */
import type { ArtifactListing, JobRecord, ResultRecord } from '../core/model.js';
import type { ApiVersion } from './context.js';

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

export function presentResultSummary(r: ResultRecord, base: string, v: ApiVersion) {
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

export function presentResultDetail(r: ResultRecord, artifacts: ArtifactListing, base: string, v: ApiVersion) {
  return {
    ...presentResultSummary(r, base, v),
    ...(v === 'v2' ? { test_pack_branch: r.test_pack_branch, username: r.username, tags: r.tags } : {}),
    job_category: r.category,
    traceback: r.traceback,
    artifacts,
  };
}
