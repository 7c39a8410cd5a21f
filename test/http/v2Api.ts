/**
 * The v2 API for this one node: jobs, node-level job endpoints, long polls, stop by PUT and POST, results, the
 * extra v2 fields. Run three ways, each its own test file so that `npm test` runs them side by side in its workers
 * (docs/testing.md, "Where the time goes"): on the node itself (test/http/v2.test.ts), through a farm portal in
 * front of it (v2-portal.test.ts) and through 3 portal replicas behind a real HAProxy (v2-replicas.test.ts).
 */
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { expect } from 'chai';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { startNodeBehindPortal, type TestFarm } from '../helpers/farm.js';
import { PgTokens } from '../../src/farm/users.js';
import { asUser } from '../helpers/auth.js';
import { expectError } from '../helpers/errors.js';
import { waitForRunOutput } from '../helpers/runs.js';
import { heldFiles, holdCheckouts } from '../helpers/heldCheckout.js';
import { waitFor } from '../helpers/wait.js';

const PASS = 'tests/basic.py::test_pass';
const FAIL = 'tests/basic.py::test_fail';
const HANG = 'tests/hang.py::test_hang';
const TAGS = 'tests/config_tags.py::test_tags';

const NODE = 'farmhand-test';

/** Where the calls go: the node itself, a portal in front of it, or `replicas` portal replicas behind HAProxy. */
export type V2Route = 'node' | 'portal' | { replicas: number };

