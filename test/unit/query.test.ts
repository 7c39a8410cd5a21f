// The results query parameters: filter grammar (docs/filters.md), sort and tz.
import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import type { ResultRecord } from '../../src/core/model.js';
import { compileGlob, compileSubstring, type StepCounter } from '../../src/core/glob.js';
import { compareFor, FILTER_LIMITS, parseResultQuery, parseSort, parseTimeZone } from '../../src/core/query.js';

function rec(over: Partial<ResultRecord> & { start_time: string }): ResultRecord {
  const job = over.job_uid ?? '/node-1/ab12/7';
  const stamp = over.start_time.slice(0, 19).replace('T', '_').replaceAll(':', '.');
  return {
    result_id: `${job}/${stamp}`,
    job_uid: job,
    test_case: 'tests/menu.py::test_open_menu',
    test_pack_sha: 'f'.repeat(40),
    test_pack_branch: 'main',
    category: 'default',
    username: 'ci',
    tags: {},
    end_time: over.start_time,
    duration: 10,
    result: 'pass',
    failure_reason: null,
    traceback: null,
    ...over,
  };
}

const A = rec({ start_time: '2026-11-19T23:30:00.000Z', test_case: 'tests/menu.py::test_open_menu', category: 'nightly', duration: 30 });
const B = rec({
  start_time: '2026-11-20T09:59:59.500Z', job_uid: '/node-1/ab12/8', test_case: 'tests/epg.py::test_guide',
  result: 'fail', failure_reason: 'AssertionError: Guide did not open', duration: 5,
});
const C = rec({ start_time: '2026-11-20T10:00:00.000Z', job_uid: '/node-1/ab12/8', test_case: 'tests/epg.py::test_guide', result: 'error', failure_reason: 'RuntimeError: capture lost', duration: 50 });
const D = rec({ start_time: '2026-11-20T10:00:00.999Z', job_uid: '/node-1/ab12/10', test_case: 'tests/menu.py::test_open_menu_fast', category: 'my category' });
const E = rec({ start_time: '2026-11-21T00:00:00.000Z', job_uid: '/node-1/ab12/10', test_case: 'tests/menu.py::test_open_menu' });
const ALL = [A, B, C, D, E];

/** Result ids (shortened to their letter) that the filter selects, in input order. */
function select(filter: string, tz?: string, now?: Date): string[] {
  const q = parseResultQuery({ filter, tz }, { now });
  return ALL.filter(q.predicate).map((r) => 'ABCDE'[ALL.indexOf(r)]!);
}

function expectFarmError(fn: () => unknown, code: string, mentions?: string): FarmError {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(FarmError);
    expect((e as FarmError).code).to.equal(code);
    if (mentions) expect((e as FarmError).message).to.contain(mentions);
    return e as FarmError;
  }
  throw new Error('expected a FarmError');
}

