/**
 * The farm's job queue, the pure part (docs/queue.md): node labels and label selectors, a queued job's
 * priority and queue timeout, the order jobs are served in (highest priority, then oldest), which waiting
 * job goes to which free node, and why a job waits. No database here: the store and the dispatcher are
 * src/farm/queue/.
 *
 * A label is `key=value` (`device=roku-ultra`, `room=lab2`), set on a node by the farm's administrator only.
 * A selector is a set of labels; a node matches when it has all of them.
 */
import type { Availability } from './availability.js';
import { FarmError, invalid } from './errors.js';

export type Labels = Record<string, string>;

/** A label key: lower case, starts with a letter, then letters, digits, `.`, `_`, `-`, `/` (at most 63). */
export const LABEL_KEY = /^[a-z][a-z0-9._/-]{0,62}$/;
/** A label value: letters, digits, `.`, `_`, `-`, `:`, starting with a letter or digit (at most 128). */
export const LABEL_VALUE = /^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$/;
/** At most this many labels on a node or in a selector. */
export const MAX_LABELS = 32;

export const MIN_PRIORITY = 0;
export const MAX_PRIORITY = 100;
/** The priority of a job queued without one: the middle. */
export const DEFAULT_PRIORITY = 50;
/** The longest queue_timeout_secs: 7 days. */
export const MAX_QUEUE_TIMEOUT_SECS = 7 * 86_400;

/** A key and a value checked; `where` names the field in the message. */
export function checkLabel(key: string, value: string, where = 'labels'): void {
  if (!LABEL_KEY.test(key)) throw invalid(`${where}: ${JSON.stringify(key)} is not a label key: lower case letters, digits, ".", "_", "-", "/", starting with a letter, at most 63 characters (e.g. "device")`);
  if (!LABEL_VALUE.test(value)) throw invalid(`${where}: ${key}=${JSON.stringify(value)} is not a label value: letters, digits, ".", "_", "-", ":", starting with a letter or digit, at most 128 characters (e.g. "roku-ultra")`);
}

/** `key=value` (the CLI's argument, a query string's item) as a pair. */
export function parseLabelAssignment(text: string, where = 'labels'): [string, string] {
  const at = text.indexOf('=');
  if (at <= 0) throw invalid(`${where}: ${JSON.stringify(text)} is not key=value (e.g. device=roku-ultra)`);
  const pair: [string, string] = [text.slice(0, at), text.slice(at + 1)];
  checkLabel(pair[0], pair[1], where);
  return pair;
}

/**
 * A selector from a request: an object `{"device": "roku-ultra"}` or the text `device=roku-ultra,room=lab2`.
 * At least one label (a job for "any node of the farm" names a label every node has); keys once each.
 */
export function parseSelector(v: unknown, where = 'labels'): Labels {
  let pairs: [string, unknown][];
  if (typeof v === 'string') pairs = v === '' ? [] : v.split(',').map((item) => parseLabelAssignment(item.trim(), where));
  else if (typeof v === 'object' && v !== null && !Array.isArray(v)) pairs = Object.entries(v);
  else throw invalid(`${where} is required: an object of the labels the node must have, e.g. {"device": "roku-ultra"}`);
  if (pairs.length === 0) throw invalid(`${where} must name at least one label, e.g. {"device": "roku-ultra"}`);
  if (pairs.length > MAX_LABELS) throw invalid(`${where}: at most ${MAX_LABELS} labels`);
  const out: Labels = {};
  for (const [k, value] of pairs) {
    if (typeof value !== 'string') throw invalid(`${where}: the value of ${JSON.stringify(k)} must be a string`);
    checkLabel(k, value, where);
    if (k in out) throw invalid(`${where}: ${k} is given twice`);
    out[k] = value;
  }
  return sortLabels(out);
}

