/** Retention: the oldest results past the configured count are deleted, and their ids answer 410. */
import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';

describe('retention', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  before(async () => {
    d = await startTestDaemon({ config: { retention: { max_results: 2, min_free_mb: 0 }, capture: { uri: 'none:' } } });
  });
  after(() => d?.stop());

  it('deletes the oldest results past max_results; "the read endpoints answer 410" for them', async () => {
    const pass = 'tests/basic.py::test_pass';
    // The runs' ids in the order they finished, from the daemon's own event hub: polling the list
    // for "the first" can miss it on a fast machine, where two runs may finish between two polls.
    const finished: string[] = [];
    const sub = d.daemon.services.events!.hub.subscribe((e) => {
      if (e.type === 'run.finished') finished.push((e.data as { result_id: string }).result_id);
    });
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [pass, pass, pass] });
    expect(res.status).to.equal(200);
    await waitForJob(d, res.body.job_uid);
    sub.close();
    expect(finished).to.have.length(3);
    const first = finished[0]!;
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

