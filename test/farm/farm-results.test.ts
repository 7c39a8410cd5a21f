/**
 * The farm's results index against a real throwaway PostgreSQL cluster:
 * migrations, idempotent batched uploads, deletion, and a differential test
 * that answers thousands of random filters and sorts from SQL and from the
 * single node's in-memory index and requires the same rows in the same order.
 */
import { expect } from 'chai';
import pg from 'pg';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { migrate } from '../../src/farm/db/migrate.js';
import { MIGRATIONS } from '../../src/farm/db/migrations.js';
import { FarmResults, compileQuery, globToLike, isoFromPg } from '../../src/farm/results.js';
import { presentResultSummary } from '../../src/http/presenters.js';
import { MemoryIndex } from '../../src/storage/results/memory-index.js';
import { parseResultQuery, type SortField } from '../../src/core/query.js';
import type { ResultRecord } from '../../src/core/model.js';

/** Small seeded PRNG (mulberry32), so a failure can be replayed from its seed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SEED = Number(process.env.FARM_DIFF_SEED ?? 20261123);
const rand = rng(SEED);
const pick = <T>(a: readonly T[]): T => a[Math.floor(rand() * a.length)]!;
const int = (n: number): number => Math.floor(rand() * n);

// Names with the characters LIKE treats specially, quotes, colons, spaces, upper case and non-ASCII.
const TEST_CASES = [
  'tests/epg.py::test_guide', 'tests/epg.py::test_guide_2', 'tests/a_b.py::test_x', 'tests/axb.py::test_x',
  'tests/100%.py::test_full', 'tests/back\\slash.py::test_y', 'tests/Menu.py::test_Énergie',
  'tests/menu.py::test_énergie', 'tests/q"uote.py::test:colon', 'tests/sp ace.py::test_z',
];
const CATEGORIES = ['default', 'smoke', 'Smoke', 'night ly', '50%_off'];
const REASONS = [null, 'AssertionError: boom', 'Timeout after 10s', 'frame 100% black', 'InfrastructureError: capture_lost: gone', 'UPPER_case'];
const NODES = ['node-a', 'node_b', 'stb1'];
const OUTCOMES = ['pass', 'fail', 'error'] as const;

function makeRecords(n: number): ResultRecord[] {
  const base = Date.parse('2026-11-20T00:00:00.000Z');
  const out: ResultRecord[] = [];
  for (let i = 0; i < n; i++) {
    const node = pick(NODES);
    const job = `/${node}/${pick(['ab12', 'cd34'])}/${1 + int(40)}`;
    // Coarse times so many records share a start_time: the result_id tie-break is exercised.
    const start = base + int(4 * 24 * 60) * 60_000 + pick([0, 0, 0, 123]);
    const duration = pick([0.5, 1, 1, 2.25, 30, 61.125]);
    const st = new Date(start).toISOString();
    out.push({
      result_id: `${job}/${st.slice(0, 10)}_${st.slice(11, 19).replace(/:/g, '.')}-${i}`,
      job_uid: job,
      test_case: pick(TEST_CASES),
      test_pack_sha: 'f'.repeat(40),
      test_pack_branch: pick([null, 'main']),
      category: pick(CATEGORIES),
      username: pick(['alice', 'bob']),
      tags: pick<Record<string, string>>([{}, { box: 'x1' }, { b: '2', a: '1' }]),
      start_time: st,
      end_time: new Date(start + duration * 1000).toISOString(),
      duration,
      result: pick(OUTCOMES),
      failure_reason: pick(REASONS),
      traceback: pick([null, 'Traceback (most recent call last):\n  ...']),
    });
  }
  return out;
}

/** A value quoted for the filter grammar: `\` and `"` escaped. */
const quote = (s: string): string => `"${s.replace(/[\\"]/g, (c) => '\\' + c)}"`;

function randomCase(s: string): string {
  return [...s].map((c) => (rand() < 0.5 ? c.toUpperCase() : c.toLowerCase())).join('');
}

function randomSlice(s: string): string {
  const a = int(s.length);
  return s.slice(a, a + 1 + int(6));
}

function randomGlob(s: string): string {
  // Replace one or two runs of s with `*`, sometimes ending up with a literal `%` or `_` left in.
  let g = s;
  for (let k = 0; k < 1 + int(2); k++) {
    const a = int(g.length);
    g = g.slice(0, a) + '*' + g.slice(a + int(5));
  }
  return g;
}

