/**
 * The v2 API on this one node (test/http/v2Api.ts; the same tests through a portal and through 3 portal replicas are
 * v2-portal.test.ts and v2-replicas.test.ts), and the hold time of await_completion, with a daemon of its own.
 * FARMHAND_TEST_THROUGH_PORTAL=1 or FARMHAND_TEST_THROUGH_REPLICAS=n runs this file's v2 API tests that way instead.
 */
import { expect } from 'chai';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { throughPortal, throughReplicas } from '../helpers/farm.js';
import { asUser } from '../helpers/auth.js';
import { waitForRunOutput } from '../helpers/runs.js';
import { describeV2Api } from './v2Api.js';

const HANG = 'tests/hang.py::test_hang';
const NODE = 'farmhand-test';

describeV2Api(throughReplicas() > 0 ? { replicas: throughReplicas() } : throughPortal() ? 'portal' : 'node');

describe('v2 await_completion hold time', function () {
  this.timeout(90_000);
  let d: TestDaemon;
  let as: Awaited<ReturnType<typeof asUser>>;

  before(async () => {
    d = await startTestDaemon({ config: { api: { await_completion_secs: 1 }, runner: { stop_response_secs: 60 } } });
    as = await asUser(d, 'alice');
    await waitOnline(d);
  });
  after(() => d?.stop());

  it('answers 202 with the Job object when the hold time passes and the job is still running', async () => {
    const res = await as.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: [HANG] });
    expect(res.status, res.text).to.equal(200);
    try {
      // Only the hold timer can end this call: the job hangs until the stop below.
      await waitForRunOutput(d, res.body.job_uid, 'about to hang');
      const held = await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
      expect(held.status, held.text).to.equal(202);
      expect(held.body).to.include({ job_uid: res.body.job_uid, status: 'running' });
      expect(d.daemon.services.jobs.current()).to.include({ job_uid: res.body.job_uid, status: 'running' });
    } finally {
      expect((await as.post(`/api/v2/jobs${res.body.job_uid}/stop`)).status).to.equal(200);
    }
  });
});
