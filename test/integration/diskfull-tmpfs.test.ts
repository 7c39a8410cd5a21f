/**
 * Disk full: the data directory on a 64 MiB tmpfs. Runs go on through
 * retention (min_free_mb set so it kicks in), deleted results answer 410,
 * the index reloads after a restart with the same answers; when a write
 * truly fails (the tmpfs filled by a big file) the API says so clearly, and
 * the daemon recovers once space is freed. Skipped, with a message, where
 * mount is not permitted.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, truncate, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import request from 'supertest';
import { DISK_FULL } from '../../src/core/jobs.js';
import { parseResultQuery } from '../../src/core/query.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/logger.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { testConfig, type TestConfig } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const exec = promisify(execFile);
// Each run writes 3 MiB, so a 64 MiB disk with a 40 MiB floor holds only a few results.
const PACK = {
  'tests/big.py': 'def test_big():\n    open("blob.bin", "wb").write(b"x" * (3 << 20))\n',
  // Waits until the test has filled the disk (the flag, outside it, says so), then writes.
  'tests/late.py': 'import os, time\nimport farmhand\n\ndef test_late():\n    flag = farmhand.get_config("result.tags", "flag")\n    open("started", "w").close()\n    while not os.path.exists(flag):\n        time.sleep(0.02)\n    open("out.bin", "wb").write(b"x" * (1 << 20))\n',
  'tests/health.py': 'def test_health():\n    open("probe.bin", "wb").write(b"x" * (1 << 20))\n',
  // Writes until the disk is full (the write then fails with ENOSPC).
  'tests/fill.py': 'def test_fill():\n    with open("fill.bin", "wb") as f:\n        while True:\n            f.write(b"x" * (1 << 20))\n            f.flush()\n',
};

describe('disk full: data directory on a 64 MiB tmpfs', function () {
  this.timeout(120_000);
  let mnt: string;
  let mounted = false;
  let pack: TestPackRepo;
  let daemon: Daemon | undefined;

  before(async function () {
    mnt = await mkdtemp(path.join(os.tmpdir(), 'farmhand-tmpfs-'));
    try {
      await exec('mount', ['-t', 'tmpfs', '-o', 'size=64m', 'tmpfs', mnt]);
      mounted = true;
    } catch (e) {
      console.log(`      skipped: cannot mount a tmpfs here (${String((e as Error).message).split('\n')[0]})`);
      await rm(mnt, { recursive: true, force: true });
      this.skip();
    }
    pack = await makeTestPack(PACK);
  });
  after(async () => {
    await daemon?.stop();
    if (mounted) await exec('umount', ['-l', mnt]).catch(() => undefined);
    await rm(mnt, { recursive: true, force: true });
    await pack?.cleanup();
  });

  const start = async (over: TestConfig = {}) => {
    daemon = await startDaemon(testConfig(pack.dir, path.join(mnt, 'data'), { capture: { uri: 'none:' }, retention: { min_free_mb: 40, max_results: 100_000 }, ...over }), silentLogger);
    return request(daemon.url);
  };
  const runJob = async (http: ReturnType<typeof request>, n: number) => {
    const run = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: Array(n).fill('tests/big.py::test_big') });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;
    const job = await exited(http, uid);
    return { uid, counts: job.result_counts as Record<string, number> };
  };
  /** The job once exited, polled as a v1 client does (gently: the rate limit is on). */
  const exited = (http: ReturnType<typeof request>, uid: string) =>
    waitFor(async () => {
      const j = await http.get(`/api/v1/jobs${uid}`);
      return j.body.status === 'exited' ? (j.body as Record<string, unknown>) : undefined;
    }, { what: `job ${uid} to exit`, timeoutMs: 60_000, intervalMs: 100 });
  const listing = async (http: ReturnType<typeof request>) =>
    ((await http.get('/api/v1/results').query({ sort: 'date:asc' })).body as Array<Record<string, unknown>>).map(({ result_url: _u, ...r }) => r);

  it('runs keep going through retention, deleted results answer 410, the index reloads after restart with the same answers', async () => {
    let http = await start();
    const job = await runJob(http, 12); // 36 MiB written: more than the 24 MiB above the floor
    expect(job.counts).to.include({ pass: 12, total: 12 });
    const kept = await listing(http);
    expect(kept.length, 'retention deleted the oldest').to.be.within(1, 11);
    const all = (await http.get(`/api/v1/jobs${job.uid}/results`)).body as unknown[];
    expect(all.length).to.equal(kept.length);
    // A run retention deleted: its tombstone is in the index (runs are not always 1 s apart on a loaded machine).
    const index = await readFile(path.join(mnt, 'data', 'results', 'index.jsonl'), 'utf8');
    const earlierId = (JSON.parse(index.split('\n').find((l) => l.startsWith('{"deleted":'))!) as { deleted: string }).deleted;
    expect((await http.get(`/api/v1/result${earlierId}`)).status).to.equal(410);
    await daemon!.stop();
    http = await start();
    expect(await listing(http)).to.deep.equal(kept);
    expect((await http.get(`/api/v1/result${earlierId}`)).status).to.equal(410);
  });

  it('when a write truly fails (disk filled) the API says the disk is full; once space is freed the daemon recovers', async () => {
    const http = request(daemon!.url);
    const filler = path.join(mnt, 'filler.bin');
    await writeFile(filler, Buffer.alloc(64 << 20)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOSPC') throw e;
    });
    const full = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/big.py::test_big'] });
    let clear = false;
    if (full.status === 507) {
      clear = full.body.error === 'storage_full';
    } else {
      expect(full.status, full.text).to.equal(200);
      await exited(http, full.body.job_uid as string);
      const res = (await http.get(`/api/v1/jobs${full.body.job_uid as string}/results`)).body as Array<{ result: string; failure_reason: string }>;
      clear = res.length === 0 || res.every((r) => r.result === 'error' && /disk|space|full/i.test(r.failure_reason));
    }
    expect(clear, `answer while full: ${full.status} ${full.text}`).to.equal(true);
    await unlink(filler);
    const after = await runJob(http, 1);
    expect(after.counts).to.include({ pass: 1 });
  });

  it('a test that fills the data disk is recorded (an infrastructure error, its own artifacts deleted to make room), and retention and the next run go on', async () => {
    const http = request(daemon!.url);
    const run = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/fill.py::test_fill'] });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;
    await exited(http, uid);
    const res = (await http.get(`/api/v1/jobs${uid}/results`)).body as Array<{ result_id: string; result: string; failure_reason: string }>;
    expect(res, 'the run that filled the disk is recorded').to.have.length(1);
    expect(res[0]!.result).to.equal('error');
    expect(res[0]!.failure_reason).to.match(new RegExp(`^${DISK_FULL}: `));
    const detail = await http.get(`/api/v1/result${res[0]!.result_id}`);
    expect(detail.body).to.include({ result: 'error', infrastructure_error: 'disk_full' });
    const runDir = path.join(mnt, 'data', 'results', ...res[0]!.result_id.split('/').slice(2));
    expect(await readFile(path.join(runDir, 'failure-reason'), 'utf8')).to.match(/^InfrastructureError: disk_full: /);
    expect(await readFile(path.join(runDir, 'farmhand.log'), 'utf8')).to.contain('farmhand: InfrastructureError: disk_full: ');
    const files = await readdir(path.join(mnt, 'data', 'results', ...res[0]!.result_id.split('/').slice(2)));
    expect(files).to.not.include('fill.bin');
    expect(files).to.include.members(['result.json', 'duration', 'exit-status', 'failure-reason', 'test-name']);
    const next = await runJob(http, 1);
    expect(next.counts).to.include({ pass: 1 });
  });

  it('the daemon starts on a full data disk (no state write at start is fatal), answers 507 to run_tests, and runs again once space is freed', async () => {
    const filler = path.join(mnt, 'filler.bin');
    await daemon!.stop();
    daemon = undefined;
    await writeFile(filler, Buffer.alloc(64 << 20)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOSPC') throw e;
    });
    const http = await start();
    expect((await http.get('/api/v1/results')).status).to.equal(200);
    const full = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/big.py::test_big'] });
    expect(full.status, full.text).to.equal(507);
    expect(full.body.error).to.equal('storage_full');
    await unlink(filler);
    const after = await runJob(http, 1);
    expect(after.counts).to.include({ pass: 1 });
  });

  it('the disk filled mid-run: disk_full; the health check fails on the full disk, holding the node back, and passes once space is freed', async () => {
    await daemon?.stop();
    await pack.commit({ 'config/stbt.conf': '[test_pack]\nhealth_check = tests/health.py::test_health\n' });
    // No free-space floor: retention would delete the very runs this test looks at.
    await start({ health_check: { after_infrastructure_errors: 1, retry_secs: 1, interval_secs: 0 }, retention: { min_free_mb: 0 } });
    const d = daemon!;
    await waitFor(() => d.healthCheck.status().state === 'good', { what: 'the start-up health check to pass', timeoutMs: 60_000 });
    const flag = path.join(os.tmpdir(), `farmhand-diskfull-flag-${process.pid}`);
    await rm(flag, { force: true });
    const req = { test_pack_revision: 'main', test_cases: ['tests/late.py::test_late'], category: 'faults', soak: 'run once' as const, shuffle: false, remote_control: null, tags: { flag } };
    const job = (await d.services.policy.runTests({ user: 'alice', api: 'v1' }, req)).value;
    const runDir = await waitFor(() => {
      const id = d.services.jobs.get(job.job_uid)?.current_run?.result_id;
      return id && d.services.results.dirOf(id);
    }, 'the run to start');
    await waitFor(() => readFile(path.join(runDir, 'started')).then(() => true), { what: 'the test to be running', timeoutMs: 60_000 });
    const filler = path.join(mnt, 'filler.bin');
    await writeFile(filler, Buffer.alloc(64 << 20)).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOSPC') throw e;
    });
    // Half a MiB back: the test's 1 MiB write still hits ENOSPC, and what it wrote is what the daemon frees to record the run.
    await truncate(filler, Math.max(0, (await stat(filler)).size - (512 << 10)));
    await writeFile(flag, '');
    try {
      const [r] = await waitFor(() => {
        const rs = d.services.results.query(parseResultQuery({ filter: `job:${job.job_uid}` }, { limit: 10 }));
        return rs.length === 1 ? rs : undefined;
      }, { what: 'the run to be recorded', timeoutMs: 60_000 });
      expect(r).to.include({ result: 'error', infrastructure_error: 'disk_full' });
      const down = await waitFor(async () => {
        const s = (await d.services.policy.status({ user: 'alice', api: 'v2' })).value;
        return s.not_available_reason?.startsWith('health check failed: ') ? s : undefined;
      }, { what: 'the failed health check to hold the node back', timeoutMs: 60_000 });
      expect(down.available).to.equal(false);
      expect(down.not_available_reason).to.match(/^health check failed: InfrastructureError: disk_full: /);
    } finally {
      await unlink(filler);
      await rm(flag, { force: true });
    }
    await waitFor(async () => (await d.services.policy.status({ user: 'alice', api: 'v2' })).value.available, { what: 'the node to be available again', timeoutMs: 60_000 });
    expect(d.healthCheck.status().state).to.equal('good');
  });
});