describe('parseResultQuery: filter', () => {
  it('spec: filter defaults to "none (all results)"; limit defaults to 2000', () => {
    const q = parseResultQuery({});
    expect(ALL.filter(q.predicate)).to.have.length(5);
    expect(q.limit).to.equal(2000);
    expect(parseResultQuery({}, { limit: 5 }).limit).to.equal(5);
  });

  it('spec: "a filter job:<job_uid> selects the results of one job", with or without the leading /', () => {
    expect(select('job:/node-1/ab12/8')).to.deep.equal(['B', 'C']);
    expect(select('job:node-1/ab12/8')).to.deep.equal(['B', 'C']);
    expect(select('job:/node-1/ab12/1')).to.deep.equal([]);
  });

  it('testcase:<name> matches the full file::func name exactly, not a longer name', () => {
    expect(select('testcase:tests/menu.py::test_open_menu')).to.deep.equal(['A', 'E']);
  });

  it('testcase: with * matches any run of characters', () => {
    expect(select('testcase:*::test_open_menu*')).to.deep.equal(['A', 'D', 'E']);
    expect(select('testcase:tests/epg.py::*')).to.deep.equal(['B', 'C']);
  });

  it('category:<name> is exact; a quoted value holds spaces', () => {
    expect(select('category:nightly')).to.deep.equal(['A']);
    expect(select('category:night')).to.deep.equal([]);
    expect(select('category:"my category"')).to.deep.equal(['D']);
  });

  it('result:pass|fail|error', () => {
    expect(select('result:fail')).to.deep.equal(['B']);
    expect(select('result:error')).to.deep.equal(['C']);
    expect(select('result:pass')).to.deep.equal(['A', 'D', 'E']);
  });

  it('terms are ANDed; - negates a term', () => {
    expect(select('testcase:tests/epg.py::test_guide result:fail')).to.deep.equal(['B']);
    expect(select('-result:pass')).to.deep.equal(['B', 'C']);
    expect(select('job:/node-1/ab12/10 -category:"my category"')).to.deep.equal(['E']);
  });

  it('free text matches case-insensitively in test_case, failure_reason, category and ids', () => {
    expect(select('GUIDE')).to.deep.equal(['B', 'C']);
    expect(select('"did not open"')).to.deep.equal(['B']);
    expect(select('nightly')).to.deep.equal(['A']);
    expect(select('ab12/10')).to.deep.equal(['D', 'E']);
    expect(select('-epg')).to.deep.equal(['A', 'D', 'E']);
  });

  it('quotes take \\" and \\\\ escapes', () => {
    const q = parseResultQuery({ filter: 'category:"say \\"hi\\" \\\\o/"' });
    expect(q.predicate(rec({ start_time: '2026-11-20T00:00:00.000Z', category: 'say "hi" \\o/' }))).to.equal(true);
    expect(q.predicate(rec({ start_time: '2026-11-20T00:00:00.000Z', category: 'say hi' }))).to.equal(false);
  });

  it('spec: "tz ... default zone for dates in filter that carry no explicit zone"', () => {
    expect(select('date:2026-11-20')).to.deep.equal(['B', 'C', 'D']);
    // 2026-11-20 in New York is 05:00Z to 05:00Z next day.
    expect(select('date:2026-11-20', 'America/New_York')).to.deep.equal(['B', 'C', 'D', 'E']);
    // In Tokyo (UTC+9) the 20th ends at 15:00Z; A (23:30Z on the 19th) is on the 20th there.
    expect(select('date:2026-11-20', 'Asia/Tokyo')).to.deep.equal(['A', 'B', 'C', 'D']);
  });

  it('date operators on a day: > after the day, >= from its start, < before it, <= to its end', () => {
    expect(select('date:>2026-11-20')).to.deep.equal(['E']);
    expect(select('date:>=2026-11-20')).to.deep.equal(['B', 'C', 'D', 'E']);
    expect(select('date:<2026-11-20')).to.deep.equal(['A']);
    expect(select('date:<=2026-11-20')).to.deep.equal(['A', 'B', 'C', 'D']);
    expect(select('date:=2026-11-20')).to.deep.equal(['B', 'C', 'D']);
  });

  it('COMPAT: testcase:<name> date:>"<date-time>" (a date-time covers its second; > is after it)', () => {
    expect(select('testcase:tests/epg.py::test_guide date:>"2026-11-20 09:59:59"')).to.deep.equal(['C']);
    expect(select('date:>"2026-11-20 10:00:00"')).to.deep.equal(['E']);
    expect(select('date:"2026-11-20 10:00:00"')).to.deep.equal(['C', 'D']);
    expect(select('date:>="2026-11-20T10:00"')).to.deep.equal(['C', 'D', 'E']);
    expect(select('date:<2026-11-20T10:00:00.999Z')).to.deep.equal(['A', 'B', 'C']);
  });

  it('date-times with Z or an offset ignore tz; without one they are read in tz', () => {
    expect(select('date:>=2026-11-20T11:00+01:00', 'Asia/Tokyo')).to.deep.equal(['C', 'D', 'E']);
    expect(select('date:>=2026-11-20T10:00Z', 'Asia/Tokyo')).to.deep.equal(['C', 'D', 'E']);
    expect(select('date:>=2026-11-20T19:00', 'Asia/Tokyo')).to.deep.equal(['C', 'D', 'E']);
    expect(select('date:>=2026-11-20T19:00', 'Etc/UTC')).to.deep.equal(['E']);
    expect(select('date:>=2026-11-20T05:00-0500')).to.deep.equal(['C', 'D', 'E']);
    expect(select('date:>="2026-11-20 11:00 +01"')).to.deep.equal(['C', 'D', 'E']);
    expect(select('date:2026-11-20T09:59:59,5Z')).to.deep.equal(['B']);
  });

  it('a day in tz is its real length across a DST change (23 hours in London on 2026-03-29)', () => {
    const q = parseResultQuery({ filter: 'date:2026-03-29', tz: 'Europe/London' });
    expect(q.predicate(rec({ start_time: '2026-03-29T00:00:00.000Z' }))).to.equal(true);
    expect(q.predicate(rec({ start_time: '2026-03-29T22:59:59.999Z' }))).to.equal(true);
    expect(q.predicate(rec({ start_time: '2026-03-29T23:00:00.000Z' }))).to.equal(false);
  });

  it('records whose start_time is not in canonical form still compare by instant', () => {
    const q = parseResultQuery({ filter: 'date:>="2026-11-20 10:00"' });
    expect(q.predicate(rec({ start_time: '2026-11-20T11:00:00+01:00' }))).to.equal(true);
    expect(q.predicate(rec({ start_time: '2026-11-20T10:59:59+01:00' }))).to.equal(false);
    expect(q.predicate(rec({ start_time: '2026-11-20T10:00:00Z' }))).to.equal(true);
  });

  it('date ranges from..to include both ends; either end may be left open', () => {
    expect(select('date:2026-11-19..2026-11-20')).to.deep.equal(['A', 'B', 'C', 'D']);
    expect(select('date:"2026-11-20 09:00".."2026-11-20 10:00"')).to.deep.equal(['B', 'C', 'D']);
    expect(select('date:2026-11-20T10:00:00.500Z..')).to.deep.equal(['D', 'E']);
    expect(select('date:..2026-11-19')).to.deep.equal(['A']);
  });

  it('today, yesterday and now are read at the given time in tz', () => {
    const now = new Date('2026-11-21T01:00:00.000Z');
    expect(select('date:today', 'UTC', now)).to.deep.equal(['E']);
    expect(select('date:yesterday', 'UTC', now)).to.deep.equal(['B', 'C', 'D']);
    expect(select('date:today', 'America/New_York', now)).to.deep.equal(['B', 'C', 'D', 'E']);
    expect(select('date:<now', 'UTC', now)).to.deep.equal(['A', 'B', 'C', 'D', 'E']);
  });

  it('spec: 400 "invalid filter" - a bad term is invalid_filter naming the term', () => {
    const bad = [
      'colour:red', 'result:flaky', 'date:yesterday-ish', 'date:2026-02-30', 'date:>', 'testcase:',
      'category:"open', '-', 'date:>2026-11-01..2026-11-02', 'date:..', '""', '10:00:00',
    ];
    for (const term of bad) {
      const e = expectFarmError(() => parseResultQuery({ filter: `job:/n/ab12/1 ${term}` }), 'invalid_filter', term);
      expect(e.details?.term, term).to.equal(term);
    }
  });

  it('an unquoted date-time with a space is refused, not half-applied', () => {
    expectFarmError(() => parseResultQuery({ filter: 'date:>2026-11-20 10:00:00' }), 'invalid_filter', '10:00:00');
  });

  it('a repeated filter parameter (an array) is invalid_request', () => {
    expectFarmError(() => parseResultQuery({ filter: ['job:a', 'job:b'] }), 'invalid_request', 'filter');
  });
});

