/**
 * The table's entries served by the portal alone: the nodes' upload API (node credentials; src/farm/uploadRoutes.ts;
 * not in the OpenAPI document), and the job queue (docs/queue.md; src/farm/queue/routes.ts), an extension of v2:
 * `POST /api/v2/jobs` queues a job for any free node with the given labels, `/api/v2/queue` lists, reads and
 * cancels queued jobs. The queue's bodies and queries are checked here, with the domain's messages (core/queue.ts).
 */
import { z } from 'zod';
import { AVAILABILITY_KINDS } from '../../core/availability.js';
import { FarmError, invalid } from '../../core/errors.js';
import { MAX_PRIORITY, MAX_QUEUE_TIMEOUT_SECS, MIN_PRIORITY, parsePriority, parseQueueTimeout, parseSelector, type Labels } from '../../core/queue.js';
import { parseRunRequest, type RunRequest, type RunTestsBody } from '../../core/runRequest.js';
import { V2RunTestsCheck, V2RunTestsRequest } from '../openapi/schemas.js';
import { queryCheck } from './checks.js';
import { e, error, json, RESULT, type Endpoint } from './entry.js';

// --- The queue's request bodies (docs/queue.md, "A queued job").

const LABELS = z
  .union([z.record(z.string(), z.string()), z.string()])
  .meta({ description: 'The labels a node must all have: `{"device": "roku-ultra"}`, or the text `device=roku-ultra,room=lab2`.' });
const NODE_REFUSED = 'a queued job names labels, not a node: to run on one named node use POST /api/v2/run_tests';

/** The documented body: the v2 run_tests body without `node_id`, plus the queue's fields. */
export const QueuedJobRequest = V2RunTestsRequest.omit({ node_id: true })
  .extend({
    labels: LABELS,
    priority: z.number().int().min(MIN_PRIORITY).max(MAX_PRIORITY).nullish().meta({ description: 'From 0 (lowest) to 100 (highest); default 50.' }),
    queue_timeout_secs: z
      .number()
      .int()
      .min(1)
      .max(MAX_QUEUE_TIMEOUT_SECS)
      .nullish()
      .meta({ description: 'Give up (state `expired`) if no node took the job within this many seconds (at most 7 days); absent or null: wait.' }),
  })
  .meta({ id: 'QueuedJobRequest', description: 'A job for the queue. `node_id` is refused: a queued job names labels; run_tests names a node.' });

/** What the queue keeps of a queued job's request. */
export interface ParsedQueuedJob {
  labels: Labels;
  priority: number;
  queue_timeout_secs: number | null;
  /** The run_tests body sent to the node, without node_id (added at start); tags and defaults as run_tests gives them. */
  run: RunRequest;
}

/** The run_tests part as run_tests checks it (its tags last, by core/runRequest.ts, whose message names the tag). */
const RunPart = V2RunTestsCheck.omit({ node_id: true });
const QUEUE_FIELDS = new Set(['labels', 'priority', 'queue_timeout_secs']);

/** A request body checked: the queue's fields first (their own messages), then the run_tests fields as run_tests checks them. */
export function parseQueuedJob(body: unknown): ParsedQueuedJob {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw invalid('the request body must be a JSON object: {"labels": {...}, "test_pack_revision": ..., "test_cases": [...]}');
  const b = body as Record<string, unknown>;
  if ('node_id' in b) throw invalid(NODE_REFUSED);
  const labels = parseSelector(b.labels);
  const priority = parsePriority(b.priority);
  const timeout = parseQueueTimeout(b.queue_timeout_secs);
  const rest = Object.fromEntries(Object.entries(b).filter(([k]) => !QUEUE_FIELDS.has(k)));
  const r = RunPart.safeParse(rest);
  if (!r.success) throw new FarmError('invalid_request', r.error.issues[0]?.message ?? 'the run_tests fields are not valid');
  return { labels, priority, queue_timeout_secs: timeout, run: parseRunRequest(rest as unknown as RunTestsBody, 'v2') };
}

/** A domain parse as a table check: its message is the 400's (as the maintenance body's, checks.ts). */
const domainCheck = (parse: (v: unknown) => unknown, fallback: string) =>
  z.unknown().superRefine((v, ctx) => {
    try {
      parse(v);
    } catch (err) {
      ctx.addIssue({ code: 'custom', message: err instanceof Error ? err.message : fallback });
    }
  });