function randomTerm(records: ResultRecord[]): string {
  const r = pick(records);
  const neg = rand() < 0.2 ? '-' : '';
  switch (int(7)) {
    case 0: return `${neg}testcase:${quote(rand() < 0.5 ? r.test_case : randomGlob(r.test_case))}`;
    case 1: return `${neg}category:${quote(r.category)}`;
    case 2: return `${neg}result:${randomCase(r.result)}`;
    case 3: return `${neg}job:${quote(rand() < 0.5 ? r.job_uid : r.job_uid.slice(1) + '/')}`;
    case 4: {
      const day = `2026-11-${20 + int(4)}`;
      const at = `${day} ${String(int(24)).padStart(2, '0')}:${String(int(60)).padStart(2, '0')}`;
      return `${neg}date:${pick([day, `>${quote(at)}`, `<=${day}`, `>=${quote(at)}`, `<${day}`, `${day}..${quote(at)}`, `..${day}`])}`;
    }
    default: {
      const field = pick([r.test_case, r.category, r.result_id, r.failure_reason ?? 'boom', '_', '%', '\\']);
      return `${neg}${quote(randomCase(randomSlice(field)))}`;
    }
  }
}

const SORTS: SortField[] = ['category', 'date', 'duration', 'job', 'testcase', 'result'];

