/**
 * Infrastructure faults injected through the real paths, with a real daemon,
 * real ffmpeg, real python children and the fake IR Toy on a pty: each gives
 * an `error` result of the right kind (detail, farmhand.log), and the health
 * check the test pack names takes the node out of service while it fails and
 * brings it back once it passes (docs/health-checks.md). Every wait is on a
 * condition; the small retry_secs only sets how soon the node looks again.
 */
import { expect } from 'chai';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { HEALTH_CHECK_CATEGORY } from '../../src/core/healthCheck.js';
import type { NodeState } from '../../src/core/node.js';
import { parseResultQuery } from '../../src/core/query.js';
import type { ResultRecord } from '../../src/core/model.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import type { FfmpegFrameSource } from '../../src/hardware/capture/index.js';
import { silentLogger } from '../../src/logger.js';
import { startFakeIrToy, startPtyPair, type FakeIrToyProcess, type PtyPair } from '../fixtures/fakeIrToy.js';
import { necRemote } from '../fixtures/remotes.js';
import { makeTestPack, type Files, type TestPackRepo } from '../fixtures/testPack.js';
import { testConfig, type TestConfig } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const REQ = { test_pack_revision: 'main', category: 'faults', soak: 'run once' as const, shuffle: false, remote_control: null };
const ALICE = { user: 'alice', api: 'v2' as const };
/** The v1 remote rule: a test pack without remotes runs with none. */
const ALICE_V1 = { user: 'alice', api: 'v1' as const };

async function start(pack: TestPackRepo, dataDir: string, config: TestConfig, irUri?: string): Promise<Daemon> {
  const cfg = testConfig(pack.dir, dataDir, config);
  // The schema wants irtoy:/dev/...; the pty's link lives in a temporary folder.
  if (irUri) cfg.ir.uri = irUri;
  return startDaemon(cfg, silentLogger);
}

const results = (d: Daemon, filter: string): ResultRecord[] => d.services.results.query(parseResultQuery({ filter, sort: 'date:asc' }, { limit: 1000 }));
const recorded = (d: Daemon, jobUid: string): Promise<ResultRecord[]> =>
  waitFor(() => {
    const rs = results(d, `job:${jobUid}`);
    return rs.length === 1 ? rs : undefined;
  }, { what: `the run of ${jobUid} to be recorded`, timeoutMs: 60_000 });
const nodeState = async (d: Daemon): Promise<NodeState> => (await d.services.policy.status(ALICE)).value;

/** Run one test case through the node policy (as run_tests does) and wait for its result. */
async function runOne(d: Daemon, testCase: string, tags: Record<string, string> = {}): Promise<{ jobUid: string }> {
  const job = (await d.services.policy.runTests(ALICE_V1, { ...REQ, test_cases: [testCase], tags })).value;
  return { jobUid: job.job_uid };
}

