/**
 * The results filter grammar (docs/filters.md), once: `parseFilter` reads a
 * filter into its terms (dates resolved in the caller's zone; a bad term is
 * `FarmError('invalid_filter')` naming it), and `compileFilter` turns the
 * terms into a test through a {@link FilterTarget}: the records' predicate
 * (query.ts), the node's columnar index and the portal's SQL each say how to
 * test a field, and this says which field each term tests. Pure: no I/O.
 */
import { DateTime, FixedOffsetZone, type Zone } from 'luxon';
import { FarmError } from './errors.js';

/**
 * One parsed filter term, as data (compileFilter makes it a test).
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

/**
 * Bounds on one filter, so that evaluating it stays cheap: every term costs
 * time linear in the record (see glob.ts), and there are at most this many
 * terms of at most this length. Real filters are a few terms of tens of
 * characters.
 */
export const FILTER_LIMITS = { length: 4096, terms: 32, termLength: 1024 } as const;

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

// ---------------------------------------------------------------- parsing

/** Parse a filter into its terms; throws `FarmError('invalid_filter')` naming the first bad term. */
export function parseFilter(filter: string, tz: string, now: Date): FilterTerm[] {
  return tokenize(filter).map((t) => parseTerm(t, tz, now));
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

// ---------------------------------------------------------------- compiling

/**
 * How a store tests the fields a filter names; `compileFilter` says which term tests which. A method may answer
 * undefined when the store cannot test that (the columnar index for dates it did not keep canonical): the whole
 * filter then compiles to undefined and the store falls back to the records' predicate.
 */
export interface FilterTarget<T> {
  /** The field is exactly the value. */
  equals(field: 'job_uid' | 'test_case' | 'category', value: string): T | undefined;
  /** `test_case` matches a glob whose `*` matches any run of characters (linear in the name: glob.ts). */
  glob(field: 'test_case', pattern: string): T | undefined;
  result(value: 'pass' | 'fail' | 'error'): T | undefined;
  /** `start_time` in [lo, hi) (canonical UTC ISO strings; an end left out is open). */
  startedIn(lo: string | undefined, hi: string | undefined): T | undefined;
  /** Free text: a case-insensitive substring of test_case, failure_reason, category or result_id. */
  text(value: string): T | undefined;
  /** Not the test (a field with no value, failure_reason NULL, counts as "no match"). */
  not(test: T): T;
  /** Every test (none: everything matches). */
  all(tests: T[]): T;
}

/** The filter's terms as one test of the target, or undefined when the target cannot test one of them. */
export function compileFilter<T>(terms: readonly FilterTerm[], target: FilterTarget<T>): T | undefined {
  const tests: T[] = [];
  for (const t of terms) {
    const test = compileTerm(t, target);
    if (test === undefined) return undefined;
    tests.push(t.negated ? target.not(test) : test);
  }
  return target.all(tests);
}

function compileTerm<T>(t: FilterTerm, target: FilterTarget<T>): T | undefined {
  switch (t.kind) {
    case 'job':
      return target.equals('job_uid', t.uid);
    case 'testcase':
      // Exact full name; `*` matches any run of characters (`testcase:*::test_login*`).
      return t.value.includes('*') ? target.glob('test_case', t.value) : target.equals('test_case', t.value);
    case 'category':
      return target.equals('category', t.value);
    case 'result':
      return target.result(t.value);
    case 'date':
      return target.startedIn(t.lo, t.hi);
    case 'text':
      return target.text(t.value);
  }
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
