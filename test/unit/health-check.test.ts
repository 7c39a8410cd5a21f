import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { BUSY_RECHECK_MS, HealthCheckService, healthCheckTestCase, type HealthCheckSettings } from '../../src/core/healthCheck.js';
import { infrastructureReason } from '../../src/core/infrastructure.js';
import type { ResultRecord } from '../../src/core/model.js';
import { parseIniConfig } from '../../src/runner/iniConfig.js';
import { FakeClock } from '../fixtures/fakeClock.js';
import { resultRecord } from '../fixtures/records.js';

const CHECK = 'tests/health.py::test_health';
const HOUR = 3600_000;

/** A node around the service: jobs it starts end when the test says, with the result the test gives. */
function harness(settings: Partial<HealthCheckSettings> = {}) {
  const clock = new FakeClock(Date.parse('2030-01-01T00:00:00Z'));
  const started: string[] = [];
  const endings = new Map<string, () => void>();
  let busy = false;
  let testCase: string | undefined = CHECK;
  let refuse: Error | undefined;
  const svc = new HealthCheckService({
    testCase: async () => testCase,
    start: async () => {
      if (refuse) throw refuse;
      const uid = `/node/abcd/${started.length + 1}`;
      started.push(uid);
      return uid;
    },
    whenEnded: (uid) => new Promise<void>((resolve) => endings.set(uid, resolve)),
    busy: () => busy,
    settings: { afterInfrastructureErrors: 3, intervalSecs: 24 * 3600, retrySecs: 300, ...settings },
    clock,
  });
  const flush = () => new Promise<void>((r) => setImmediate(r));
  return {
    clock,
    svc,
    started,
    setBusy: (b: boolean) => (busy = b),
    setTestCase: (t: string | undefined) => (testCase = t),
    refuse: (e: Error | undefined) => (refuse = e),
    flush,
    /** The check job `uid` records `over` and ends. */
    async end(uid: string, over: Partial<ResultRecord>) {
      await flush();
      svc.observe(resultRecord({ job_uid: uid, result_id: `${uid}/2030-01-01_00.00.00`, category: 'health-check', ...over }));
      endings.get(uid)!();
      await flush();
      await flush();
    },
  };
}

const infraError = (n: number) =>
  resultRecord({ job_uid: '/node/abcd/99', result_id: `/node/abcd/99/${n}`, result: 'error', failure_reason: infrastructureReason('capture_lost', 'x'), infrastructure_error: 'capture_lost' });

