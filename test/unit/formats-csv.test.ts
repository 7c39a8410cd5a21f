/**
 * GET /api/v2/results.csv rendering: RFC 4180 checked by Python's csv module
 * (a real, independent parser), zones checked against luxon.
 */
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { DateTime } from 'luxon';
import { FarmError } from '../../src/core/errors.js';
import type { ResultRecord } from '../../src/core/model.js';
import { CSV_COLUMNS, csvField, resultsCsv } from '../../src/http/formats/csv.js';
import { resultRecord } from '../fixtures/records.js';

const BASE = 'https://farm.example:8443';

const rec = (over: Partial<ResultRecord> = {}): ResultRecord => resultRecord({ ...over });

describe('results CSV (GET /api/v2/results.csv)', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-csv-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  /** Parses CSV text with Python's csv module, as a spreadsheet-minded script would. */
  async function pyParse(text: string): Promise<string[][]> {
    const file = path.join(dir, 'r.csv');
    await writeFile(file, text);
    const code = 'import csv, json, sys; print(json.dumps(list(csv.reader(open(sys.argv[1], newline="", encoding="utf-8")))))';
    return JSON.parse(execFileSync('python3', ['-c', code, file], { encoding: 'utf8' })) as string[][];
  }

  it('has a header row, one row per result and CRLF line ends (RFC 4180)', async () => {
    const text = resultsCsv([rec(), rec({ result: 'fail' }), rec({ result: 'error' })], { base: BASE, tz: 'UTC' });
    expect(text.split('\r\n')).to.have.length(5); // header, 3 rows, '' after the final CRLF
    expect(text.replace(/\r\n/g, '')).not.to.match(/[\r\n]/);
    const rows = await pyParse(text);
    expect(rows[0]).to.deep.equal([...CSV_COLUMNS]);
    expect(rows.slice(1).map((r) => r[CSV_COLUMNS.indexOf('result')])).to.deep.equal(['pass', 'fail', 'error']);
  });

  it('an empty list is the header row alone', async () => {
    expect(await pyParse(resultsCsv([], { base: BASE, tz: 'UTC' }))).to.deep.equal([[...CSV_COLUMNS]]);
  });

  it('quotes fields with comma, quote, CR or LF and doubles quotes, so a parser gets the exact text back', async () => {
    const reason = 'AssertionError: expected "Menu", got "TV, Guide"\r\nsecond line\nthird';
    const text = resultsCsv([rec({ result: 'fail', failure_reason: reason, test_pack_branch: 'feat,x' })], { base: BASE, tz: 'UTC' });
    expect(text).to.include('"AssertionError: expected ""Menu"", got ""TV, Guide""\r\nsecond line\nthird"');
    const [, row] = await pyParse(text);
    expect(row![CSV_COLUMNS.indexOf('failure_reason')]).to.equal(reason);
    expect(row![CSV_COLUMNS.indexOf('test_pack_branch')]).to.equal('feat,x');
  });

  it('fills every column: absolute v2 result_url and triage_url, null as an empty cell, tags as JSON', async () => {
    const r = rec({ test_pack_branch: null, tags: { 'jenkins/BUILD_ID': '42', 'bamboo.plan': 'a; b=c' } });
    const [, row] = await pyParse(resultsCsv([r], { base: BASE, tz: 'UTC' }));
    const cell = Object.fromEntries(CSV_COLUMNS.map((c, i) => [c, row![i]]));
    expect(cell).to.deep.equal({
      result_id: r.result_id,
      result_url: `${BASE}/api/v2/results/node-1/4f2a/7/2026-11-23_09.19.15`,
      triage_url: `${BASE}/app/results/node-1/4f2a/7/2026-11-23_09.19.15`,
      job_uid: r.job_uid,
      test_case: r.test_case,
      result: 'pass',
      failure_reason: '',
      start_time: '2026-11-23T09:19:15.123+00:00',
      end_time: '2026-11-23T09:19:27.468+00:00',
      duration: '12.345',
      category: 'nightly',
      test_pack_sha: r.test_pack_sha,
      test_pack_branch: '',
      username: 'alice',
      tags: '{"jenkins/BUILD_ID":"42","bamboo.plan":"a; b=c"}',
      infrastructure_error: '',
    });
    expect(JSON.parse(cell.tags!)).to.deep.equal(r.tags);
  });

  it('infrastructure_error is the last column: the kind of the record, or from the reason of a record stored before the field', async () => {
    expect(CSV_COLUMNS[CSV_COLUMNS.length - 1]).to.equal('infrastructure_error');
    const records = [
      rec({ result: 'error', failure_reason: 'InfrastructureError: ir_transport: IR Toy was disconnected', infrastructure_error: 'ir_transport' }),
      rec({ result: 'error', failure_reason: 'InfrastructureError: daemon_restart: farmhand restarted while this test was running' }),
      rec({ result: 'error', failure_reason: 'RuntimeError: boom', infrastructure_error: null }),
    ];
    const rows = await pyParse(resultsCsv(records, { base: BASE, tz: 'UTC' }));
    expect(rows.slice(1).map((r) => r[CSV_COLUMNS.indexOf('infrastructure_error')])).to.deep.equal(['ir_transport', 'daemon_restart', '']);
  });

  it('writes durations without float noise', async () => {
    const [, row] = await pyParse(resultsCsv([rec({ duration: 0.1 + 0.2 })], { base: BASE, tz: 'UTC' }));
    expect(row![CSV_COLUMNS.indexOf('duration')]).to.equal('0.3');
  });

  it('guards against formula injection: a cell starting with =, +, -, @ gets a leading quote', () => {
    for (const bad of ['=HYPERLINK("http://x")', '+1', '-2+3', '@SUM(A1)', '\tx']) {
      expect(csvField(bad).replace(/^"|"$/g, '')).to.match(/^'/, bad);
    }
    expect(csvField('AssertionError: =x')).to.equal('AssertionError: =x');
    const text = resultsCsv([rec({ category: '=cmd|calc', username: '@evil' })], { base: BASE, tz: 'UTC' });
    expect(text).to.include(",'=cmd|calc,");
    expect(text).to.include(",'@evil,");
  });

  it('"tz: time-zone database name": start_time and end_time are local to tz with their offset', async () => {
    const rows = await pyParse(
      resultsCsv(
        [
          rec(),
          rec({ start_time: '2026-07-01T12:00:00.000Z', end_time: '2026-07-01T12:00:01.500Z' }),
          // Berlin's spring change: 01:00 UTC on 2026-03-29 is when +01:00 becomes +02:00
          rec({ start_time: '2026-03-29T00:59:59.999Z', end_time: '2026-03-29T01:00:00.000Z' }),
        ],
        { base: BASE, tz: 'Europe/Berlin' },
      ),
    );
    const times = rows.slice(1).map((r) => [r[CSV_COLUMNS.indexOf('start_time')], r[CSV_COLUMNS.indexOf('end_time')]]);
    expect(times).to.deep.equal([
      ['2026-11-23T10:19:15.123+01:00', '2026-11-23T10:19:27.468+01:00'],
      ['2026-07-01T14:00:00.000+02:00', '2026-07-01T14:00:01.500+02:00'],
      ['2026-03-29T01:59:59.999+01:00', '2026-03-29T03:00:00.000+02:00'],
    ]);
  });

  it('agrees with luxon for instants all over a year in zones with odd offsets', () => {
    const zones = ['America/St_Johns', 'Asia/Kathmandu', 'Australia/Lord_Howe', 'America/Los_Angeles', 'Pacific/Chatham'];
    for (const tz of zones) {
      const records = Array.from({ length: 400 }, (_, i) => {
        const t = new Date(Date.UTC(2026, 0, 1) + i * 79_031_117).toISOString(); // ~22 h apart, odd minutes
        return rec({ start_time: t, end_time: t });
      });
      const lines = resultsCsv(records, { base: BASE, tz }).split('\r\n').slice(1, -1);
      lines.forEach((line, i) => {
        const want = DateTime.fromISO(records[i]!.start_time, { zone: tz }).toISO({ includeOffset: true });
        expect(line.split(',')[CSV_COLUMNS.indexOf('start_time')], `${tz} ${records[i]!.start_time}`).to.equal(want);
      });
    }
  });

  it('an unknown tz is invalid_request (400)', () => {
    expect(() => resultsCsv([rec()], { base: BASE, tz: 'Mars/Olympus' }))
      .to.throw(FarmError).with.property('code', 'invalid_request');
  });

  // Its speed (<= 20 ms) is a figure of bench/micro-bench.ts, not an assertion here.
  it('renders 2,000 rows, one line each', () => {
    const records = Array.from({ length: 2000 }, (_, i) => {
      const t = Date.UTC(2026, 10, 23) + i * 37_000;
      return rec({
        start_time: new Date(t).toISOString(),
        end_time: new Date(t + 12_345).toISOString(),
        result: i % 3 === 0 ? 'fail' : 'pass',
        failure_reason: i % 3 === 0 ? 'AssertionError: menu "Guide", not found' : null,
        tags: { 'jenkins/BUILD_ID': String(i) },
      });
    });
    const text = resultsCsv(records, { base: BASE, tz: 'Europe/Berlin' });
    expect(text.split('\r\n')).to.have.length(2002);
  });
});