describe('infrastructure faults through the real paths', function () {
  this.timeout(180_000);

  describe('IR blaster unplugged mid-press (fake IR Toy on a pty)', () => {
    let dir: string;
    let dataDir: string;
    let pty: PtyPair;
    let fake: FakeIrToyProcess | undefined;
    let pack: TestPackRepo;
    let d: Daemon | undefined;
    const files: Files = {
      'config/stbt.conf': '[test_pack]\ndefault_remote_control = box\nhealth_check = tests/health.py::test_health\n',
      'config/remote-control/box.lircd.conf': necRemote('box', 0x7a85, { KEY_OK: 0x08f7 }),
      'tests/health.py': 'import farmhand\n\ndef test_health():\n    farmhand.press("KEY_OK")\n',
      'tests/ir.py': 'import farmhand\n\ndef test_press():\n    farmhand.press("KEY_OK")\n',
    };

    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-faults-ir-'));
      dataDir = path.join(dir, 'data');
      pty = await startPtyPair(dir);
      fake = await startFakeIrToy(pty.b);
      pack = await makeTestPack(files);
      // retry_secs 3: the refusals below are read between the failed check and its retry; a retry in progress
      // would answer "busy" (409) instead of device_unavailable.
      d = await start(pack, dataDir, { health_check: { after_infrastructure_errors: 1, retry_secs: 3, interval_secs: 0 } }, `irtoy:${pty.a}`);
    });
    after(async () => {
      await d?.stop();
      await fake?.stop();
      await pty.stop();
      await pack.cleanup();
      await rm(dir, { recursive: true, force: true });
    });

    it('the press fails as ir_transport; the health check fails with it, the node is unavailable with the reason, and returns once the blaster is back', async () => {
      // The check at start presses a key through the blaster: it passes.
      await waitFor(() => d!.healthCheck.status().state === 'good', { what: 'the start-up health check to pass', timeoutMs: 60_000 });
      expect(await fake!.next()).to.have.property('durations');

      // Pulled out as the next transmission starts.
      await fake!.stop();
      fake = await startFakeIrToy(pty.b, 'unplug-on-transmit');
      const { jobUid } = await runOne(d!, 'tests/ir.py::test_press');
      const [r] = await recorded(d!, jobUid);
      expect(r).to.include({ result: 'error', infrastructure_error: 'ir_transport' });
      expect(r!.failure_reason).to.match(/^InfrastructureError: ir_transport: IR transport failed during a key press \(KEY_OK\): IR Toy on /);
      const detail = await request(d!.url).get(`/api/v1/result${r!.result_id}`);
      expect(detail.body).to.include({ infrastructure_error: 'ir_transport' });
      expect(await readFile(path.join(d!.services.results.dirOf(r!.result_id), 'farmhand.log'), 'utf8')).to.contain('Infrastructure fault during the run: ir_transport: ');

      // One infrastructure error (after_infrastructure_errors 1): the check runs, cannot press, fails.
      const down = await waitFor(async () => {
        const s = await nodeState(d!);
        return s.not_available_reason?.startsWith('health check failed: ') ? s : undefined;
      }, { what: 'the node to be held back by the failed health check', timeoutMs: 60_000 });
      expect(down.available).to.equal(false);
      expect(down.not_available_reason).to.match(/^health check failed: InfrastructureError: ir_transport: /);
      const refused = await d!.services.policy.runTests(ALICE, { ...REQ, test_cases: ['tests/ir.py::test_press'], tags: {} }).catch((e: unknown) => e);
      expect(refused).to.include({ code: 'device_unavailable' });
      const refusedV1 = await request(d!.url).post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/ir.py::test_press'] });
      expect(refusedV1.status).to.equal(503);
      expect(refusedV1.body).to.include({ error: 'device_unavailable' });

      // Plugged in again: a retry passes and the node is back.
      await fake.stop();
      fake = await startFakeIrToy(pty.b);
      await waitFor(async () => (await nodeState(d!)).available, { what: 'the node to be available again', timeoutMs: 60_000 });
      expect(d!.healthCheck.status()).to.include({ state: 'good' });
      const checks = results(d!, `category:${HEALTH_CHECK_CATEGORY}`);
      expect(checks.map((c) => c.result)).to.include.members(['pass', 'error']);
      expect(checks.at(-1)).to.include({ result: 'pass', test_case: 'tests/health.py::test_health', category: 'health-check' });
      expect(checks.filter((c) => c.result === 'error').every((c) => c.infrastructure_error === 'ir_transport')).to.equal(true);
    });
  });

  describe('capture lost mid-run (ffmpeg killed)', () => {
    let dir: string;
    let pack: TestPackRepo;
    let d: Daemon | undefined;
    const files: Files = {
      'config/stbt.conf': '[test_pack]\nhealth_check = tests/health.py::test_health\n',
      'tests/health.py': 'import farmhand\n\ndef test_health():\n    farmhand.get_frame()\n',
      'tests/watch.py': [
        'import os, time',
        'import farmhand',
        '',
        'def test_watch():',
        '    flag = farmhand.get_config("result.tags", "flag")',
        '    open("started", "w").close()',
        '    while not os.path.exists(flag):',
        '        time.sleep(0.02)',
        '    assert False, "the picture went away"',
        '',
      ].join('\n'),
    };

    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-faults-capture-'));
      pack = await makeTestPack(files);
      d = await start(pack, path.join(dir, 'data'), { health_check: { after_infrastructure_errors: 1, retry_secs: 1, interval_secs: 0 } });
    });
    after(async () => {
      await d?.stop();
      await pack.cleanup();
      await rm(dir, { recursive: true, force: true });
    });

    it('a run during which ffmpeg died is capture_lost; the node is offline meanwhile, and the health check it triggers brings it back', async () => {
      await waitFor(() => d!.healthCheck.status().state === 'good', { what: 'the start-up health check to pass', timeoutMs: 60_000 });
      const checksBefore = results(d!, `category:${HEALTH_CHECK_CATEGORY}`).length;
      const flag = path.join(dir, 'flag');
      const { jobUid } = await runOne(d!, 'tests/watch.py::test_watch', { flag });
      const runDir = await waitFor(() => {
        const id = d!.services.jobs.get(jobUid)?.current_run?.result_id;
        return id && d!.services.results.dirOf(id);
      }, 'the run to start');
      await waitFor(() => readFile(path.join(runDir, 'started')).then(() => true), { what: 'the test to be running', timeoutMs: 60_000 });

      const frames = d!.services.frames as FfmpegFrameSource;
      const pid = frames.pid()!;
      process.kill(pid, 'SIGKILL');
      await waitFor(() => !frames.health().online, 'capture to go offline');
      expect((await nodeState(d!)).not_available_reason).to.match(/^offline: /);
      await writeFile(flag, '');

      const [r] = await recorded(d!, jobUid);
      expect(r).to.include({ result: 'error', infrastructure_error: 'capture_lost' });
      expect(r!.failure_reason).to.match(/^InfrastructureError: capture_lost: capture lost during the run: .*SIGKILL/);
      expect(r!.failure_reason).to.contain("the test's own outcome was fail: AssertionError: the picture went away");
      expect(await readFile(path.join(runDir, 'farmhand.log'), 'utf8')).to.contain('Infrastructure fault during the run: capture_lost: ');
      const csv = await request(d!.url).get('/api/v1/results').query({ filter: `job:${jobUid}` });
      expect(csv.status).to.equal(200);

      // The infrastructure error makes a check due; it runs once the picture is back, passes, and the node is available.
      await waitFor(() => results(d!, `category:${HEALTH_CHECK_CATEGORY}`).length > checksBefore, { what: 'the health check the error triggered', timeoutMs: 60_000 });
      await waitFor(async () => (await nodeState(d!)).available, { what: 'the node to be available again', timeoutMs: 60_000 });
      expect(results(d!, `category:${HEALTH_CHECK_CATEGORY}`).at(-1)).to.include({ result: 'pass' });
      expect(d!.healthCheck.status().state).to.equal('good');
    });
  });

  describe('test-pack checkout failed', () => {
    let dir: string;
    let pack: TestPackRepo;
    let d: Daemon | undefined;

    before(async () => {
      dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-faults-checkout-'));
      pack = await makeTestPack({ 'tests/a.py': 'def test_a():\n    pass\n\ndef test_b():\n    pass\n' });
      d = await start(pack, path.join(dir, 'data'), { capture: { uri: 'none:' } });
    });
    after(async () => {
      await d?.stop();
      await pack.cleanup();
      await rm(dir, { recursive: true, force: true });
    });

    it('every test case of the job is recorded as checkout_failed, and the node runs again once checkouts work', async () => {
      // The checkout cache's folder replaced by a file: no working tree can be made.
      const checkouts = path.join(dir, 'data', 'checkouts');
      await rm(checkouts, { recursive: true, force: true });
      await writeFile(checkouts, 'not a folder');
      const job = (await d!.services.policy.runTests(ALICE_V1, { ...REQ, test_cases: ['tests/a.py::test_a', 'tests/a.py::test_b'], tags: {} })).value;
      await d!.services.jobs.whenEnded(job.job_uid);
      const rs = results(d!, `job:${job.job_uid}`);
      expect(rs.map((r) => [r.test_case, r.result, r.infrastructure_error])).to.deep.equal([
        ['tests/a.py::test_a', 'error', 'checkout_failed'],
        ['tests/a.py::test_b', 'error', 'checkout_failed'],
      ]);
      expect(rs[0]!.failure_reason).to.match(/^InfrastructureError: checkout_failed: could not check out the test pack at [0-9a-f]{10}: /);
      expect(d!.services.jobs.get(job.job_uid)!.result_counts).to.include({ error: 2, total: 2 });
      expect(await readFile(path.join(d!.services.results.dirOf(rs[0]!.result_id), 'farmhand.log'), 'utf8')).to.match(/^farmhand: the test did not run; InfrastructureError: checkout_failed: /);

      await rm(checkouts, { force: true });
      const again = (await d!.services.policy.runTests(ALICE_V1, { ...REQ, test_cases: ['tests/a.py::test_a'], tags: {} })).value;
      await d!.services.jobs.whenEnded(again.job_uid);
      expect(results(d!, `job:${again.job_uid}`).map((r) => r.result)).to.deep.equal(['pass']);
    });
  });
});
