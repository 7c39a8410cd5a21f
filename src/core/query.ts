/**
 * Results queries: the `filter`, `sort` and `tz` parameters of GET
 * /api/v{1,2}/results, validated and compiled into a {@link ResultQuery}.
 * Pure: no I/O. The grammar, with examples, is in docs/filters.md.
 *
 * Dates in a filter are compared with `start_time` as strings: records carry
 * canonical UTC ISO times (`2026-11-23T09:19:15.123Z`, see model.ts), which
 * sort lexically in time order, so a date term costs one string comparison
 * per record instead of a `Date.parse`.
 */
import { DateTime, FixedOffsetZone, IANAZone, type Zone } from 'luxon';
import { FarmError } from './errors.js';
import { compileGlob, compileSubstring } from './glob.js';
import type { ResultRecord } from './model.js';

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

/**
 * One parsed filter term: what {@link ResultQuery.predicate} tests, as data.
 * Dates are already resolved to a half-open span of canonical UTC ISO strings.
 */
export type FilterTerm = { negated: boolean } & (
  | { kind: 'job'; uid: string }
  | { kind: 'testcase'; value: string }
  | { kind: 'category'; value: string }
  | { kind: 'result'; value: 'pass' | 'fail' | 'error' }
  | { kind: 'date'; lo: string | undefined; hi: string | undefined }
  | { kind: 'text'; value: string }
);

/** Default and maximum number of results one query returns (spec: "at most the first 2,000"). */
export const DEFAULT_RESULT_LIMIT = 2000;

/**
 * Bounds on one filter, so that evaluating it stays cheap: every term costs
 * time linear in the record (see glob.ts), and there are at most this many
 * terms of at most this length. Real filters are a few terms of tens of
 * characters.
 */
export const FILTER_LIMITS = { length: 4096, terms: 32, termLength: 1024 } as const;

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
  const predicate = compileFilter(terms);
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

// ---------------------------------------------------------------- tokenizer

interface Term {
  /** The term as written, for error messages. */
  text: string;
  negated: boolean;
  /** Lower-cased key, or undefined for free text. */
  key: string | undefined;
  value: string;
}

const badTerm = (text: string, why: string): FarmError =>
  new FarmError('invalid_filter', `filter: bad term "${text}": ${why}`, { term: text });

/** Split on unquoted whitespace; `"..."` holds spaces, with `\"` and `\\` as the only escapes. */
function tokenize(filter: string): Term[] {
  if (filter.length > FILTER_LIMITS.length) {
    throw new FarmError('invalid_filter', `filter: longer than ${FILTER_LIMITS.length} characters (${filter.length}); the limit is ${FILTER_LIMITS.length}`, { limit: 'length' });
  }
  const terms: Term[] = [];
  let i = 0;
  while (i < filter.length) {
    if (/\s/.test(filter[i]!)) { i++; continue; }
    const start = i;
    let key: string | undefined;
    let value = '';
    while (i < filter.length && !/\s/.test(filter[i]!)) {
      const c = filter[i]!;
      if (c === '"') {
        const end = readQuoted(filter, i);
        if (end.next < 0) throw badTerm(filter.slice(start), 'unterminated quote');
        value += end.text;
        i = end.next;
      } else if (c === ':' && key === undefined) {
        key = value;
        value = '';
        i++;
      } else {
        value += c;
        i++;
      }
    }
    const text = filter.slice(start, i);
    if (text.length > FILTER_LIMITS.termLength) {
      throw badTerm(`${text.slice(0, 40)}...`, `longer than ${FILTER_LIMITS.termLength} characters; the limit is ${FILTER_LIMITS.termLength} per term`);
    }
    terms.push(makeTerm(text, key, value));
    if (terms.length > FILTER_LIMITS.terms) {
      throw new FarmError('invalid_filter', `filter: more than ${FILTER_LIMITS.terms} terms; the limit is ${FILTER_LIMITS.terms}`, { limit: 'terms' });
    }
  }
  return terms;
}

