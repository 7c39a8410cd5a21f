/**
 * Shape checks for result records read from disk or handed to `add`, and the
 * index line format. Hand-written rather than a schema library: open() runs
 * this 100,000 times and must stay well under a second.
 */
import type { ResultRecord } from '../../core/model.js';

const OUTCOMES = new Set(['pass', 'fail', 'error']);
const CANONICAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const isStr = (v: unknown): v is string => typeof v === 'string';
const isStrOrNull = (v: unknown): v is string | null => v === null || typeof v === 'string';

/**
 * The record, with `start_time`/`end_time` in canonical UTC form
 * (`2026-11-23T09:19:15.123Z`, what the filter's date terms compare against),
 * or a reason why it is not one.
 */
export function checkRecord(raw: unknown): ResultRecord | string {
  if (typeof raw !== 'object' || raw === null) return 'not an object';
  const r = raw as Record<string, unknown>;
  for (const k of ['result_id', 'job_uid', 'test_case', 'test_pack_sha', 'category', 'username', 'start_time', 'end_time']) {
    if (!isStr(r[k])) return `${k} is not a string`;
  }
  for (const k of ['test_pack_branch', 'failure_reason', 'traceback']) {
    if (!isStrOrNull(r[k])) return `${k} is not a string or null`;
  }
  if (typeof r.duration !== 'number' || !Number.isFinite(r.duration)) return 'duration is not a number';
  if (!isStr(r.result) || !OUTCOMES.has(r.result)) return 'result is not pass, fail or error';
  if (typeof r.tags !== 'object' || r.tags === null || Array.isArray(r.tags) || !Object.values(r.tags).every(isStr)) {
    return 'tags is not an object of strings';
  }
  const start = canonicalTime(r.start_time as string);
  const end = canonicalTime(r.end_time as string);
  if (start === undefined || end === undefined) return 'start_time or end_time is not an ISO 8601 time';
  const rec = raw as ResultRecord;
  return start === rec.start_time && end === rec.end_time ? rec : { ...rec, start_time: start, end_time: end };
}

function canonicalTime(s: string): string | undefined {
  if (CANONICAL.test(s)) return s;
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? undefined : new Date(ms).toISOString();
}

/** One index line: the record with `result_id` first, so a torn line still names its run. */
export function recordLine(r: ResultRecord): string {
  const { result_id, ...rest } = r;
  return JSON.stringify({ result_id, ...rest });
}

/** One tombstone line. */
export const tombstoneLine = (id: string): string => JSON.stringify({ deleted: id });

/** The result id at the start of a (possibly torn) record line. */
export function idOfTornLine(line: string): string | undefined {
  const m = /^\{"result_id":"([^"\\]{1,200})"/.exec(line);
  return m?.[1];
}
