/**
 * GET /api/v2/results.xml rendering: validated with xmllint against the Ant
 * jUnit schema (test/fixtures/junit), values read back through xmllint's
 * XPath so escaping is proven by a real XML parser.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import type { ResultRecord } from '../../src/core/model.js';
import { exceptionType, junitNames, resultsJunitXml } from '../../src/http/formats/junit.js';
import { resultRecord } from '../fixtures/records.js';

const SCHEMA = fileURLToPath(new URL('../fixtures/junit/ant-junit.xsd', import.meta.url));
/** The upstream Ant schema file, when the environment provides it, is checked too. */
const SCHEMAS = [SCHEMA, ...(process.env.JUNIT_XSD ? [process.env.JUNIT_XSD] : [])];

const rec = (over: Partial<ResultRecord> = {}): ResultRecord => resultRecord({ test_case: 'tests/ui/menus.py::test_open_menu', tags: { 'jenkins/BUILD_ID': '42' }, ...over });

const failing = rec({
  result_id: '/node-1/4f2a/7/2026-11-23_09.19.28',
  test_case: 'tests/ui/menus.py::test_guide',
  start_time: '2026-11-23T09:19:28.000Z',
  duration: 3.5,
  result: 'fail',
  failure_reason: 'AssertionError: expected <Guide> & "TV", got \'Menu\'',
  traceback: 'Traceback (most recent call last):\n  File "tests/ui/menus.py", line 9, in test_guide\n    assert a < b\nAssertionError: ]]> end',
});
const erroring = rec({
  result_id: '/node-1/4f2a/7/2026-11-23_09.19.32',
  test_case: 'tests/apps.py::test_launch',
  start_time: '2026-11-23T09:19:32.000Z',
  duration: 1,
  result: 'error',
  failure_reason: 'stbt.UITestError: capture\tlost\nretrying',
  traceback: 'Traceback\r\n  boom',
});

