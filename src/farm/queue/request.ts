/**
 * The body of a queued job (`POST /api/v2/jobs`, docs/queue.md): the v2 run_tests body without `node_id`, plus
 * `labels`, `priority` and `queue_timeout_secs`. The schema (`QueuedJobRequest`, published in the OpenAPI document)
 * and the parse (`parseQueuedJob`, which the endpoint table's check and the store both run) live with the endpoint's
 * entry (src/http/endpoints/farm.ts), so that the HTTP layer checks a request with the very rules the store keeps.
 */
export { parseQueuedJob, QueuedJobRequest, type ParsedQueuedJob } from '../../http/endpoints/farm.js';
