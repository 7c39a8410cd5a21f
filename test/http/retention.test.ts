/** Retention: the oldest results past the configured count are deleted, and their ids answer 410. */
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { waitFor } from '../helpers/wait.js';

describe('retention', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  before(async () => {
    d = await startTestDaemon({ config: { retention: { max_results: 2, min_free_mb: 0 }, capture: { uri: 'none:' } } });
  });
  after(() => d?.stop());

  it('deletes the oldest results past max_results; "the read endpoints answer 410" for them', async () => {
    const pass = 'tests/basic.py::test_pass';
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [pass, pass, pass] });
    expect(res.status).to.equal(200);
    // Note the first run's id while the job runs; by the end retention has removed it.
    const first = await waitFor(async () => {
      const r = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<{ result_id: string }>;
      return r[0]?.result_id;
    }, 'the first result to be listed');
    await waitForJob(d, res.body.job_uid);
    const ids = (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body.map((r: { result_id: string }) => r.result_id);
    expect(ids).to.have.length(2).and.not.include(first);
    expect((await d.http.get('/api/v1/results')).body).to.have.length(2);
    const deletedId = first;
    for (const suffix of ['/', '/farmhand.log', '/stbt.log', '/screenshot.png', '/artifacts/', '/artifacts/test-name']) {
      const r = await d.http.get(`/api/v1/result${deletedId}${suffix}`);
      expectError(r, 410, 'gone', suffix);
    }
    expect(existsSync(d.daemon.services.results.dirOf(deletedId))).to.equal(false);
  });
});

