/**
 * Load: 500 concurrent mixed requests (results lists, screenshots, job
 * status, artifacts, CSV, v2 with several tokens, anonymous v1) against a
 * whole daemon, while one well-behaved client polls as a CI job does.
 * Latency numbers, and the long run of 20,000, come from `bench/soak/load.ts` (`npm run soak`); here only the
 * guarantees, at a size the default lane can afford.
 */
import { expect } from 'chai';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { runLoad } from './load-lib.js';

const PACK = { 'tests/t.py': 'def test_pass():\n    print("ok")\n\ndef test_fail():\n    assert False, "no"\n' };

const TOTAL = 500;

describe('load: 500 concurrent mixed requests from several clients', function () {
  this.timeout(120_000);
  let d: TestDaemon;

  before(async () => {
    // The shipped rate limit (the test helper's own is generous): the guarantees are about the defaults.
    d = await startTestDaemon({ files: PACK, config: { rate_limit: {} } });
    await waitOnline(d);
  });
  after(async () => {
    await d?.stop();
  });

  it('only 200, 4xx or 429 come back (never 5xx), the daemon stays up, and the well-behaved client gets no 429', async () => {
    const run = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/t.py::test_pass', 'tests/t.py::test_fail'] });
    expect(run.status, run.text).to.equal(200);
    await waitForJob(d, run.body.job_uid);
    const results = (await d.http.get('/api/v1/results')).body as Array<{ result_id: string }>;
    const store = new TokenStore(tokensFile(d.dataDir));
    const tokens = await Promise.all(['ci-a', 'ci-b', 'ci-c', 'ci-d'].map(async (u) => (await store.create(u)).token));
    const quietToken = (await store.create('quiet')).token;

    const report = await runLoad(
      { url: d.url, tokens, quietToken, nodeId: d.config.node_id, jobUid: run.body.job_uid, resultIds: results.map((r) => r.result_id) },
      TOTAL,
      64,
      { count: 40, pauseMs: 50 },
    );
    expect(report.sent).to.equal(TOTAL);
    expect(report.networkErrors, 'connections refused or reset').to.equal(0);
    const odd = Object.keys(report.statuses).map(Number).filter((s) => !(s === 200 || (s >= 400 && s < 500)));
    expect(odd, `statuses: ${JSON.stringify(report.statuses)}`).to.deep.equal([]);
    expect(report.statuses[200] ?? 0, 'many requests succeed').to.be.greaterThan(TOTAL / 4);
    expect(report.quiet.statuses, 'the well-behaved client').to.deep.equal({ 200: 40 });
    const alive = await d.http.get(`/api/v1/jobs${run.body.job_uid}`);
    expect(alive.status).to.equal(200);
  });
});