describe('HealthCheckService (core/healthCheck.ts)', () => {
  it('runs at start; a failed check makes the node unavailable with the reason, a passing retry brings it back', async () => {
    const h = harness();
    expect(h.svc.status().state).to.equal('unknown');
    h.svc.start();
    await h.flush();
    expect(h.started).to.have.length(1);
    expect(h.svc.problem()).to.equal(null); // running: the node is busy with the check's job, not unhealthy
    await h.end(h.started[0]!, { result: 'error', failure_reason: infrastructureReason('ir_transport', 'IR Toy was disconnected') });
    expect(h.svc.status()).to.include({ state: 'bad', running: false, test_case: CHECK });
    expect(h.svc.problem()).to.equal('health check failed: InfrastructureError: ir_transport: IR Toy was disconnected');
    h.clock.advance(299_999);
    await h.flush();
    expect(h.started).to.have.length(1);
    h.clock.advance(1);
    await h.flush();
    expect(h.started).to.have.length(2); // the retry
    await h.end(h.started[1]!, { result: 'pass' });
    expect(h.svc.status().state).to.equal('good');
    expect(h.svc.problem()).to.equal(null);
  });

  it('after N infrastructure errors in a row; a run without one resets the count; the check\'s own result is not counted', async () => {
    const h = harness({ intervalSecs: 0 });
    h.svc.start();
    await h.end((await h.flush(), h.started[0]!), { result: 'pass' });
    h.svc.observe(infraError(1));
    h.svc.observe(infraError(2));
    h.svc.observe(resultRecord({ result: 'fail', failure_reason: 'AssertionError: x' })); // the script's fault: count starts again
    h.svc.observe(infraError(3));
    h.svc.observe(infraError(4));
    await h.flush();
    expect(h.started).to.have.length(1);
    h.svc.observe(infraError(5));
    await h.flush();
    expect(h.started).to.have.length(2);
    await h.end(h.started[1]!, { result: 'error', failure_reason: infrastructureReason('capture_lost', 'y') });
    expect(h.svc.status().state).to.equal('bad');
  });

  it('periodically while it passes (interval from the end of the last check); 0 turns it off', async () => {
    const h = harness({ intervalSecs: 24 * 3600 });
    h.svc.start();
    await h.flush();
    await h.end(h.started[0]!, { result: 'pass' });
    h.clock.advance(24 * HOUR - 1);
    await h.flush();
    expect(h.started).to.have.length(1);
    h.clock.advance(1);
    await h.flush();
    expect(h.started).to.have.length(2);

    const off = harness({ intervalSecs: 0 });
    off.svc.start();
    await off.flush();
    await off.end(off.started[0]!, { result: 'pass' });
    off.clock.advance(1000 * 24 * HOUR);
    await off.flush();
    expect(off.started).to.have.length(1);
  });

  it('never while the node is busy: a due check waits until the job has ended', async () => {
    const h = harness();
    h.setBusy(true);
    h.svc.start();
    h.clock.advance(10 * BUSY_RECHECK_MS);
    await h.flush();
    expect(h.started).to.have.length(0);
    h.setBusy(false);
    h.clock.advance(BUSY_RECHECK_MS);
    await h.flush();
    expect(h.started).to.have.length(1);
  });

  it('a job that got in first (409) defers the check; a test case that cannot start is a failed check', async () => {
    const h = harness();
    h.refuse(new FarmError('conflict', 'a test job is already running'));
    h.svc.start();
    await h.flush();
    await h.flush();
    expect(h.svc.status().state).to.equal('unknown');
    h.refuse(new FarmError('invalid_request', `test case(s) not found at 0123456789: ${CHECK}`));
    h.clock.advance(BUSY_RECHECK_MS);
    await h.flush();
    await h.flush();
    expect(h.svc.problem()).to.match(/^health check failed: could not start tests\/health.py::test_health: test case\(s\) not found/);
  });

  it('a test pack that names no health check: state none, the node is never held back, infrastructure errors start nothing', async () => {
    const h = harness({ afterInfrastructureErrors: 1 });
    h.setTestCase(undefined);
    h.svc.start();
    await h.flush();
    await h.flush();
    expect(h.svc.status().state).to.equal('none');
    h.svc.observe(infraError(1));
    await h.flush();
    await h.flush();
    expect(h.started).to.have.length(0);
    expect(h.svc.problem()).to.equal(null);
  });

  it('reads test_pack.health_check from the node\'s own config first, else the test pack\'s', async () => {
    const files: Record<string, string> = { 'config/test-farm/n1.conf': '[test_pack]\nhealth_check = tests/own.py::test_own\n' };
    const tp = {
      resolve: async () => ({ sha: 'a'.repeat(40), branch: 'main' }),
      config: async () => ({ test_pack: { health_check: ' tests/health.py::test_health ' } }),
      readFile: async (_sha: string, p: string) => files[p],
    };
    expect(await healthCheckTestCase(tp, 'config/test-farm/n1.conf', parseIniConfig)).to.equal('tests/own.py::test_own');
    expect(await healthCheckTestCase(tp, 'config/test-farm/n2.conf', parseIniConfig)).to.equal(CHECK);
    expect(await healthCheckTestCase({ ...tp, config: async () => ({}) }, 'config/test-farm/n2.conf', parseIniConfig)).to.equal(undefined);
  });
});