export function describeV2Api(through: V2Route): void {
  const title = through === 'node' ? 'v2 API' : through === 'portal' ? 'v2 API through a portal' : `v2 API through ${through.replicas} portal replicas behind HAProxy`;
  describe(title, function () {
    this.timeout(90_000);
    let d: TestDaemon;
    let as: Awaited<ReturnType<typeof asUser>>;

    before(async () => {
      // A hold time far beyond mocha's: here await_completion answers only when the job ends (the hold
      // time firing is tested with a daemon of its own in test/http/v2.test.ts); a stop answers 200 once stopped, however
      // loaded the machine is.
      const opts = { config: { api: { await_completion_secs: 600 }, runner: { stop_response_secs: 60 } } };
      d = await (through === 'node' ? startTestDaemon(opts) : startNodeBehindPortal({ ...opts, replicas: through === 'portal' ? 0 : through.replicas }));
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
      expectError(await run({ node_id: 'other-node', test_cases: [PASS] }), 404, 'not_found', 'run_tests');
      expectError(await as.get('/api/v2/nodes/other-node/job'), 404, 'not_found', 'job');
      expectError(await as.get('/api/v2/nodes/other-node/screenshot.png'), 404, 'not_found', 'screenshot');
      expectError(await run({ node_id: 7, test_cases: [PASS] }), 400, 'invalid_request', 'numeric node_id');
    });

    it('await_completion holds the request while the job runs and answers 200 with the Job object when the job ends', async () => {
      const res = await run({ test_cases: [HANG] });
      expect(res.status, res.text).to.equal(200);
      const node = await as.get(`/api/v2/nodes/${NODE}/job`);
      expect(node.body.job_uid).to.equal(res.body.job_uid);
      // The force sequence of COMPAT: nodes/<id>/job, jobs/<uid>, stop, run_tests again.
      let answered = false;
      const waiting = as.get(`/api/v2/nodes/${NODE}/job/await_completion`).then((w) => ((answered = true), w));
      await waitForRunOutput(d, res.body.job_uid, 'about to hang');
      expect(answered, 'await_completion answered while the job was still running').to.equal(false);
      const stopped = await as.put(`/api/v2/jobs${res.body.job_uid}/stop`);
      expect(stopped.status).to.equal(200);
      expect(stopped.body.status).to.equal('exited');
      const w = await waiting;
      expect(w.status).to.equal(200);
      expect(w.body).to.include({ job_uid: res.body.job_uid, status: 'exited' });
      expect((await as.post(`/api/v2/jobs${res.body.job_uid}/stop`)).status).to.equal(200);
    });

    it('the node\'s job links the log and triage page of its first run while that run is in progress, and both links answer', async () => {
      const res = await run({ test_cases: [HANG] });
      expect(res.status, res.text).to.equal(200);
      try {
        // The first run starts once the test pack is checked out.
        const job: Record<string, any> = await waitFor(
          async () => {
            const j = (await as.get(`/api/v2/nodes/${NODE}`)).body.job;
            // Before the first run starts, the job's own log (tested below); then the run's.
            return typeof j?.log_url === 'string' && j.log_url.includes('/api/v2/results/') ? j : undefined;
          },
          { what: 'the node`s job to link its first run', timeoutMs: 60_000 },
        );
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
        // The next test starts a job of its own: this one must be stopped, and a refused stop said so.
        const stop = await as.post(`/api/v2/jobs${res.body.job_uid}/stop`);
        expect(stop.status, `stopping the job: ${stop.text}`).to.equal(200);
        await waitForJob(d, res.body.job_uid);
      }
    });

    it('the node\'s job carries log_url and triage_url as strings from its start, before its first run, and both answer', async () => {
      // The first run waits for its checkout, held here: the job is started and has no run yet.
      const held = await holdCheckouts(path.join(d.dataDir, 'test-pack.git'));
      const sha = await d.pack.commit(heldFiles());
      let uid: string | undefined;
      try {
        const res = await run({ test_pack_revision: sha, test_cases: [HANG] });
        expect(res.status, res.text).to.equal(200);
        uid = res.body.job_uid as string;
        await waitFor(async () => (await held.heldCount()) > 0, { what: 'the first run`s checkout to be held', timeoutMs: 60_000 });
        const job = (await as.get(`/api/v2/nodes/${NODE}`)).body.job;
        expect(job).to.include({ job_uid: uid, status: 'running', log_url: `${d.url}/api/v2/jobs${uid}/log`, triage_url: `${d.url}/app/jobs${uid}` });
        // The job's log: nothing written so far, never cached.
        const log = await as.get(job.log_url.slice(d.url.length));
        expect(log.status, log.text).to.equal(200);
        expect(log.type).to.equal('text/plain');
        expect(log.text).to.equal('');
        expect(log.headers['cache-control']).to.equal('no-store');
        // The job's page.
        const page = await as.get(job.triage_url.slice(d.url.length));
        expect(page.status, page.text).to.equal(200);
        expect(page.type).to.equal('text/html');
        expect(page.text).to.include(`Job ${uid.slice(uid.lastIndexOf('/') + 1)}`);
        expect(await held.heldCount(), 'the first run started while the links were read').to.be.greaterThan(0);

        // Once the first run is in progress the node links it, and the job's log leads there (query kept).
        await held.release();
        const running: Record<string, any> = await waitFor(
          async () => {
            const j = (await as.get(`/api/v2/nodes/${NODE}`)).body.job;
            return j?.log_url !== job.log_url ? j : undefined;
          },
          { what: 'the node`s job to link its first run', timeoutMs: 60_000 },
        );
        expect(running.log_url).to.match(new RegExp(`^${d.url}/api/v2/results${uid}/\\d{4}-\\d{2}-\\d{2}_\\d{2}\\.\\d{2}\\.\\d{2}/farmhand\\.log$`));
        const moved = await as.get(`/api/v2/jobs${uid}/log?tz=Europe/Oslo`);
        expect(moved.status, moved.text).to.equal(302);
        expect(moved.headers['cache-control']).to.equal('no-store');
        expect(`${d.url}${moved.headers.location}`).to.equal(`${running.log_url}?tz=Europe/Oslo`);
        const followed = await as.get(moved.headers.location!);
        expect(followed.status, followed.text).to.equal(200);
        expect(followed.type).to.equal('text/plain');
        expectError(await as.get(`/api/v2/jobs/${NODE}/0000/999999/log`), 404, 'not_found', 'an unknown job`s log');
      } finally {
        await held.cleanup();
        if (uid) {
          const stop = await as.post(`/api/v2/jobs${uid}/stop`);
          expect(stop.status, `stopping the job: ${stop.text}`).to.equal(200);
          await waitForJob(d, uid);
        }
      }
    });

    it('Idempotency-Key (not in the spec): the same key again answers the job it started, running or ended, and starts none; a bad key is 400', async () => {
      const key = randomUUID();
      const first = await run({ test_cases: [HANG] }).set('Idempotency-Key', key);
      expect(first.status, first.text).to.equal(200);
      try {
        const again = await run({ test_cases: [HANG] }).set('Idempotency-Key', key);
        expect(again.status, again.text).to.equal(200);
        expect(again.body).to.include({ job_uid: first.body.job_uid, status: 'running' });
        const other = await run({ test_cases: [HANG] }).set('Idempotency-Key', randomUUID());
        expect(other.status, 'another key while the job runs: busy').to.equal(409);
      } finally {
        expect((await as.post(`/api/v2/jobs${first.body.job_uid}/stop`)).status).to.equal(200);
      }
      const ended = await run({ test_cases: [PASS] }).set('Idempotency-Key', key);
      expect(ended.status, ended.text).to.equal(200);
      expect(ended.body).to.include({ job_uid: first.body.job_uid, status: 'exited' });
      const bad = await run({ test_cases: [PASS] }).set('Idempotency-Key', 'has a space');
      expect(bad.status, bad.text).to.equal(400);
      expect(bad.body.error).to.equal('invalid_request');
      expect(bad.body.message).to.match(/^Idempotency-Key must be/);
    });

    it('POST /api/v2/nodes/{node_id}/job/stop stops the node`s job', async () => {
      const res = await run({ test_cases: [HANG] });
      expect(res.status, res.text).to.equal(200);
      await waitForRunOutput(d, res.body.job_uid, 'about to hang');
      const stop = await as.post(`/api/v2/nodes/${NODE}/job/stop`);
      expect(stop.status).to.equal(200);
      expect(stop.body).to.include({ job_uid: res.body.job_uid, status: 'exited' });
      const again = await as.get(`/api/v2/nodes/${NODE}/job/await_completion`);
      expect(again.status).to.equal(200);
    });

    // How fast the waiters are answered is a figure of bench/v2-bench.ts (1,000 waiters).
    it('200 concurrent await_completion requests on one job all return 200 with the ended job when it ends', async () => {
      const res = await run({ test_cases: [HANG] });
      expect(res.status, res.text).to.equal(200);
      const early: string[] = [];
      let ended = false;
      const waiters = Array.from({ length: 200 }, () =>
        as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`).then((r) => (ended || early.push(`${r.status} ${r.text}`), r)),
      );
      try {
        await waitForRunOutput(d, res.body.job_uid, 'about to hang');
        expect(early, 'answers before the job ended').to.deep.equal([]);
      } finally {
        ended = true;
        expect((await as.post(`/api/v2/jobs${res.body.job_uid}/stop`)).status).to.equal(200);
      }
      for (const r of await Promise.all(waiters)) {
        expect(r.status, r.text).to.equal(200);
        expect(r.body).to.include({ job_uid: res.body.job_uid, status: 'exited' });
      }
      expect((await waitForJob(d, res.body.job_uid)).status).to.equal('exited');
    });

    it('results as JSON with filter, sort and tz; bad values are 400', async () => {
      const res = await run({ test_cases: [FAIL] });
      await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
      const fails = (await as.get('/api/v2/results').query({ filter: `job:${res.body.job_uid} result:fail`, tz: 'Europe/London', sort: 'date:asc' })).body;
      expect(fails).to.have.length(1);
      expect(fails[0].failure_reason).to.equal('AssertionError: arithmetic is broken');
      expectError(await as.get('/api/v2/results').query({ tz: 'Nowhere/Else' }), 400, 'invalid_request', 'tz');
      expectError(await as.get('/api/v2/results').query({ filter: 'bogus:1' }), 400, 'invalid_filter', 'filter');
    });

    it('"When the token is missing or invalid, the response is 403 Forbidden" on every v2 endpoint; v1 stays open', async () => {
      const { client: request } = await import('../helpers/contract.js');
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
          expectError(res, 403, 'forbidden', `${m} ${p} ${auth}`);
        }
      }
      // v1 is the appliance's own API: a portal has none (docs/farm.md).
      if (through === 'node') expect((await anon.get('/api/v1/results')).status).to.equal(200);
    });

    it('a revoked token is refused on its next request', async () => {
      const bob = await asUser(d, 'bob');
      expect((await bob.get('/api/v2/user')).body).to.deep.equal({ login: 'bob' });
      const farm = (d as TestDaemon & { farm?: Pick<TestFarm, 'db'> }).farm;
      if (farm) {
        // Behind a portal tokens are in PostgreSQL; each portal hears of a revocation by NOTIFY (docs/farm.md: within 30 s at most).
        const tokens = new PgTokens(farm.db);
        for (const t of (await tokens.list()).filter((x) => x.user === 'bob')) await tokens.revoke(t.id);
        await waitFor(async () => (await bob.get('/api/v2/user')).status === 403, { what: 'the revoked token refused at the portal', timeoutMs: 40_000 });
        return;
      }
      const { TokenStore, tokensFile } = await import('../../src/storage/tokens.js');
      const store = new TokenStore(tokensFile(d.dataDir));
      const mine = (await store.list()).filter((t) => t.user === 'bob');
      for (const t of mine) await store.revoke(t.id);
      expectError(await bob.get('/api/v2/user'), 403, 'forbidden', 'revoked token');
    });

    it('POST /github/post-receive fetches the test pack at once (no body, no token)', async () => {
      const sha = await d.pack.commit({ 'tests/hook.py': 'def test_hooked():\n    pass\n' }, { ref: 'hooked' });
      const { client: request } = await import('../helpers/contract.js');
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
      expectError(await as.get('/api/v2/results.xml').query({ include_tz: 'maybe' }), 400, 'invalid_request', 'include_tz');
      // classname: the test file path by default (as stb-tester's portal), pytest's dotted module on request.
      expect(xml.text).to.include(`classname="${PASS.split('::')[0]}" name="${PASS.split('::')[1]}"`);
      const pytest = await as.get('/api/v2/results.xml').query({ filter, junit_classname: 'pytest' });
      expect(pytest.text).to.include(`classname="${PASS.split('::')[0]!.replace(/\.py$/, '').replaceAll('/', '.')}"`);
      const badStyle = await as.get('/api/v2/results.xml').query({ junit_classname: 'java' });
      expectError(badStyle, 400, 'invalid_request', 'junit_classname');
      expectError(await as.get('/api/v2/results.csv').query({ sort: 'nope:asc' }), 400, 'invalid_request', 'sort');

      const [r] = (await as.get('/api/v2/results').query({ filter, sort: 'date:asc' })).body;
      const utc = (await as.get(`/api/v2/results${r.result_id}/stbt.log`)).text.split('\n')[0]!;
      const tokyo = (await as.get(`/api/v2/results${r.result_id}/farmhand.log`).query({ tz: 'Asia/Tokyo' })).text.split('\n')[0]!;
      expect(utc).to.match(/^\S+\+00:00 /);
      expect(tokyo).to.match(/^\S+\+09:00 /);
      expect(Date.parse(tokyo.split(' ')[0]!)).to.equal(Date.parse(utc.split(' ')[0]!));
      expectError(await as.get(`/api/v2/results${r.result_id}/farmhand.log`).query({ tz: 'Not/AZone' }), 400, 'invalid_request', 'log tz');

      const { client: request } = await import('../helpers/contract.js');
      const page = await request(r.triage_url).get('');
      expect(page.status).to.equal(200);
      expect(page.type).to.equal('text/html');
      expect(page.text).to.include(PASS).and.include('screenshot.png');
    });

    it('GET /api/v2/user answers the token`s login', async () => {
      expect((await as.get('/api/v2/user')).body).to.deep.equal({ login: 'alice' });
    });
  });
}
