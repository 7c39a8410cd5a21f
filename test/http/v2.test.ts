/**
 * The v2 API for this one node: jobs, node-level job endpoints, long polls,
 * stop by PUT and POST, results, the extra v2 fields.
 */
import { expect } from 'chai';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { asUser } from '../helpers/auth.js';

const PASS = 'tests/basic.py::test_pass';
const FAIL = 'tests/basic.py::test_fail';
const HANG = 'tests/hang.py::test_hang';
const TAGS = 'tests/config_tags.py::test_tags';

describe('v2 API', function () {
  this.timeout(90_000);
  let d: TestDaemon;
  let as: Awaited<ReturnType<typeof asUser>>;
  const NODE = 'farmhand-test';

  before(async () => {
    d = await startTestDaemon({ config: { api: { await_completion_secs: 2 } } });
    as = await asUser(d, 'alice');
    await waitOnline(d);
  });
  after(() => d?.stop());

  const run = (body: Record<string, unknown>) =>
    as.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', shuffle: false, tags: {}, ...body });

  it('run_tests takes node_id and tags; tags reach the test as result.tags and the result detail', async () => {
    const res = await run({ test_cases: [TAGS], tags: { 'jenkins/BUILD_ID': '42', 'bamboo.buildPlanName': 'plan' } });
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.have.all.keys('job_uid', 'job_url', 'status', 'start_time', 'end_time', 'result_counts');
    expect(res.body.job_url).to.equal(`${d.url}/api/v2/jobs${res.body.job_uid}`);
    const done = await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
    expect(done.status).to.equal(200);
    expect(done.body.status).to.equal('exited');
    expect(done.body.result_counts).to.include({ pass: 1 });
    const [r] = (await as.get('/api/v2/results').query({ filter: `job:${res.body.job_uid}` })).body;
    expect(r.triage_url).to.equal(`${d.url}/app/results${r.result_id}`);
    expect(r.result_url).to.equal(`${d.url}/api/v2/results${r.result_id}`);
    const detail = (await as.get(`/api/v2/results${r.result_id}`)).body;
    expect(detail).to.include({ test_pack_branch: 'main', username: 'alice', job_category: 'default' });
    expect(detail.tags).to.deep.equal({ 'jenkins/BUILD_ID': '42', 'bamboo.buildPlanName': 'plan' });
    const tag = await as.get(`/api/v2/results${r.result_id}/artifacts/tag.txt`);
    expect(tag.text).to.equal('42 vstb fallback');
  });

  it('test_pack_branch is null when a SHA was given', async () => {
    const res = await run({ test_pack_revision: d.pack.sha, test_cases: [PASS] });
    await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
    const [r] = (await as.get('/api/v2/results').query({ filter: `job:${res.body.job_uid}` })).body;
    expect((await as.get(`/api/v2/results${r.result_id}/`)).body.test_pack_branch).to.equal(null);
  });

  it('any other node id is a 404', async () => {
    expect((await run({ node_id: 'other-node', test_cases: [PASS] })).status).to.equal(404);
    expect((await as.get('/api/v2/nodes/other-node/job')).status).to.equal(404);
    expect((await as.get('/api/v2/nodes/other-node/screenshot.png')).status).to.equal(404);
    expect((await run({ node_id: 7, test_cases: [PASS] })).status).to.equal(400);
  });

  it('await_completion holds the request, answers 202 with the Job object after the hold time, 200 when the job ends', async () => {
    const res = await run({ test_cases: [HANG] });
    const t0 = Date.now();
    const held = await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
    expect(held.status).to.equal(202);
    expect(Date.now() - t0).to.be.at.least(1900);
    expect(held.body).to.include({ job_uid: res.body.job_uid, status: 'running' });
    const node = await as.get(`/api/v2/nodes/${NODE}/job`);
    expect(node.body.job_uid).to.equal(res.body.job_uid);
    // The force sequence of COMPAT: nodes/<id>/job, jobs/<uid>, stop, run_tests again.
    const waiting = as.get(`/api/v2/nodes/${NODE}/job/await_completion`);
    await new Promise((r) => setTimeout(r, 200));
    const stopped = await as.put(`/api/v2/jobs${res.body.job_uid}/stop`);
    expect(stopped.status).to.equal(200);
    expect(stopped.body.status).to.equal('exited');
    const w = await waiting;
    expect(w.status).to.equal(200);
    expect(w.body.status).to.equal('exited');
    expect((await as.post(`/api/v2/jobs${res.body.job_uid}/stop`)).status).to.equal(200);
  });

  it('the node\'s job links the log and triage page of its first run while that run is in progress, and both links answer', async () => {
    const res = await run({ test_cases: [HANG] });
    expect(res.status, res.text).to.equal(200);
    try {
      // Poll (a condition, not a time): the first run starts once the test pack is checked out.
      let job: Record<string, any> = {};
      const deadline = Date.now() + 60_000;
      while (!job.log_url && Date.now() < deadline) {
        job = (await as.get(`/api/v2/nodes/${NODE}`)).body.job;
        if (!job.log_url) await new Promise((r) => setTimeout(r, 20));
      }
      expect(job).to.include({ job_uid: res.body.job_uid, status: 'running' });
      expect(job.log_url).to.be.a('string').and.match(new RegExp(`^${d.url}/api/v2/results${res.body.job_uid}/\\d{4}-\\d{2}-\\d{2}_\\d{2}\\.\\d{2}\\.\\d{2}/farmhand\\.log$`));
      expect(job.triage_url).to.equal(`${d.url}/app/results${job.log_url.slice(`${d.url}/api/v2/results`.length, -'/farmhand.log'.length)}`);
      const log = await as.get(job.log_url.slice(d.url.length));
      expect(log.status, log.text).to.equal(200);
      expect(log.type).to.equal('text/plain');
      const page = await as.get(job.triage_url.slice(d.url.length));
      expect(page.status, page.text).to.equal(200);
      expect(page.type).to.equal('text/html');
      expect(page.text).to.include('running').and.include(HANG.split('::')[1]!);
    } finally {
      await as.post(`/api/v2/jobs${res.body.job_uid}/stop`);
    }
  });

  it('POST /api/v2/nodes/{node_id}/job/stop stops the node`s job', async () => {
    const res = await run({ test_cases: [HANG] });
    await new Promise((r) => setTimeout(r, 300));
    const stop = await as.post(`/api/v2/nodes/${NODE}/job/stop`);
    expect(stop.status).to.equal(200);
    expect(stop.body).to.include({ job_uid: res.body.job_uid, status: 'exited' });
    const again = await as.get(`/api/v2/nodes/${NODE}/job/await_completion`);
    expect(again.status).to.equal(200);
  });

  it('200 concurrent await_completion requests on one job all return 200 promptly when it ends', async () => {
    const res = await run({ test_cases: [PASS, PASS] });
    const started = Date.now();
    const waiters = Array.from({ length: 200 }, () => as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`).then((r) => ({ r, at: Date.now() })));
    const all = await Promise.all(waiters);
    const job = await waitForJob(d, res.body.job_uid);
    const ended = Date.parse(job.end_time as string);
    for (const { r, at } of all) {
      expect(r.status).to.equal(200);
      expect(at - ended).to.be.lessThan(1000);
    }
    expect(Date.now() - started).to.be.lessThan(10_000);
  });

  it('results as JSON with filter, sort and tz; bad values are 400', async () => {
    const res = await run({ test_cases: [FAIL] });
    await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
    const fails = (await as.get('/api/v2/results').query({ filter: `job:${res.body.job_uid} result:fail`, tz: 'Europe/London', sort: 'date:asc' })).body;
    expect(fails).to.have.length(1);
    expect(fails[0].failure_reason).to.equal('AssertionError: arithmetic is broken');
    expect((await as.get('/api/v2/results').query({ tz: 'Nowhere/Else' })).status).to.equal(400);
    expect((await as.get('/api/v2/results').query({ filter: 'bogus:1' })).status).to.equal(400);
  });

  it('"When the token is missing or invalid, the response is 403 Forbidden" on every v2 endpoint; v1 stays open', async () => {
    const { default: request } = await import('supertest');
    const anon = request(d.url);
    for (const [m, p] of [
      ['get', '/api/v2/user'],
      ['get', '/api/v2/results'],
      ['get', `/api/v2/nodes/${NODE}/job`],
      ['post', '/api/v2/run_tests'],
      ['get', `/api/v2/nodes/${NODE}/screenshot.png`],
    ] as const) {
      for (const auth of [undefined, 'token fh_00000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'token nonsense', 'Basic abc']) {
        const req = anon[m](p);
        const res = await (auth ? req.set('Authorization', auth) : req);
        expect(res.status, `${p} ${auth}`).to.equal(403);
        expect(res.body.error).to.equal('forbidden');
      }
    }
    expect((await anon.get('/api/v1/results')).status).to.equal(200);
  });

  it('a revoked token is refused on its next request', async () => {
    const bob = await asUser(d, 'bob');
    expect((await bob.get('/api/v2/user')).body).to.deep.equal({ login: 'bob' });
    const { TokenStore, tokensFile } = await import('../../src/storage/tokens.js');
    const store = new TokenStore(tokensFile(d.dataDir));
    const mine = (await store.list()).filter((t) => t.user === 'bob');
    for (const t of mine) await store.revoke(t.id);
    expect((await bob.get('/api/v2/user')).status).to.equal(403);
  });

  it('POST /github/post-receive fetches the test pack at once (no body, no token)', async () => {
    const sha = await d.pack.commit({ 'tests/hook.py': 'def test_hooked():\n    pass\n' }, { ref: 'hooked' });
    const { default: request } = await import('supertest');
    const res = await request(d.url).post('/github/post-receive');
    expect(res.status).to.equal(204);
    // The commit is in the mirror now: resolving it needs no fetch.
    const names = await d.daemon.services.testPack.testCaseNames(sha);
    expect(names).to.include('tests/hook.py::test_hooked');
  });

  it('results.csv and results.xml take the same parameters; the log takes tz; triage_url is a readable page', async () => {
    const res = await run({ test_cases: [PASS, FAIL] });
    await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
    const filter = `job:${res.body.job_uid}`;
    const csv = await as.get('/api/v2/results.csv').query({ filter, sort: 'date:asc', tz: 'Asia/Kathmandu' });
    expect(csv.status).to.equal(200);
    expect(csv.type).to.equal('text/csv');
    const rows = csv.text.trimEnd().split('\r\n');
    expect(rows).to.have.length(3);
    expect(rows[0]).to.match(/^result_id,result_url,triage_url,job_uid,test_case,result,failure_reason,start_time/);
    expect(rows[1]).to.include(PASS).and.include('+05:45');
    const xml = await as.get('/api/v2/results.xml').query({ filter, include_tz: 'false' });
    expect(xml.status).to.equal(200);
    expect(xml.type).to.equal('application/xml');
    expect(xml.text).to.match(/<testsuite [^>]*tests="2"[^>]*failures="1"/);
    expect(xml.text).to.include('<failure');
    expect((await as.get('/api/v2/results.xml').query({ include_tz: 'maybe' })).status).to.equal(400);
    // classname: the test file path by default (as stb-tester's portal), pytest's dotted module on request.
    expect(xml.text).to.include(`classname="${PASS.split('::')[0]}" name="${PASS.split('::')[1]}"`);
    const pytest = await as.get('/api/v2/results.xml').query({ filter, junit_classname: 'pytest' });
    expect(pytest.text).to.include(`classname="${PASS.split('::')[0]!.replace(/\.py$/, '').replaceAll('/', '.')}"`);
    const badStyle = await as.get('/api/v2/results.xml').query({ junit_classname: 'java' });
    expect([badStyle.status, badStyle.body.error]).to.deep.equal([400, 'invalid_request']);
    expect((await as.get('/api/v2/results.csv').query({ sort: 'nope:asc' })).status).to.equal(400);

    const [r] = (await as.get('/api/v2/results').query({ filter, sort: 'date:asc' })).body;
    const utc = (await as.get(`/api/v2/results${r.result_id}/stbt.log`)).text.split('\n')[0]!;
    const tokyo = (await as.get(`/api/v2/results${r.result_id}/farmhand.log`).query({ tz: 'Asia/Tokyo' })).text.split('\n')[0]!;
    expect(utc).to.match(/^\S+\+00:00 /);
    expect(tokyo).to.match(/^\S+\+09:00 /);
    expect(Date.parse(tokyo.split(' ')[0]!)).to.equal(Date.parse(utc.split(' ')[0]!));
    expect((await as.get(`/api/v2/results${r.result_id}/farmhand.log`).query({ tz: 'Not/AZone' })).status).to.equal(400);

    const { default: request } = await import('supertest');
    const page = await request(r.triage_url).get('');
    expect(page.status).to.equal(200);
    expect(page.type).to.equal('text/html');
    expect(page.text).to.include(PASS).and.include('screenshot.png');
  });

  it('GET /api/v2/user answers the token`s login', async () => {
    expect((await as.get('/api/v2/user')).body).to.deep.equal({ login: 'alice' });
  });
});
