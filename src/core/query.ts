/**
 * Results queries: the `filter`, `sort` and `tz` parameters of GET
 * /api/v{1,2}/results, validated and compiled into a {@link ResultQuery}.
 * Pure: no I/O. The grammar, with examples, is in docs/filters.md; its parser
 * and compiler are filter.ts, whose target here is whole records.
 *
 * Dates in a filter are compared with `start_time` as strings: records carry
 * canonical UTC ISO times (`2026-11-23T09:19:15.123Z`, see model.ts), which
 * sort lexically in time order, so a date term costs one string comparison
 * per record instead of a `Date.parse`.
 */
import { IANAZone } from 'luxon';
import { FarmError } from './errors.js';
import { compileFilter, parseFilter, type FilterTarget, type FilterTerm } from './filter.js';
import { compileGlob, compileSubstring } from './glob.js';
import type { ResultRecord } from './model.js';

// The grammar is filter.ts's; these stay importable from here.
export { compileFilter, FILTER_LIMITS, parseFilter, type FilterTarget, type FilterTerm } from './filter.js';

export type SortField = 'category' | 'date' | 'duration' | 'job' | 'testcase' | 'result';
export type SortDir = 'asc' | 'desc';

export interface ResultQuery {
  /** Compiled filter; matches every record when the filter is empty. */
  predicate: (r: ResultRecord) => boolean;
  sort: { field: SortField; dir: SortDir };
  /** IANA zone the dates of the filter were read in. */
  tz: string;
  limit: number;
  /** The filter text as given ('' when none). */
  filter?: string;
  /** The parsed filter, for stores that compile it themselves (the farm's SQL, src/farm/). */
  terms?: FilterTerm[];
}

/** Default and maximum number of results one query returns (spec: "at most the first 2,000"). */
export const DEFAULT_RESULT_LIMIT = 2000;

const SORT_FIELDS: readonly SortField[] = ['category', 'date', 'duration', 'job', 'testcase', 'result'];

/**
 * Validate the query parameters of the results endpoints.
 * Throws `FarmError('invalid_request')` for a bad `sort`/`tz` or a non-string
 * parameter, `FarmError('invalid_filter')` naming the first bad term.
 */
export function parseResultQuery(
  raw: { filter?: unknown; sort?: unknown; tz?: unknown },
  opts: { now?: Date; limit?: number } = {},
): ResultQuery {
  const tz = parseTimeZone(raw.tz);
  const sort = parseSort(raw.sort);
  const filter = stringParam('filter', raw.filter);
  const terms = parseFilter(filter, tz, opts.now ?? new Date());
  const predicate = recordPredicate(terms);
  return { predicate, sort, tz, limit: opts.limit ?? DEFAULT_RESULT_LIMIT, filter, terms };
}

/**
 * The 400 messages of the results queries' `tz`, `sort` and `filter` (a text the API's routes answer from
 * the table of endpoints' query schemas, src/http/endpoints/v1.ts `resultsQuery`, and the pages from the
 * functions below): kept once, here.
 */
export const RESULT_QUERY_MESSAGES = {
  once: (name: string) => `${name}: give the parameter once, as a string`,
  tz: (tz: string) => `tz: unknown time zone "${tz}"; use an IANA name such as UTC or Europe/London`,
  sort: (s: string) => `sort: "${s}" is not <field>:asc or <field>:desc with field one of ${SORT_FIELDS.join(', ')}`,
} as const;

/**
 * Zone names found valid. `IANAZone.isValidZone` builds an `Intl.DateTimeFormat` each time (about 0.2 ms),
 * and a request's `tz` is checked by the route's query schema and read again by the handler: the valid names
 * (a few hundred exist, so the set stays small) are remembered; an invalid name is never stored.
 */
const VALID_ZONES = new Set<string>(['UTC']);

/** A `tz` text (trimmed; empty: UTC) that names a zone. */
export function isTimeZoneText(raw: string): boolean {
  const tz = raw.trim();
  if (tz === '' || VALID_ZONES.has(tz)) return true;
  if (!IANAZone.isValidZone(tz)) return false;
  // Bounded by the zones that exist, but a case variant (`europe/london`) is valid too: stop remembering at 4,096.
  if (VALID_ZONES.size < 4096) VALID_ZONES.add(tz);
  return true;
}

/** A `sort` text (trimmed; empty: `date:desc`) as a sort, or undefined when it is not one. */
export function sortOfText(raw: string): { field: SortField; dir: SortDir } | undefined {
  const s = raw.trim();
  if (s === '') return { field: 'date', dir: 'desc' };
  const m = /^([a-z]+):(asc|desc)$/.exec(s);
  const field = m?.[1] as SortField | undefined;
  if (!m || !field || !SORT_FIELDS.includes(field)) return undefined;
  return { field, dir: m[2] as SortDir };
}

