/**
 * The v1 API end to end: the whole daemon on port 0, a real git test pack,
 * real python3 test runs and the real ffmpeg capture pipeline.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { readFile, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { waitForRunOutput } from '../helpers/runs.js';
import { waitFor } from '../helpers/wait.js';
import { STANDARD_TEST_CASES } from '../fixtures/testPack.js';

const PASS = 'tests/basic.py::test_pass';
const FAIL = 'tests/basic.py::test_fail';
const ERROR = 'tests/basic.py::test_error';
const HANG = 'tests/hang.py::test_hang';
const TAGS = 'tests/config_tags.py::test_tags';

describe('v1 API', function () {
  this.timeout(90_000);
  let d: TestDaemon;
  let job: Record<string, any>;
  let results: Array<Record<string, any>>;

  before(async () => {
    d = await startTestDaemon();
    await waitOnline(d);
    // One job every later test reads: a pass, a fail and an error.
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS, FAIL, ERROR] });
    expect(res.status, res.text).to.equal(200);
    job = await waitForJob(d, res.body.job_uid);
    results = (await d.http.get(`/api/v1/jobs${job.job_uid}/results`).query({ sort: 'date:asc' })).body;
  });
  after(() => d?.stop());

  describe('screenshots', () => {
    it('GET /api/v1/device/screenshot.png is a lossless PNG of the device under test', async () => {
      const res = await d.http.get('/api/v1/device/screenshot.png').buffer(true);
      expect(res.status).to.equal(200);
      expect(res.type).to.equal('image/png');
      const meta = await sharp(res.body as Buffer).metadata();
      expect(meta).to.include({ format: 'png', width: 320, height: 240 });
    });

    it('GET /api/v1/device/thumbnail.jpg is a small JPEG', async () => {
      const res = await d.http.get('/api/v1/device/thumbnail.jpg').buffer(true);
      expect(res.status).to.equal(200);
      expect(res.type).to.equal('image/jpeg');
      expect((await sharp(res.body as Buffer).metadata()).format).to.equal('jpeg');
    });
  });

  describe('test_case_names', () => {
    it('lists the top-level test_* functions of tests/**/*.py as <file>::<function>', async () => {
      const res = await d.http.get('/api/v1/test_pack/main/test_case_names');
      expect(res.status).to.equal(200);
      expect(res.body).to.deep.equal(STANDARD_TEST_CASES);
    });

    it('takes a full or short SHA, HEAD, a tag and a refs/snapshots SHA (COMPAT)', async () => {
      await d.pack.tag('v1.0', d.pack.sha);
      const snap = await d.pack.snapshot('alice', { 'tests/wip.py': 'def test_wip():\n    pass\n' });
      for (const rev of [d.pack.sha, d.pack.sha.slice(0, 7), 'HEAD', 'v1.0', 'refs/heads/main']) {
        const res = await d.http.get(`/api/v1/test_pack/${rev}/test_case_names`);
        expect(res.status, rev).to.equal(200);
        expect(res.body, rev).to.include(PASS);
      }
      const res = await d.http.get(`/api/v1/test_pack/${snap}/test_case_names`);
      expect(res.status).to.equal(200);
      expect(res.body).to.include('tests/wip.py::test_wip');
    });

    it('sees a commit pushed to a branch a moment ago (a branch is refetched when the mirror is stale)', async () => {
      // refresh_secs is 1 in this daemon: ask until the mirror has gone stale and the branch is refetched
      // (the wait fails if it never is).
      const names = (what: string) =>
        waitFor(
          async () => {
            const res = await d.http.get('/api/v1/test_pack/feature/test_case_names');
            return res.status === 200 && (res.body as string[]).includes(what);
          },
          { what: `${what} to be listed`, intervalMs: 100 },
        );
      await d.pack.commit({ 'tests/pushed.py': 'def test_pushed():\n    pass\n' }, { ref: 'feature' });
      await names('tests/pushed.py::test_pushed');
      await d.pack.commit({ 'tests/pushed2.py': 'def test_pushed_again():\n    pass\n' }, { ref: 'feature' });
      await names('tests/pushed2.py::test_pushed_again');
    });

    it('answers 404 with a JSON error for an unknown revision', async () => {
      expectError(await d.http.get('/api/v1/test_pack/no-such-branch/test_case_names'), 404, 'not_found');
      expectError(await d.http.get('/api/v1/test_pack/0123456789abcdef0123456789abcdef01234567/test_case_names'), 404, 'not_found');
    });

    it('refuses revisions that look like git options', async () => {
      expectError(await d.http.get('/api/v1/test_pack/--upload-pack=touch%20x/test_case_names'), 400, 'invalid_request');
    });
  });

  describe('run_tests and jobs', () => {
    it('answers job_id (deprecated), job_uid, an absolute job_url, status, times and result_counts', async () => {
      expect(job.job_uid).to.match(/^\/farmhand-test\/[0-9a-f]{4}\/\d+$/);
      expect(job.job_url).to.equal(`${d.url}/api/v1/jobs${job.job_uid}`);
      expect(job).to.include({ status: 'exited' });
      expect(job.end_time).to.be.a('string');
      expect(job.result_counts).to.deep.equal({ pass: 1, fail: 1, error: 1, total: 3 });
    });

    it('parses a JSON body sent without Content-Type, or as form data like curl -d (COMPAT)', async () => {
      const body = JSON.stringify({ test_pack_revision: 'main', test_cases: [PASS] });
      const res = await d.http.post('/api/v1/run_tests').set('Content-Type', 'application/x-www-form-urlencoded').send(body);
      expect(res.status, res.text).to.equal(200);
      expect(res.body.job_id).to.be.a('number');
      expect(res.body.status).to.equal('running');
      expect(res.body.end_time).to.equal(null);
      const done = await waitForJob(d, res.body.job_uid);
      expect(done.result_counts).to.deep.equal({ pass: 1, fail: 0, error: 0, total: 1 });
    });

    it('answers 400 for a body that is not JSON, or of the wrong shape', async () => {
      expectError(await d.http.post('/api/v1/run_tests').set('Content-Type', 'application/json').send('{"test_pack_revision": '), 400, 'invalid_request');
      expectError(await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main' }), 400, 'invalid_request');
      expectError(await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS], category: 'a/b' }), 400, 'invalid_request');
      expectError(await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/nope.py::test_x'] }), 400, 'invalid_request');
      expectError(await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS], remote_control: 'nope' }), 400, 'invalid_request');
    });

    it('answers 404 for a revision not in the test pack', async () => {
      expectError(await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'nope', test_cases: [PASS] }), 404, 'not_found');
    });

    it('answers 409 while a job runs; stop answers 200 only once stopped; repeated stops are safe', async () => {
      const first = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [HANG, PASS] });
      expect(first.status).to.equal(200);
      expectError(await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] }), 409, 'conflict');
      // Once the hanging test runs, stop the job.
      await waitForRunOutput(d, first.body.job_uid, 'about to hang');
      const stop = await d.http.post(`/api/v1/jobs${first.body.job_uid}/stop`);
      expect(stop.status).to.equal(200);
      expect(stop.body.status).to.equal('exited');
      expect(stop.body.result_counts.total).to.equal(2);
      expect(stop.body.result_counts.pass + stop.body.result_counts.fail + stop.body.result_counts.error).to.be.lessThan(2);
      const again = await d.http.post(`/api/v1/jobs${first.body.job_uid}/stop`);
      expect(again.status).to.equal(200);
      // "When the stop call returns 200 the job is stopped and a new run_tests may be issued at once."
      const next = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] });
      expect(next.status).to.equal(200);
      await waitForJob(d, next.body.job_uid);
      const stopped = (await d.http.get(`/api/v1/jobs${first.body.job_uid}/results`)).body;
      expect(stopped).to.have.length(1);
      expect(stopped[0].result).to.equal('error');
      expect(stopped[0].failure_reason).to.match(/^Stopped/);
    });

    it('soak "run forever" runs until stopped; total counts the runs started', async () => {
      const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS], soak: 'run forever' });
      expect(res.status).to.equal(200);
      // result_counts are live while the job runs: the wait fails if they never reach 2 passes.
      await waitFor(
        async () => {
          const job = (await d.http.get(`/api/v1/jobs${res.body.job_uid}`)).body;
          return job.status === 'running' && (job.result_counts as Record<string, number>).pass! >= 2;
        },
        { what: 'two passes counted while the soak runs', timeoutMs: 60_000, intervalMs: 100 },
      );
      const stop = await d.http.post(`/api/v1/jobs${res.body.job_uid}/stop`);
      expect(stop.status).to.equal(200);
      const c = stop.body.result_counts;
      expect(c.total).to.equal(c.pass + c.fail + c.error);
    });

    it('answers 404 for an unknown job, for GET and stop', async () => {
      expectError(await d.http.get('/api/v1/jobs/farmhand-test/0000/999'), 404, 'not_found');
      expectError(await d.http.post('/api/v1/jobs/farmhand-test/0000/999/stop'), 404, 'not_found');
      expectError(await d.http.get('/api/v1/jobs/other-node/abcd/1'), 404, 'not_found');
    });
  });

  describe('results', () => {
    it('GET /api/v1/jobs/{job_uid}/results lists the job`s runs with the summary fields, without triage_url', () => {
      expect(results.map((r) => r.test_case)).to.deep.equal([PASS, FAIL, ERROR]);
      expect(results.map((r) => r.result)).to.deep.equal(['pass', 'fail', 'error']);
      const [p, f, e] = results as [Record<string, any>, Record<string, any>, Record<string, any>];
      expect(p).to.have.all.keys('result_id', 'result_url', 'job_uid', 'start_time', 'end_time', 'test_case', 'test_pack_sha', 'result', 'failure_reason');
      expect(p.failure_reason).to.equal(null);
      expect(p.test_pack_sha).to.equal(d.pack.sha);
      expect(p.result_id.startsWith(`${job.job_uid}/`)).to.equal(true);
      expect(p.result_url).to.equal(`${d.url}/api/v1/result${p.result_id}`);
      expect(f.failure_reason).to.equal('AssertionError: arithmetic is broken');
      expect(e.failure_reason).to.equal('RuntimeError: something went wrong');
    });

    it('GET /api/v1/results filters with job:, sorts, and omits runs in progress', async () => {
      const all = (await d.http.get('/api/v1/results')).body as Array<Record<string, any>>;
      expect(all.length).to.be.at.least(3);
      const dates = all.map((r) => r.start_time as string);
      expect(dates).to.deep.equal([...dates].sort().reverse()); // default date:desc
      const failed = (await d.http.get('/api/v1/results').query({ filter: `job:${job.job_uid} result:fail` })).body;
      expect(failed.map((r: { test_case: string }) => r.test_case)).to.deep.equal([FAIL]);
    });

    it('answers 400 for a bad filter, sort or tz', async () => {
      expectError(await d.http.get('/api/v1/results').query({ filter: 'colour:blue' }), 400, 'invalid_filter');
      expectError(await d.http.get('/api/v1/results').query({ sort: 'colour:asc' }), 400, 'invalid_request');
      expectError(await d.http.get('/api/v1/results').query({ tz: 'Mars/Olympus' }), 400, 'invalid_request');
      expect((await d.http.get('/api/v1/results').query({ tz: 'Etc/UTC' })).status).to.equal(200);
    });

    it('result detail, with or without the trailing slash (COMPAT), adds job_category, traceback and artifacts', async () => {
      const f = results[1]!;
      const a = await d.http.get(`/api/v1/result${f.result_id}/`);
      const b = await d.http.get(`/api/v1/result${f.result_id}`);
      expect(a.status).to.equal(200);
      expect(b.body).to.deep.equal(a.body);
      expect(a.body).to.include({ job_category: 'default', result: 'fail' });
      expect(a.body).not.to.have.any.keys('test_pack_branch', 'username', 'tags', 'triage_url');
      expect(a.body.traceback).to.match(/Traceback[\s\S]*AssertionError: arithmetic is broken/);
      for (const name of ['combined.log', 'stdout.log', 'stderr.log', 'farmhand.log', 'screenshot.png', 'thumbnail.jpg', 'test-name', 'git-commit', 'duration', 'exit-status', 'failure-reason', 'farmhand-version.log']) {
        expect(a.body.artifacts, name).to.have.property(name);
      }
    });

    it('the run log is served as farmhand.log and stbt.log: an ISO 8601 timestamp, a space, the message', async () => {
      const id = results[0]!.result_id as string;
      const a = await d.http.get(`/api/v1/result${id}/farmhand.log`);
      const b = await d.http.get(`/api/v1/result${id}/stbt.log`);
      expect(a.status).to.equal(200);
      expect(a.type).to.equal('text/plain');
      expect(b.text).to.equal(a.text);
      const lines = a.text.trimEnd().split('\n');
      expect(lines.length).to.be.at.least(2);
      for (const line of lines) expect(line).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?\+00:00 /);
    });

    it('serves the end-of-run screenshot and the artifacts listing with integer size and md5', async () => {
      const id = results[0]!.result_id as string;
      const shot = await d.http.get(`/api/v1/result${id}/screenshot.png`).buffer(true);
      expect(shot.status).to.equal(200);
      expect(shot.type).to.equal('image/png');
      const listing = (await d.http.get(`/api/v1/result${id}/artifacts/`)).body as Record<string, { size: number; md5: string }>;
      const file = path.join(d.daemon.services.results.dirOf(id), 'test-name');
      const bytes = await readFile(file);
      expect(listing['test-name']).to.deep.equal({ size: bytes.length, md5: createHash('md5').update(bytes).digest('hex') });
      expect((await d.http.get(`/api/v1/result${id}/artifacts`)).body).to.deep.equal(listing);
    });

    it('serves artifact files with a Content-Type by extension and Range requests', async () => {
      const id = results[0]!.result_id as string;
      const full = await d.http.get(`/api/v1/result${id}/artifacts/test-name`);
      expect(full.status).to.equal(200);
      expect(full.text.trim()).to.equal(PASS);
      const part = await d.http.get(`/api/v1/result${id}/artifacts/test-name`).set('Range', 'bytes=0-4');
      expect(part.status).to.equal(206);
      expect(part.text).to.equal(PASS.slice(0, 5));
      expect(part.headers['content-range']).to.equal(`bytes 0-4/${full.text.length}`);
      expectError(await d.http.get(`/api/v1/result${id}/artifacts/test-name`).set('Range', 'bytes=9999-'), 416, 'range_not_satisfiable');
      const png = await d.http.get(`/api/v1/result${id}/artifacts/thumbnail.jpg`);
      expect(png.type).to.equal('image/jpeg');
    });

    it('never serves a file outside the result folder: not through .., not through a symlink', async () => {
      const id = results[0]!.result_id as string;
      const dir = d.daemon.services.results.dirOf(id);
      await symlink('/etc/passwd', path.join(dir, 'escape.txt'));
      await writeFile(path.join(d.dataDir, 'secret.txt'), 'TOP-SECRET-CONTENT');
      for (const p of ['..%2F..%2F..%2F..%2Fsecret.txt', '../../../../secret.txt', '%2Fetc%2Fpasswd', 'escape.txt', '..%2Fresult.json']) {
        const res = await d.http.get(`/api/v1/result${id}/artifacts/${p}`);
        expectError(res, 404, 'not_found', p);
        expect(res.text, p).not.to.include('root:');
        expect(res.text, p).not.to.include('TOP-SECRET-CONTENT');
      }
      const listing = (await d.http.get(`/api/v1/result${id}/artifacts/`)).body;
      expect(listing).not.to.have.property('escape.txt');
    });

    it('answers 404 for unknown result ids and unknown artifacts', async () => {
      expectError(await d.http.get(`${`/api/v1/result${job.job_uid}`}/2000-01-01_00.00.00/`), 404, 'not_found');
      expectError(await d.http.get(`/api/v1/result${results[0]!.result_id}/artifacts/no-such-file`), 404, 'not_found');
      expectError(await d.http.get('/api/v1/result/farmhand-test/zzzz/1/x/'), 404, 'not_found');
    });

    it('v1 has no tags: get_config("result.tags", name) without a default is an error naming the key', async () => {
      const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [TAGS] });
      const done = await waitForJob(d, res.body.job_uid);
      expect(done.result_counts).to.include({ error: 1 });
      const [r] = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body;
      expect(r.failure_reason).to.match(/^ConfigurationError: .*jenkins\/BUILD_ID/);
    });
  });

  describe('errors', () => {
    it('answers unknown paths and wrong methods with a JSON error', async () => {
      expectError(await d.http.get('/api/v1/nothing-here'), 404, 'not_found');
      expectError(await d.http.delete('/api/v1/run_tests'), 405, 'method_not_allowed');
    });

    it('answers 413 for an over-large body', async () => {
      const big = JSON.stringify({ test_pack_revision: 'main', test_cases: [PASS], pad: 'x'.repeat(2 * 1024 * 1024) });
      expectError(await d.http.post('/api/v1/run_tests').send(big), 413, 'payload_too_large');
    });
  });

  describe('the API contract', () => {
    it('GET /api/openapi.json serves the OpenAPI 3.1 document without a token, cacheable, valid by swagger-parser', async () => {
      const res = await d.http.get('/api/openapi.json');
      expect(res.status).to.equal(200);
      expect(res.type).to.equal('application/json');
      expect(res.headers['cache-control']).to.match(/max-age=\d+/);
      expect(res.body.openapi).to.equal('3.1.0');
      expect(res.body.paths).to.have.property('/api/v2/run_tests');
      const { default: SwaggerParser } = await import('@apidevtools/swagger-parser');
      await SwaggerParser.validate(res.body);
    });

    it('GET /app/api is the reference page: every path, inside the pages\' layout under their strict CSP, nothing from elsewhere', async () => {
      const res = await d.http.get('/app/api');
      expect(res.status).to.equal(200);
      expect(res.type).to.equal('text/html');
      expect(res.headers['content-security-policy']).to.include("default-src 'none'");
      expect(res.text).to.include('/api/v1/run_tests').and.include('/api/v2/reservations/{reservation_id}/interrupt').and.include('id="schema-Job"');
      expect(res.text).to.include('<header class="top">');
      // Scripts and styles only from this origin, none inline.
      expect(res.text).not.to.match(/<script(?![^>]*src="\/static\/)|<style|style=|(src|href)="(https?:)?\/\//i);
    });
  });
});

describe('v1 and the node licence', function () {
  this.timeout(30_000);
  let d: TestDaemon;
  before(async () => {
    d = await startTestDaemon({ config: { capture: { uri: 'none:' }, node: { licence_expiry: '2020-01-31' } } });
  });
  after(() => d?.stop());

  it('run_tests on a node whose licence has expired is refused with 403 forbidden, as in v2, and starts no job', async () => {
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] });
    expectError(res, 403, 'forbidden');
    expect(res.body.message).to.match(/licence/);
    expect(d.daemon.services.jobs.current()).to.equal(undefined);
  });
});