const QueuedJobCheck = domainCheck(parseQueuedJob, 'the queued job is not valid');

// --- The queue's answers.

export const QUEUE_STATES = ['queued', 'started', 'cancelled', 'expired', 'failed'] as const;
const WAIT_KINDS = ['no_node', 'offline', 'maintenance', 'unhealthy', 'busy', 'unavailable', 'position', 'starting'] as const;
const time = () => z.string().meta({ description: 'ISO 8601 date-time, e.g. 2026-11-23T09:19:15.123Z' });

export const WaitReason = z
  .object({
    kind: z.enum(WAIT_KINDS),
    message: z.string().meta({ description: 'Why it waits, for people: `all 3 nodes with device=roku are busy (2 running a job, 1 reserved)`.' }),
    matching: z.number().int().min(0).meta({ description: 'How many nodes have all of its labels.' }),
    nodes: z.partialRecord(z.enum(AVAILABILITY_KINDS as [string, ...string[]]), z.number().int().min(0)).meta({ description: 'How many of those nodes are in each availability kind.' }),
    position: z.number().int().min(1).meta({ description: '1 + the waiting jobs ahead of it (queue order) that could take one of the same nodes.' }),
  })
  .meta({ id: 'WaitReason' });

export const QueuedJob = z
  .object({
    queue_id: z.number().int().min(1),
    state: z.enum(QUEUE_STATES).meta({ description: '`queued` (waiting), `started` (given to a node: `job_uid`), `cancelled`, `expired` (its queue timeout), `failed` (a node refused the request).' }),
    labels: z.record(z.string(), z.string()),
    selector: z.string().meta({ description: 'The labels as one text, keys sorted (`device=roku-ultra,room=lab2`): the name of its queue.' }),
    priority: z.number().int().min(MIN_PRIORITY).max(MAX_PRIORITY),
    username: z.string().meta({ description: 'Who queued it; the job runs on their behalf.' }),
    queued_at: time(),
    queue_timeout_secs: z.number().int().nullable(),
    expires_at: time().nullable(),
    request: z.record(z.string(), z.unknown()).meta({ description: 'The run_tests body it starts with (without `node_id`).' }),
    node_id: z.string().nullable().meta({ description: 'The node it started on; while `queued`, the node it is being started on (`waiting.kind` `starting`), else null.' }),
    job_uid: z.string().nullable().meta({ description: 'Once started: the job, at `/api/v2/jobs` + job_uid.' }),
    attempts: z.number().int().min(0).meta({ description: 'Starts tried (a node that could not take it gives it back to the queue, in its place).' }),
    last_error: z.string().nullable(),
    ended_at: time().nullable().meta({ description: 'When it left the queue.' }),
    end_reason: z.string().nullable().meta({ description: '`started`, `cancelled`, `queue_timeout`, or the node`s refusal.' }),
    ended_by: z.string().nullable(),
    waiting: WaitReason.nullable().optional().meta({ description: 'Why it waits (state `queued`); null otherwise.' }),
  })
  .meta({ id: 'QueuedJob' });

// --- The queue's query strings and path parameter.

export interface QueueListQuery {
  selector?: Labels;
  states?: (typeof QUEUE_STATES)[number][];
  limit?: number;
}

/** `labels`, `state` (one or several, comma-separated) and `limit` of `GET /api/v2/queue`; a bad one is a 400 naming it. */
export function parseQueueQuery(q: Record<string, unknown>): QueueListQuery {
  const out: QueueListQuery = {};
  if (typeof q.labels === 'string') out.selector = parseSelector(q.labels, 'labels');
  if (typeof q.state === 'string') {
    const states = q.state.split(',').map((s) => s.trim());
    const bad = states.find((s) => !(QUEUE_STATES as readonly string[]).includes(s));
    if (bad !== undefined) throw invalid(`state: ${JSON.stringify(bad)} is not a state of a queued job (${QUEUE_STATES.join(', ')})`);
    out.states = states as QueueListQuery['states'];
  }
  if (typeof q.limit === 'string') {
    const n = /^[0-9]{1,4}$/.test(q.limit) ? Number(q.limit) : NaN;
    if (!(n >= 1 && n <= 1000)) throw invalid(`limit must be a whole number from 1 to 1000; got ${JSON.stringify(q.limit)}`);
    out.limit = n;
  }
  return out;
}

