/**
 * The body of a queued job (`POST /api/v2/jobs`, docs/queue.md): the v2 run_tests body without `node_id`
 * (its schema, V2RunTestsRequest, is reused as it is), plus `labels`, `priority` and `queue_timeout_secs`.
 *
 * `QueuedJobRequest` is the schema the endpoint table and the OpenAPI document take; `parseQueuedJob` is what
 * the store runs, giving the queue's own fields the clear messages of core/queue.ts first.
 */
import { z } from 'zod';
import { FarmError, invalid } from '../../core/errors.js';
import { MAX_PRIORITY, MAX_QUEUE_TIMEOUT_SECS, MIN_PRIORITY, parsePriority, parseQueueTimeout, parseSelector, type Labels } from '../../core/queue.js';
import { parseRunRequest, type RunRequest, type RunTestsBody } from '../../core/runRequest.js';
import { V2RunTestsRequest } from '../../http/openapi/schemas.js';

/** The run_tests part: the v2 body as run_tests takes it, without the node (the queue picks it). */
const RunPart = V2RunTestsRequest.omit({ node_id: true });

export const QueuedJobRequest = RunPart.extend({
  labels: z.record(z.string(), z.string()).meta({ description: 'The labels a node must all have, e.g. {"device": "roku-ultra"}.' }),
  priority: z.number().int().min(MIN_PRIORITY).max(MAX_PRIORITY).nullish().meta({ description: 'From 0 (lowest) to 100 (highest); default 50.' }),
  queue_timeout_secs: z.number().int().min(1).max(MAX_QUEUE_TIMEOUT_SECS).nullish().meta({ description: 'Give up (state expired) if no node took the job within this; default: wait.' }),
}).meta({ id: 'QueuedJobRequest' });

/** What the queue keeps of a queued job's request. */
export interface ParsedQueuedJob {
  labels: Labels;
  priority: number;
  queue_timeout_secs: number | null;
  /** The run_tests body sent to the node, without node_id (added at start); tags and defaults as run_tests gives them. */
  run: RunRequest;
}

const QUEUE_FIELDS = new Set(['labels', 'priority', 'queue_timeout_secs']);

/** A request body checked: the queue's fields first (their own messages), then the run_tests fields by the v2 schema. */
export function parseQueuedJob(body: unknown): ParsedQueuedJob {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('the request body must be a JSON object: {"labels": {...}, "test_pack_revision": ..., "test_cases": [...]}');
  const b = body as Record<string, unknown>;
  if ('node_id' in b) throw invalid('a queued job names labels, not a node: to run on one named node use POST /api/v2/run_tests');
  const labels = parseSelector(b.labels);
  const priority = parsePriority(b.priority);
  const timeout = parseQueueTimeout(b.queue_timeout_secs);
  const rest = Object.fromEntries(Object.entries(b).filter(([k]) => !QUEUE_FIELDS.has(k)));
  const r = RunPart.safeParse(rest);
  if (!r.success) throw new FarmError('invalid_request', r.error.issues[0]?.message ?? 'the run_tests fields are not valid');
  return { labels, priority, queue_timeout_secs: timeout, run: parseRunRequest(rest as unknown as RunTestsBody, 'v2') };
}