describe('filter matching is linear and bounded (issue 11: a glob took 38 s and blocked every client)', () => {
  // The attack: a dozen stars and a letter, against names that never end in it.
  const attack = `testcase:${'*'.repeat(12)}a`;
  const longName = `tests/${'x'.repeat(400)}.py::test_${'y'.repeat(400)}`;

  it('the attack filter is answered, and right, on a long name', () => {
    const q = parseResultQuery({ filter: attack });
    expect(q.predicate(rec({ start_time: '2026-11-20T00:00:00.000Z', test_case: longName }))).to.equal(false);
    expect(q.predicate(rec({ start_time: '2026-11-20T00:00:00.000Z', test_case: `${longName}a` }))).to.equal(true);
  });

  it('a glob match costs at most 2 x (text + pattern) character comparisons, whatever the stars', () => {
    const patterns = [
      `${'*'.repeat(12)}a`, `*${'a*'.repeat(30)}b`, `*${'x'.repeat(300)}z*`, `tests/*x*x*x*x*x*x*x*x*x*::*y*y*y*y*q`,
      `*${'xy'.repeat(50)}*`, `${'*x'.repeat(200)}*`,
    ];
    const texts = [longName, 'x'.repeat(5000), 'xy'.repeat(3000) + 'x', 'a'.repeat(4000)];
    for (const p of patterns) {
      const match = compileGlob(p);
      for (const t of texts) {
        const n: StepCounter = { steps: 0 };
        match(t, n);
        expect(n.steps, `${p.slice(0, 20)} on ${t.slice(0, 20)}`).to.be.at.most(2 * (t.length + p.length));
      }
    }
  });

  it('a free-text match costs at most 2 x (text + needle) comparisons', () => {
    const has = compileSubstring('a'.repeat(500) + 'b');
    const n: StepCounter = { steps: 0 };
    expect(has('a'.repeat(20_000), n)).to.equal(false);
    expect(n.steps).to.be.at.most(2 * (20_000 + 501));
  });

  it('globs agree with a regular expression on random patterns and names', () => {
    let seed = 7;
    const rnd = (k: number) => ((seed = (seed * 1103515245 + 12345) % 2147483648) % k);
    const word = (len: number, abc: string) => Array.from({ length: len }, () => abc[rnd(abc.length)]).join('');
    for (let i = 0; i < 3000; i++) {
      const p = word(rnd(9), 'ab*');
      const t = word(rnd(12), 'ab');
      const re = new RegExp(`^${p.replaceAll('*', '.*')}$`);
      expect(compileGlob(p)(t), `${p} on ${t}`).to.equal(re.test(t));
    }
  });

  it('free text agrees with a case-insensitive search, non-ASCII letters included', () => {
    const has = compileSubstring('ÉCRAN noir');
    expect(has('tests/x.py: écran NOIR after boot')).to.equal(true);
    expect(has('écran gris')).to.equal(false);
  });

  it('a filter longer than the limit, a term longer than its limit, or too many terms is invalid_filter naming the limit', () => {
    expectFarmError(() => parseResultQuery({ filter: 'a'.repeat(FILTER_LIMITS.length + 1) }), 'invalid_filter', String(FILTER_LIMITS.length));
    expectFarmError(() => parseResultQuery({ filter: `testcase:${'*a'.repeat(FILTER_LIMITS.termLength)}` }), 'invalid_filter', String(FILTER_LIMITS.termLength));
    expectFarmError(() => parseResultQuery({ filter: Array.from({ length: FILTER_LIMITS.terms + 1 }, (_, i) => `t${i}`).join(' ') }), 'invalid_filter', String(FILTER_LIMITS.terms));
    expect(() => parseResultQuery({ filter: Array.from({ length: FILTER_LIMITS.terms }, (_, i) => `t${i}`).join(' ') })).to.not.throw();
  });
});