const QueueQuery = z.object({
  labels: z.string().optional().meta({ description: 'Only the jobs queued with exactly these labels (one queue): `device=roku-ultra,room=lab2`.' }),
  state: z.string().optional().meta({ description: 'Only these states, comma-separated: `queued`, `started`, `cancelled`, `expired`, `failed`. Default: all.' }),
  limit: z.string().optional().meta({ description: 'Ended jobs listed, newest first: 1 to 1000, default 100. Every waiting job is listed.' }),
});
const QueueQueryCheck = queryCheck(QueueQuery).pipe(domainCheck((q) => parseQueueQuery(q as Record<string, unknown>), 'the query string is not valid'));

const QUEUE_ID = /^[1-9][0-9]{0,14}$/;
const QueueIdCheck = z.looseObject({ id: z.string().regex(QUEUE_ID, { error: (i) => `queue_id must be a whole number from 1; got ${JSON.stringify(i.input)}` }) });
const QUEUE_PARAMS = { queue_id: 'The queued job: its `queue_id`.' };

const EXTENSION = 'An extension of v2 (docs/queue.md), on a farm portal only.';

/** The job queue (docs/queue.md): one entry each, mounted on the portal by src/farm/queue/routes.ts. */
const QUEUE: Endpoint[] = [
  {
    ...e('POST', '/api/v2/jobs', 'run', 'queue jobs', 'portal'),
    audit: 'queue.enqueue',
    summary: 'Queue a job for any free node with these labels',
    description:
      `${EXTENSION} Answers at once with the queued job and why it waits. The job starts on the first free node that has all of ` +
      'its labels, highest priority first, then oldest, with this body as a run_tests (the node chosen), on behalf of the caller. ' +
      'A selector no registered node can ever match is refused at once.',
    tag: 'extras',
    auth: 'token',
    body: QueuedJobRequest,
    check: { body: QueuedJobCheck },
    portalCheck: { body: QueuedJobCheck },
    responses: {
      201: json(QueuedJob, 'Queued (`Location`: the job in the queue).'),
      400: error('A bad body: labels malformed or that no node has (or never together), priority out of 0-100, a bad queue_timeout_secs, a `node_id`, a bad run_tests field.'),
    },
  },
  {
    ...e('GET', '/api/v2/queue', 'read', 'read the queue', 'portal'),
    summary: 'The queued jobs, each with why it waits',
    description: `${EXTENSION} Every waiting job in queue order (highest priority, then oldest), then the newest ended ones.`,
    tag: 'extras',
    auth: 'token',
    query: QueueQuery,
    portalCheck: { query: QueueQueryCheck },
    responses: { 200: json(z.array(QueuedJob), 'The jobs.') },
  },
  {
    ...e('GET', '/api/v2/queue/:id', 'read', 'read the queue', 'portal'),
    summary: 'One queued job, with why it waits',
    description: EXTENSION,
    tag: 'extras',
    auth: 'token',
    params: QUEUE_PARAMS,
    portalCheck: { params: QueueIdCheck },
    responses: { 200: json(QueuedJob, 'The job.'), 404: error('No such queued job.') },
  },
  {
    ...e('DELETE', '/api/v2/queue/:id', 'run', 'cancel queued jobs', 'portal'),
    audit: 'queue.cancel',
    summary: 'Cancel a queued job (who queued it, or an administrator)',
    description: `${EXTENSION} Cancelling a job already cancelled or expired answers it as it is.`,
    tag: 'extras',
    auth: 'token',
    params: QUEUE_PARAMS,
    portalCheck: { params: QueueIdCheck },
    responses: {
      200: json(QueuedJob, 'Cancelled (or had already left the queue without starting).'),
      403: error("Another user's job, and the caller is not an administrator."),
      404: error('No such queued job.'),
      409: error('It has started (stop the job named instead), or is being started at this instant (retry).'),
    },
  },
];

export const FARM: Endpoint[] = [
  e('GET', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('PUT', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('POST', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('DELETE', `/farm/v1/results${RESULT}/files/*path`, 'node', 'upload results', 'portal'),
  e('PUT', `/farm/v1/results${RESULT}/record`, 'node', 'upload results', 'portal'),
  e('POST', `/farm/v1/results${RESULT}/complete`, 'node', 'upload results', 'portal'),
  ...QUEUE,
];