function readQuoted(s: string, open: number): { text: string; next: number } {
  let text = '';
  for (let i = open + 1; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"') return { text, next: i + 1 };
    if (c === '\\' && (s[i + 1] === '"' || s[i + 1] === '\\')) text += s[++i];
    else text += c;
  }
  return { text, next: -1 };
}

function makeTerm(text: string, key: string | undefined, value: string): Term {
  // `-` negates only when written unquoted at the very start of the term.
  const negated = text.startsWith('-');
  if (negated) {
    if (key !== undefined) key = key.slice(1);
    else value = value.slice(1);
  }
  if (text === '-') throw badTerm(text, 'nothing after "-"');
  return { text, negated, key: key?.toLowerCase(), value };
}

// ---------------------------------------------------------------- compiling

type Test = (r: ResultRecord) => boolean;

/** Parse a filter into its terms; throws `FarmError('invalid_filter')` naming the first bad term. */
export function parseFilter(filter: string, tz: string, now: Date): FilterTerm[] {
  return tokenize(filter).map((t) => parseTerm(t, tz, now));
}

function compileFilter(terms: FilterTerm[]): Test {
  const tests = terms.map((t) => {
    const test = compileTerm(t);
    return t.negated ? (r: ResultRecord) => !test(r) : test;
  });
  if (tests.length === 0) return () => true;
  if (tests.length === 1) return tests[0]!;
  if (tests.length === 2) {
    const [a, b] = tests as [Test, Test];
    return (r) => a(r) && b(r);
  }
  return (r) => tests.every((t) => t(r));
}

function parseTerm(t: Term, tz: string, now: Date): FilterTerm {
  const negated = t.negated;
  if (t.key === undefined) {
    if (t.value === '') throw badTerm(t.text, 'empty text');
    return { negated, kind: 'text', value: t.value };
  }
  if (t.value === '') throw badTerm(t.text, `no value after "${t.key}:"`);
  const v = t.value;
  switch (t.key) {
    case 'job':
      return { negated, kind: 'job', uid: '/' + v.replace(/^\/+|\/+$/g, '') };
    case 'testcase':
      return { negated, kind: 'testcase', value: v };
    case 'category':
      return { negated, kind: 'category', value: v };
    case 'result': {
      const want = v.toLowerCase();
      if (want !== 'pass' && want !== 'fail' && want !== 'error') throw badTerm(t.text, 'result is pass, fail or error');
      return { negated, kind: 'result', value: want };
    }
    case 'date':
      return { negated, kind: 'date', ...dateSpan(t, tz, now) };
    default:
      throw badTerm(t.text, `unknown key "${t.key}" (keys: job, testcase, category, result, date; quote free text that holds ":")`);
  }
}

function compileTerm(t: FilterTerm): Test {
  switch (t.kind) {
    case 'job': {
      const uid = t.uid;
      return (r) => r.job_uid === uid;
    }
    case 'testcase':
      return testCaseTerm(t.value);
    case 'category': {
      const v = t.value;
      return (r) => r.category === v;
    }
    case 'result': {
      const want = t.value;
      return (r) => r.result === want;
    }
    case 'date':
      return between(t.lo, t.hi);
    case 'text':
      return freeText(t.value);
  }
}

/**
 * Exact full name; `*` matches any run of characters (`testcase:*::test_login*`).
 * Matched without regular expressions, in time linear in the name (glob.ts).
 */
function testCaseTerm(v: string): Test {
  if (!v.includes('*')) return (r) => r.test_case === v;
  const match = compileGlob(v);
  return (r) => match(r.test_case);
}

/** Case-insensitive substring of test_case, failure_reason, category, job_uid or result_id; linear (glob.ts). */
function freeText(value: string): Test {
  const has = compileSubstring(value);
  return (r) =>
    has(r.test_case) || (r.failure_reason !== null && has(r.failure_reason)) ||
    has(r.category) || has(r.result_id);
}

// ---------------------------------------------------------------- dates

/** Half-open span of instants [lo, hi) a written date stands for, as canonical ISO strings. */
interface Span { lo: string; hi: string }