/** The same labels with their keys in order (what is stored and shown). */
export const sortLabels = (l: Labels): Labels => Object.fromEntries(Object.entries(l).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** `device=roku-ultra,room=lab2`: a selector as one text, keys in order (the queue page's name of a label set). */
export const selectorText = (s: Labels): string =>
  Object.entries(sortLabels(s))
    .map(([k, v]) => `${k}=${v}`)
    .join(',');

/** Whether a node with `labels` matches `selector` (has all of its labels). */
export const matches = (labels: Labels, selector: Labels): boolean => Object.entries(selector).every(([k, v]) => labels[k] === v);

/** A priority from a request: absent is the default; else a whole number 0 to 100. */
export function parsePriority(v: unknown): number {
  if (v === undefined || v === null) return DEFAULT_PRIORITY;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < MIN_PRIORITY || v > MAX_PRIORITY) {
    throw invalid(`priority must be a whole number from ${MIN_PRIORITY} (lowest) to ${MAX_PRIORITY} (highest); got ${JSON.stringify(v)}`);
  }
  return v;
}

/** queue_timeout_secs from a request: absent or null waits for ever; else 1 to 7 days' seconds. */
export function parseQueueTimeout(v: unknown): number | null {
  if (v === undefined || v === null) return null;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > MAX_QUEUE_TIMEOUT_SECS) {
    throw invalid(`queue_timeout_secs must be a whole number of seconds from 1 to ${MAX_QUEUE_TIMEOUT_SECS}, or null to wait until a node is free; got ${JSON.stringify(v)}`);
  }
  return v;
}

/**
 * At enqueue: a selector no node of the farm matches is refused at once (never after a timeout). A key no node
 * has is an unknown label; known keys whose combination no node has are named as such.
 */
export function checkSatisfiable(selector: Labels, nodes: ReadonlyMap<string, Labels>): void {
  if ([...nodes.values()].some((l) => matches(l, selector))) return;
  const keys = new Set([...nodes.values()].flatMap((l) => Object.keys(l)));
  const unknownKey = Object.keys(selector).find((k) => !keys.has(k));
  if (unknownKey !== undefined) {
    const known = [...keys].sort().join(', ') || 'none yet: farmhand farm node label <node> key=value';
    throw new FarmError('invalid_request', `unknown label ${JSON.stringify(unknownKey)}: no node of the farm has it (the labels in use: ${known})`, { labels: selector });
  }
  const unknownPair = Object.entries(selector).find(([k, v]) => ![...nodes.values()].some((l) => l[k] === v));
  if (unknownPair) {
    const values = [...new Set([...nodes.values()].map((l) => l[unknownPair[0]]).filter((x): x is string => x !== undefined))].sort();
    throw new FarmError('invalid_request', `unknown label ${unknownPair[0]}=${unknownPair[1]}: no node has it (${unknownPair[0]} is one of ${values.join(', ')})`, { labels: selector });
  }
  throw new FarmError('invalid_request', `no node has all of the labels ${selectorText(selector)}, so this job could never start; GET /api/v2/nodes shows each node's labels`, { labels: selector });
}

/** What the order and the plan need of a waiting job. */
export interface WaitingJob {
  queue_id: number;
  priority: number;
  /** ms since the epoch. */
  queued_at: number;
  labels: Labels;
}

/** The queue's order: highest priority first, then oldest, then the smaller id. */
export function compareWaiting(a: WaitingJob, b: WaitingJob): number {
  return b.priority - a.priority || a.queued_at - b.queued_at || a.queue_id - b.queue_id;
}

/** A node as the planner and the explanation see it. */
export interface QueueNode {
  node_id: string;
  labels: Labels;
  availability: Availability;
}

/**
 * Which waiting job goes to which free node now: in queue order, each job takes the first free node (by node
 * id) that matches it. A job that matches no free node leaves the nodes to the jobs after it.
 */