/** A `tz` parameter: an IANA zone name, `UTC` when absent or empty. */
export function parseTimeZone(raw: unknown): string {
  const tz = stringParam('tz', raw);
  if (tz === '') return 'UTC';
  if (!isTimeZoneText(tz)) throw new FarmError('invalid_request', RESULT_QUERY_MESSAGES.tz(tz));
  return tz;
}

/** A `sort` parameter, `<field>:asc|desc`; `date:desc` when absent or empty. */
export function parseSort(raw: unknown): { field: SortField; dir: SortDir } {
  const s = stringParam('sort', raw);
  const sort = sortOfText(s);
  if (!sort) throw new FarmError('invalid_request', RESULT_QUERY_MESSAGES.sort(s));
  return sort;
}

function stringParam(name: string, raw: unknown): string {
  if (raw === undefined || raw === null) return '';
  if (typeof raw !== 'string') throw new FarmError('invalid_request', RESULT_QUERY_MESSAGES.once(name));
  return raw.trim();
}

// ---------------------------------------------------------------- sorting

/** Rank of an outcome in a `result` sort: pass < fail < error, so `result:desc` puts errors first. */
export const OUTCOME_RANK = { pass: 0, fail: 1, error: 2 } as const;

/** The number part of a job_uid (`/<node>/<hex>/<number>`), compared numerically by a `job` sort. */
export const jobNumber = (uid: string): number => Number(uid.slice(uid.lastIndexOf('/') + 1));

const str = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
/** Date order, the results' natural order: `start_time`, then `result_id`. */
export const compareByDate = (a: ResultRecord, b: ResultRecord): number =>
  (isCanonical(a.start_time) && isCanonical(b.start_time)
    ? str(a.start_time, b.start_time)
    : Date.parse(a.start_time) - Date.parse(b.start_time)) || str(a.result_id, b.result_id);

const PRIMARY: Record<SortField, ((a: ResultRecord, b: ResultRecord) => number) | undefined> = {
  date: undefined,
  duration: (a, b) => a.duration - b.duration,
  job: (a, b) => jobNumber(a.job_uid) - jobNumber(b.job_uid),
  testcase: (a, b) => str(a.test_case, b.test_case),
  category: (a, b) => str(a.category, b.category),
  result: (a, b) => OUTCOME_RANK[a.result] - OUTCOME_RANK[b.result],
};

/**
 * The one comparator of results for a sort: the field, then `start_time`,
 * then `result_id`, all in the sort's direction, so the order is total and
 * stable across requests. `result` ranks pass < fail < error; `job` compares
 * job numbers numerically. The results store keeps its records in
 * {@link compareByDate} order and sorts with this.
 */
export function compareFor(sort: { field: SortField; dir: SortDir }): (a: ResultRecord, b: ResultRecord) => number {
  const primary = PRIMARY[sort.field];
  const asc = primary ? (a: ResultRecord, b: ResultRecord) => primary(a, b) || compareByDate(a, b) : compareByDate;
  return sort.dir === 'asc' ? asc : (a, b) => asc(b, a);
}

// ---------------------------------------------------------------- compiling

type Test = (r: ResultRecord) => boolean;

/** The filter's terms as a test of whole records (the in-memory stores, and the columnar index's fallback). */
export function recordPredicate(terms: readonly FilterTerm[]): Test {
  return compileFilter(terms, RECORDS)!;
}

/** Tests of records; every one is possible, so a filter always compiles. Matched without regular expressions (glob.ts). */
const RECORDS: FilterTarget<Test> = {
  equals: (field, value) => (r) => r[field] === value,
  glob: (field, pattern) => {
    const match = compileGlob(pattern);
    return (r) => match(r[field]);
  },
  result: (want) => (r) => r.result === want,
  startedIn: (lo, hi) => (r) => {
    const s = isCanonical(r.start_time) ? r.start_time : canonical(r.start_time);
    return (lo === undefined || s >= lo) && (hi === undefined || s < hi);
  },
  text: (value) => {
    const has = compileSubstring(value);
    return (r) => has(r.test_case) || (r.failure_reason !== null && has(r.failure_reason)) || has(r.category) || has(r.result_id);
  },
  not: (test) => (r) => !test(r),
  all: (tests) => {
    if (tests.length === 0) return () => true;
    if (tests.length === 1) return tests[0]!;
    if (tests.length === 2) {
      const [a, b] = tests as [Test, Test];
      return (r) => a(r) && b(r);
    }
    return (r) => tests.every((t) => t(r));
  },
};

const isCanonical = (s: string): boolean => s.length === 24 && s.charCodeAt(23) === 90 && s.charCodeAt(10) === 84;
const canonical = (s: string): string => {
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? '' : new Date(ms).toISOString();
};