function dateSpan(t: Term, tz: string, now: Date): { lo: string | undefined; hi: string | undefined } {
  const v = t.value;
  const range = v.indexOf('..');
  if (range >= 0) {
    const from = v.slice(0, range).trim();
    const to = v.slice(range + 2).trim();
    if (from === '' && to === '') throw badTerm(t.text, 'a range needs at least one end');
    const lo = from === '' ? undefined : parseSpan(t, from, tz, now).lo;
    const hi = to === '' ? undefined : parseSpan(t, to, tz, now).hi;
    return { lo, hi };
  }
  const m = /^(>=|<=|>|<|=)?(.*)$/s.exec(v)!;
  const span = parseSpan(t, m[2]!.trim(), tz, now);
  switch (m[1]) {
    case '>': return { lo: span.hi, hi: undefined };
    case '>=': return { lo: span.lo, hi: undefined };
    case '<': return { lo: undefined, hi: span.lo };
    case '<=': return { lo: undefined, hi: span.hi };
    default: return { lo: span.lo, hi: span.hi };
  }
}

function between(lo: string | undefined, hi: string | undefined): Test {
  return (r) => {
    const s = isCanonical(r.start_time) ? r.start_time : canonical(r.start_time);
    return (lo === undefined || s >= lo) && (hi === undefined || s < hi);
  };
}

const isCanonical = (s: string): boolean => s.length === 24 && s.charCodeAt(23) === 90 && s.charCodeAt(10) === 84;
const canonical = (s: string): string => {
  const ms = Date.parse(s);
  return Number.isNaN(ms) ? '' : new Date(ms).toISOString();
};

const DATE_RE =
  /^(\d{4})-(\d{2})-(\d{2})(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?\s*([Zz]|[+-]\d{2}(?::?\d{2})?)?)?$/;

/** A written date or date-time as the span its precision covers: a day, a minute, a second or a millisecond. */
function parseSpan(t: Term, text: string, tz: string, now: Date): Span {
  const keyword = relativeSpan(text.toLowerCase(), tz, now);
  if (keyword) return keyword;
  const m = DATE_RE.exec(text);
  if (!m) throw badTerm(t.text, `"${text}" is not a date (YYYY-MM-DD, YYYY-MM-DDThh:mm[:ss[.sss]][Z|±hh:mm], today, yesterday or now)`);
  const [, y, mo, d, h, mi, s, frac, offset] = m;
  const zone: Zone | string = offset ? offsetZone(offset) : tz;
  const start = DateTime.fromObject(
    {
      year: Number(y), month: Number(mo), day: Number(d),
      hour: Number(h ?? 0), minute: Number(mi ?? 0), second: Number(s ?? 0),
      millisecond: frac ? Number(frac.slice(0, 3).padEnd(3, '0')) : 0,
    },
    { zone },
  );
  if (!start.isValid) throw badTerm(t.text, `"${text}" is not a valid date (${start.invalidReason ?? 'out of range'})`);
  const step = frac ? { milliseconds: 1 } : s ? { seconds: 1 } : h ? { minutes: 1 } : { days: 1 };
  return { lo: start.toUTC().toISO(), hi: start.plus(step).toUTC().toISO() };
}

function offsetZone(offset: string): Zone {
  if (/^z$/i.test(offset)) return FixedOffsetZone.utcInstance;
  const m = /^([+-])(\d{2}):?(\d{2})?$/.exec(offset)!;
  const minutes = Number(m[2]) * 60 + Number(m[3] ?? 0);
  return FixedOffsetZone.instance(m[1] === '-' ? -minutes : minutes);
}

function relativeSpan(word: string, tz: string, now: Date): Span | undefined {
  const today = DateTime.fromJSDate(now, { zone: tz }).startOf('day');
  const day = (d: DateTime): Span => ({ lo: d.toUTC().toISO()!, hi: d.plus({ days: 1 }).toUTC().toISO()! });
  if (word === 'today') return day(today);
  if (word === 'yesterday') return day(today.minus({ days: 1 }));
  if (word === 'now') return { lo: now.toISOString(), hi: new Date(now.getTime() + 1).toISOString() };
  return undefined;
}