describe('results jUnit XML (GET /api/v2/results.xml)', () => {
  let dir: string;
  let n = 0;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-junit-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  async function save(xml: string): Promise<string> {
    const file = path.join(dir, `r${n++}.xml`);
    await writeFile(file, xml);
    return file;
  }
  function validate(file: string, schema: string) {
    return spawnSync('xmllint', ['--noout', '--schema', schema, file], { encoding: 'utf8' });
  }
  /** An XPath string value, read by libxml2. */
  const xpath = (file: string, expr: string) =>
    execFileSync('xmllint', ['--xpath', `string(${expr})`, file], { encoding: 'utf8' }).replace(/\n$/, ''); // xmllint adds one

  it('include_tz=false output validates against the Ant jUnit schema', async () => {
    const file = await save(resultsJunitXml([rec(), failing, erroring], { includeTz: false, tz: 'Europe/Berlin' }));
    for (const schema of SCHEMAS) {
      const r = validate(file, schema);
      expect(r.status, `${schema}: ${r.stderr}`).to.equal(0);
    }
  });

  it('an empty list is a valid suite with tests="0"', async () => {
    const file = await save(resultsJunitXml([], { includeTz: false, tz: 'UTC', now: new Date('2026-11-23T09:00:00Z') }));
    for (const schema of SCHEMAS) expect(validate(file, schema).status).to.equal(0);
    expect(xpath(file, '/testsuite/@tests')).to.equal('0');
    expect(xpath(file, '/testsuite/@timestamp')).to.equal('2026-11-23T09:00:00');
    expect(xpath(file, '/testsuite/@hostname')).to.equal('localhost');
  });

  it('a testsuite with tests/failures/errors/time/timestamp counts the results', async () => {
    const file = await save(resultsJunitXml([failing, rec(), erroring], { includeTz: false, tz: 'UTC' }));
    const suite = (a: string) => xpath(file, `/testsuite/@${a}`);
    expect([suite('tests'), suite('failures'), suite('errors'), suite('time')]).to.deep.equal(['3', '1', '1', '16.845']);
    expect(suite('timestamp')).to.equal('2026-11-23T09:19:15'); // the earliest start, whatever the order
    expect(suite('name')).to.equal('/node-1/4f2a/7');
    expect(suite('hostname')).to.equal('node-1');
    expect(xpath(file, 'count(/testsuite/testcase)')).to.equal('3');
  });

  it('by default, as the stb-tester portal: classname = the test file path, name = the function, time in seconds', async () => {
    const file = await save(resultsJunitXml([rec()], { includeTz: false, tz: 'UTC' }));
    expect(xpath(file, '//testcase/@classname')).to.equal('tests/ui/menus.py');
    expect(xpath(file, '//testcase/@name')).to.equal('test_open_menu');
    expect(validate(file, SCHEMA).status).to.equal(0);
    expect(junitNames('tests/test.py::test_x')).to.deep.equal({ classname: 'tests/test.py', name: 'test_x' });
  });

  it('classname "pytest" keeps pytest junitxml style (file as a dotted module)', async () => {
    const file = await save(resultsJunitXml([rec()], { includeTz: false, tz: 'UTC', classname: 'pytest' }));
    expect(xpath(file, '//testcase/@classname')).to.equal('tests.ui.menus');
    expect(xpath(file, '//testcase/@name')).to.equal('test_open_menu');
    expect(xpath(file, '//testcase/@time')).to.equal('12.345');
    expect(xpath(file, 'count(//testcase/*)')).to.equal('0');
    expect(junitNames('no_separator', 'pytest')).to.deep.equal({ classname: '', name: 'no_separator' });
    expect(junitNames('no_separator')).to.deep.equal({ classname: '', name: 'no_separator' });
  });

  it('fail -> <failure>, error -> <error>, message and traceback escaped and read back exactly', async () => {
    const file = await save(resultsJunitXml([failing, erroring], { includeTz: false, tz: 'UTC' }));
    expect(xpath(file, '//testcase[1]/failure/@message')).to.equal(failing.failure_reason);
    expect(xpath(file, '//testcase[1]/failure/@type')).to.equal('AssertionError');
    expect(xpath(file, '//testcase[1]/failure')).to.equal(failing.traceback);
    expect(xpath(file, '//testcase[2]/error/@message')).to.equal(erroring.failure_reason); // tab and newline survive
    expect(xpath(file, '//testcase[2]/error/@type')).to.equal('stbt.UITestError');
    expect(xpath(file, '//testcase[2]/error')).to.equal(erroring.traceback); // CRLF survives
  });

  it('falls back to a generic type when the reason names no exception', () => {
    expect(exceptionType({ result: 'fail', failure_reason: 'it broke' })).to.equal('Failure');
    expect(exceptionType({ result: 'error', failure_reason: null })).to.equal('Error');
    expect(exceptionType({ result: 'error', failure_reason: 'Stopped: the job was stopped' })).to.equal('Stopped');
  });

  it('an infrastructure error has type InfrastructureError.<kind>, from the field or (older records) the reason', async () => {
    const infra = resultRecord({ result: 'error', failure_reason: 'InfrastructureError: capture_lost: capture lost during the run: x', infrastructure_error: 'capture_lost' });
    const old = resultRecord({ result: 'error', failure_reason: 'InfrastructureError: disk_full: the data disk filled up during this run' });
    const file = await save(resultsJunitXml([infra, old], { includeTz: false, tz: 'UTC' }));
    expect(xpath(file, '//testcase[1]/error/@type')).to.equal('InfrastructureError.capture_lost');
    expect(xpath(file, '//testcase[2]/error/@type')).to.equal('InfrastructureError.disk_full');
  });

  it('strips characters XML 1.0 cannot carry (control characters, terminal colours, lone surrogates)', async () => {
    const nasty = rec({
      result: 'fail',
      failure_reason: 'AssertionError: \x1b[31mred\x1b[0m\x00\x07\x08 bell\uFFFE\uD800 end',
      traceback: 'line\x0b1\x0c\x1b]0;title\x07\nline 2 \u{1F4FA} ok',
      tags: { note: 'tag\x01value' },
    });
    const xml = resultsJunitXml([nasty], { includeTz: false, tz: 'UTC' });
    expect(xml).not.to.match(/[\x00-\x08\x0b\x0c\x0e-\x1f\uFFFE]/);
    const file = await save(xml);
    expect(validate(file, SCHEMA).status).to.equal(0);
    expect(xpath(file, '//failure/@message')).to.equal('AssertionError: red bell end');
    expect(xpath(file, '//failure')).to.equal('line1\nline 2 \u{1F4FA} ok');
    expect(xpath(file, "//property[@name='tags.note']/@value")).to.equal('tagvalue');
  });

  it('"include_tz=true puts zone information in the ISO 8601 timestamps"; false gives local time without a zone', async () => {
    const records = [rec(), failing];
    const local = await save(resultsJunitXml(records, { includeTz: false, tz: 'Europe/Berlin' }));
    const zoned = await save(resultsJunitXml(records, { includeTz: true, tz: 'Europe/Berlin' }));
    expect(xpath(local, '/testsuite/@timestamp')).to.equal('2026-11-23T10:19:15');
    expect(xpath(zoned, '/testsuite/@timestamp')).to.equal('2026-11-23T10:19:15+01:00');
    expect(xpath(local, '/testsuite/system-out')).to.include('2026-11-23T10:19:28 fail tests/ui/menus.py::test_guide /node-1/4f2a/7/2026-11-23_09.19.28');
    expect(xpath(zoned, '/testsuite/system-out')).to.include('2026-11-23T10:19:28+01:00 fail');
    const utc = await save(resultsJunitXml(records, { includeTz: true, tz: 'UTC' }));
    expect(xpath(utc, '/testsuite/@timestamp')).to.equal('2026-11-23T09:19:15+00:00');
  });

  it('include_tz=true cannot validate against the Ant schema, whose timestamp forbids a zone (documented deviation)', async () => {
    const file = await save(resultsJunitXml([rec()], { includeTz: true, tz: 'Europe/Berlin' }));
    const r = validate(file, SCHEMA);
    expect(r.status).not.to.equal(0);
    expect(r.stderr).to.include("attribute 'timestamp'");
    expect(r.stderr.split('\n').filter((l) => l.includes('validity error'))).to.have.length(1); // nothing else is wrong
  });

  it('records what every result shares as suite properties', async () => {
    const other = rec({ job_uid: '/node-1/4f2a/8', category: 'smoke', tags: { 'jenkins/BUILD_ID': '42', extra: 'x' } });
    const file = await save(resultsJunitXml([rec(), other], { includeTz: false, tz: 'UTC' }));
    const names = execFileSync('xmllint', ['--xpath', '//property/@name', file], { encoding: 'utf8' });
    expect(names.trim().split(/\s+/)).to.deep.equal([
      'name="test_pack_sha"',
      'name="test_pack_branch"',
      'name="username"',
      'name="tags.jenkins/BUILD_ID"',
    ]);
    expect(xpath(file, '/testsuite/@name')).to.equal('farmhand'); // two jobs
  });

  it('an unknown tz is invalid_request (400)', () => {
    expect(() => resultsJunitXml([rec()], { includeTz: false, tz: 'Nowhere/Special' }))
      .to.throw(FarmError).with.property('code', 'invalid_request');
  });
});