describe('parseResultQuery: sort and tz', () => {
  it('spec: sort defaults to date:desc and tz to UTC', () => {
    expect(parseResultQuery({}).sort).to.deep.equal({ field: 'date', dir: 'desc' });
    expect(parseResultQuery({}).tz).to.equal('UTC');
  });

  it('spec: sort is <fieldname>:asc|desc with fieldname one of category, date, duration, job, testcase, result', () => {
    for (const field of ['category', 'date', 'duration', 'job', 'testcase', 'result']) {
      expect(parseSort(`${field}:asc`)).to.deep.equal({ field, dir: 'asc' });
      expect(parseSort(`${field}:desc`)).to.deep.equal({ field, dir: 'desc' });
    }
    for (const bad of ['date', 'date:up', 'size:asc', 'DATE:asc', 'date:asc,job:desc', ['date:asc']]) {
      expectFarmError(() => parseResultQuery({ sort: bad }), 'invalid_request', 'sort');
    }
  });

  it('COMPAT: tz takes IANA names such as Etc/UTC; an unknown zone is a 400', () => {
    expect(parseTimeZone('Etc/UTC')).to.equal('Etc/UTC');
    expect(parseTimeZone('Europe/London')).to.equal('Europe/London');
    expect(parseTimeZone(undefined)).to.equal('UTC');
    for (const bad of ['Mars/Olympus', 'UTC+5', ['UTC']]) expectFarmError(() => parseResultQuery({ tz: bad }), 'invalid_request', 'tz');
  });
});

describe('compareFor', () => {
  const ids = (rs: ResultRecord[]) => rs.map((r) => 'ABCDE'[ALL.indexOf(r)]).join('');
  const sorted = (field: Parameters<typeof compareFor>[0]['field'], dir: 'asc' | 'desc') => ids([...ALL].sort(compareFor({ field, dir })));

  it('date sorts by start_time', () => {
    expect(sorted('date', 'asc')).to.equal('ABCDE');
    expect(sorted('date', 'desc')).to.equal('EDCBA');
  });

  it('job sorts by job number numerically (10 after 8), then date', () => {
    expect(sorted('job', 'asc')).to.equal('ABCDE');
    expect(sorted('job', 'desc')).to.equal('EDCBA');
  });

  it('duration, testcase, category and result sort by the field, ties by date', () => {
    expect(sorted('duration', 'asc')).to.equal('BDEAC');
    expect(sorted('duration', 'desc')).to.equal('CAEDB');
    expect(sorted('testcase', 'asc')).to.equal('BCAED');
    expect(sorted('category', 'asc')).to.equal('BCEDA');
    expect(sorted('result', 'asc')).to.equal('ADEBC');
    expect(sorted('result', 'desc')).to.equal('CBEDA');
  });
});