describe('farm results index on PostgreSQL', function () {
  this.timeout(120_000);
  let cluster: TestPostgres;
  let pool: pg.Pool;
  let results: FarmResults;

  before(async () => {
    cluster = await startPostgres();
    pool = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database, max: 4 });
    await migrate(pool);
    results = new FarmResults(pool);
  });

  after(async () => {
    await pool?.end();
    await cluster?.stop();
  });

  beforeEach(async () => {
    await pool.query('TRUNCATE results');
  });

  it('migrations apply once: a second start applies nothing, even when two run at once', async () => {
    expect(await migrate(pool)).to.deep.equal([]);
    const again = await Promise.all([migrate(pool), migrate(pool)]);
    expect(again).to.deep.equal([[], []]);
    const { rows } = await pool.query('SELECT id FROM farm_migrations ORDER BY id');
    expect(rows.map((r) => r.id)).to.deep.equal(MIGRATIONS.map((m) => m.id).sort((a, b) => a - b));
  });

  it('a re-upload never duplicates: put is idempotent on result_id and replaces the record', async () => {
    const recs = makeRecords(12_000); // more than one batch
    await results.put(recs);
    await results.put(recs);
    await results.put([recs[0]!, { ...recs[0]!, result: 'error' }]); // the same id twice in one batch
    expect(await results.count()).to.equal(12_000);
    expect((await results.get(recs[0]!.result_id))!.result).to.equal('error');
    expect(await results.get(recs[1]!.result_id)).to.deep.equal(recs[1]);
  });

  it('deletes by id and by age (retention)', async () => {
    const recs = makeRecords(500);
    await results.put(recs);
    expect(await results.delete([recs[0]!.result_id, recs[1]!.result_id, 'nope'])).to.equal(2);
    const cutoff = new Date('2026-11-22T00:00:00.000Z');
    const older = recs.slice(2).filter((r) => r.start_time < cutoff.toISOString()).length;
    expect(await results.deleteStartedBefore(cutoff)).to.equal(older);
    expect(await results.count()).to.equal(498 - older);
  });

  it('values travel as parameters: a filter holding SQL is only text', async () => {
    await results.put(makeRecords(50));
    const q = parseResultQuery({ filter: `"'; DROP TABLE results; --" testcase:"x' OR '1'='1"` });
    expect(await results.query(q)).to.deep.equal([]);
    expect(compileQuery(q.terms!, q.sort, 10).sql).to.not.include('DROP');
    expect(await results.count()).to.equal(50);
  });

  it('globs become LIKE with %, _ and \\ escaped', () => {
    expect(globToLike('tests/a_b*100%\\x')).to.equal('tests/a\\_b%100\\%\\\\x');
  });

  it(`answers random filters and sorts exactly as the in-memory index (seed ${SEED})`, async () => {
    const recs = makeRecords(3000);
    await results.put(recs);
    const memory = new MemoryIndex();
    for (const r of recs) memory.loadSet(r);
    memory.loadEnd();
    const now = new Date('2026-11-22T12:00:00.000Z');
    let nonEmpty = 0;
    for (let i = 0; i < 600; i++) {
      const filter = Array.from({ length: int(4) }, () => randomTerm(recs)).join(' ');
      const sort = `${pick(SORTS)}:${pick(['asc', 'desc'])}`;
      const tz = pick(['UTC', 'Europe/London', 'America/New_York', 'Asia/Kolkata']);
      const limit = pick([1, 7, 100, 2000]);
      const q = parseResultQuery({ filter, sort, tz }, { now, limit });
      const want = memory.query(q).map((r) => r.result_id);
      const got = (await results.query(q)).map((r) => r.result_id);
      expect(got, `filter=${filter} sort=${sort} tz=${tz} limit=${limit}`).to.deep.equal(want);
      if (want.length > 0) nonEmpty++;
    }
    // The generator must mostly ask questions that have answers, or the comparison proves little.
    expect(nonEmpty).to.be.greaterThan(300);
    // And whole records come back as stored.
    const all = await results.query(parseResultQuery({ sort: 'date:asc' }, { limit: 3000 }));
    expect(all).to.deep.equal(memory.all());
  });

  it('a results list from querySummaries is byte for byte the list from whole records (nulls, unicode, quotes, times)', async () => {
    const recs = makeRecords(400);
    const odd = (i: number, start: string, over: Partial<ResultRecord>): ResultRecord => ({
      ...recs[i]!, result_id: `${recs[i]!.job_uid}/odd-${i}`, start_time: start, end_time: start, ...over,
    });
    recs.push(
      odd(0, '2026-11-20T10:00:00.000Z', { failure_reason: 'said "no" \\ then \'no\'\n\ttab \u0001\u001f ünïcødé 🎉 \u2028', result: 'fail' }),
      odd(1, '2026-11-20T10:00:00.5Z', { failure_reason: null, test_case: 'tests/q"uote\\.py::test_Énergie_🎉', result: 'fail' }),
      odd(2, '2026-11-20T10:00:00.010Z', { failure_reason: '', test_pack_sha: 'ÿ"\\', tags: { 'ключ': 'знач"ение' }, result: 'error' }),
      odd(3, '2026-11-20T10:00:00.123456Z', { failure_reason: '{"json": [1, 2]}', result: 'fail' }), // microseconds: truncated to .123
      odd(4, '2026-11-20T10:00:00.999999Z', { result: 'pass' }),
      odd(5, '0050-06-01T00:00:00.001Z', { result: 'fail' }), // a two-digit year, which pg's parser fixes up
      odd(6, '9999-12-31T23:59:59.999Z', { result: 'fail' }),
    );
    await results.put(recs);
    const queries = [{}, { filter: 'result:fail' }, { filter: '-result:pass', sort: 'testcase:asc' }, { filter: 'testcase:tests/q*' },
      { sort: 'date:asc' }, { filter: 'odd' }, { sort: 'duration:desc', limit: '3' }, { limit: '0' }];
    const base = 'http://portal.example:8080';
    const list = (rows: readonly Parameters<typeof presentResultSummary>[0][]): string => JSON.stringify(rows.map((r) => presentResultSummary(r, base, 'v2')));
    // The times by string in a UTC session; through pg's parser in another zone.
    const kolkata = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database, max: 1, options: '-c TimeZone=Asia/Kolkata' });
    try {
      for (const index of [results, new FarmResults(kolkata)]) {
        for (const query of queries) {
          const q = parseResultQuery(query, { limit: 2000 });
          const want = list(await results.query(q));
          expect(list(await index.querySummaries(q)), JSON.stringify(query)).to.equal(want);
        }
      }
      const all = list(await results.querySummaries(parseResultQuery({}, { limit: 2000 })));
      expect(all).to.include('"failure_reason":null').and.include('🎉').and.include('\\"no\\"').and.include('T10:00:00.123Z').and.include('"0050-06-01T00:00:00.001Z"');
    } finally {
      await kolkata.end();
    }
  });

  it('timestamptz text becomes the ISO time pg`s parser and toISOString give', () => {
    const parse = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ, 'text') as (t: string) => Date;
    for (const t of ['2026-11-20 10:00:00+00', '2026-11-20 10:00:00.5+00', '2026-11-20 10:00:00.123456+00', '2026-11-20 10:00:00.09+00',
      '0050-06-01 00:00:00.001+00', '2026-11-20 15:30:00.25+05:30', '2026-11-20 05:00:00-05', '1850-01-01 00:00:00+00:01:15',
      '10000-01-01 00:00:00+00', '0044-03-15 12:00:00+00 BC']) {
      expect(isoFromPg(t), t).to.equal(parse(t).toISOString());
    }
    // Every fraction of 1 to 6 digits the server writes (it drops trailing zeros); microseconds by a stride.
    const fractions = [''];
    for (let ms = 0; ms < 1000; ms++) fractions.push(String(ms).padStart(3, '0'));
    for (let us = 0; us < 1_000_000; us += 7) fractions.push(String(us).padStart(6, '0'));
    const bad = fractions.map((f) => `2026-11-20 10:00:00${f && '.' + f.replace(/0+$/, '')}+00`.replace(/\.\+/, '+'))
      .filter((t) => isoFromPg(t) !== parse(t).toISOString());
    expect(bad.slice(0, 5)).to.deep.equal([]);
  });
});