export function planAssignments(waiting: readonly WaitingJob[], free: readonly QueueNode[]): { job: WaitingJob; node_id: string }[] {
  const left = [...free].sort((a, b) => (a.node_id < b.node_id ? -1 : a.node_id > b.node_id ? 1 : 0));
  const plan: { job: WaitingJob; node_id: string }[] = [];
  for (const job of [...waiting].sort(compareWaiting)) {
    if (left.length === 0) break;
    const i = left.findIndex((n) => matches(n.labels, job.labels));
    if (i < 0) continue;
    plan.push({ job, node_id: left[i]!.node_id });
    left.splice(i, 1);
  }
  return plan;
}

/** Why a job waits, as a kind and the words shown. */
/** Why a job waits; `starting`: it is being started on a node (store.ts explain), the rest from explainWait. */
export type WaitKind = 'no_node' | 'offline' | 'maintenance' | 'unhealthy' | 'busy' | 'unavailable' | 'position' | 'starting';

export interface WaitReason {
  kind: WaitKind;
  message: string;
  /** The nodes that match the job's labels. */
  matching: number;
  /** How many of them are in each state (available, running, reserved, maintenance, ...). */
  nodes: Partial<Record<Availability['kind'], number>>;
  /** 1 = next for a matching node; counts the waiting jobs ahead of it that could take one of the same nodes. */
  position: number;
}

const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;

/** Why `job` waits, given every waiting job (any order) and every node of the farm. */
export function explainWait(job: WaitingJob, waiting: readonly WaitingJob[], nodes: readonly QueueNode[]): WaitReason {
  const mine = nodes.filter((n) => matches(n.labels, job.labels));
  const counts: Partial<Record<Availability['kind'], number>> = {};
  for (const n of mine) counts[n.availability.kind] = (counts[n.availability.kind] ?? 0) + 1;
  const position = 1 + waiting.filter((o) => o.queue_id !== job.queue_id && compareWaiting(o, job) < 0 && mine.some((n) => matches(n.labels, o.labels))).length;
  const base = { matching: mine.length, nodes: counts, position };
  const sel = selectorText(job.labels);
  if (mine.length === 0) return { ...base, kind: 'no_node', message: `no node has the labels ${sel}` };
  const all = (kind: Availability['kind']) => counts[kind] === mine.length;
  const N = mine.length;
  const every = N === 1 ? `the one node with ${sel} is` : `all ${N} nodes with ${sel} are`;
  if (all('offline')) return { ...base, kind: 'offline', message: `${every} offline` };
  if (all('maintenance')) return { ...base, kind: 'maintenance', message: `${every} in maintenance` };
  if (all('unhealthy')) return { ...base, kind: 'unhealthy', message: `${every} unhealthy (its health check failed)`.replace('(its', N === 1 ? '(its' : '(their') };
  const busy = (counts.running ?? 0) + (counts.reserved ?? 0);
  if (busy === N) return { ...base, kind: 'busy', message: `${every} busy (${describe(counts)})` };
  if ((counts.available ?? 0) === 0) return { ...base, kind: 'unavailable', message: `none of the ${plural(N, 'node')} with ${sel} is free: ${describe(counts)}` };
  const ahead = position - 1;
  return { ...base, kind: 'position', message: `position ${position}: ${ahead === 0 ? 'next for a free node' : `${plural(ahead, 'job')} ahead of it for the nodes with ${sel}`}` };
}

const WORDS: Record<Availability['kind'], string> = {
  available: 'free',
  running: 'running a job',
  reserved: 'reserved',
  maintenance: 'in maintenance',
  unhealthy: 'unhealthy',
  offline: 'offline',
  licence_expired: 'licence expired',
};

/** `2 running a job, 1 in maintenance`. */
function describe(counts: Partial<Record<Availability['kind'], number>>): string {
  return (Object.keys(WORDS) as Availability['kind'][])
    .filter((k) => counts[k])
    .map((k) => `${counts[k]} ${WORDS[k]}`)
    .join(', ');
}
