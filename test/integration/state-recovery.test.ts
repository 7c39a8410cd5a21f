/**
 * "Files that stay whole": a torn or corrupt state.json, latest job file or
 * results index found at start-up is reported (logged at error level, the bad
 * file kept as `<name>.corrupt-<timestamp>`) and recovered from the other
 * files on disk, never silently replaced by an empty one. Whole daemons on one
 * data directory, started, stopped, damaged and started again.
 */
import { expect } from 'chai';
import { readdir, readFile, rm, truncate, writeFile } from 'node:fs/promises';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import type { Logger } from '../../src/core/ports.js';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { StateStore } from '../../src/storage/state.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { testConfig } from '../helpers/daemon.js';
import { capturingLogger } from '../helpers/logger.js';
import { waitFor } from '../helpers/wait.js';

const PACK = { 'tests/t.py': 'def test_pass():\n    pass\n\ndef test_fail():\n    assert False, "no"\n\ndef test_error():\n    raise ValueError("bad")\n' };
const CASES = ['tests/t.py::test_pass', 'tests/t.py::test_fail', 'tests/t.py::test_error'];

describe('state recovery at start-up', function () {
  // Whole jobs of python runs, restarts and recoveries: minutes on a loaded 2-core CI box.
  this.timeout(300_000);
  let pack: TestPackRepo;
  let dataDir: string;
  let daemon: Daemon | undefined;

  const start = async (log: Logger) => {
    daemon = await startDaemon(testConfig(pack.dir, dataDir, { capture: { uri: 'none:' } }), log);
    return request(daemon.url);
  };
  const stop = async () => {
    await daemon?.stop();
    daemon = undefined;
  };
  const runJob = async (http: ReturnType<typeof request>) => {
    const run = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: CASES });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;
    const job = await waitFor(async () => {
      const j = await http.get(`/api/v1/jobs${uid}`);
      return j.body.status === 'exited' ? (j.body as { result_counts: Record<string, number> }) : undefined;
    }, { what: `job ${uid} to exit`, timeoutMs: 240_000, intervalMs: 100 });
    return { job_uid: uid, job_id: Number(uid.split('/').pop()), result_counts: job.result_counts };
  };
  /** A results list without its absolute URLs (the port changes on each start). */
  const listing = async (http: ReturnType<typeof request>) =>
    ((await http.get('/api/v1/results').query({ sort: 'date:asc' })).body as Array<Record<string, unknown>>).map(({ result_url: _u, ...r }) => r);
  const corruptCopies = async (dir: string, name: string) => (await readdir(dir)).filter((f) => f.startsWith(`${name}.corrupt-`));

  beforeEach(async () => {
    pack = await makeTestPack(PACK);
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-recovery-'));
  });
  afterEach(async () => {
    await stop();
    await rm(dataDir, { recursive: true, force: true });
    await pack.cleanup();
  });

  it('a torn state.json is reported, kept as state.json.corrupt-<timestamp>, and rebuilt: same installation hex, job numbers never reused', async () => {
    let http = await start(capturingLogger());
    const job1 = await runJob(http);
    const job2 = await runJob(http);
    await stop();
    const stateFile = path.join(dataDir, 'state.json');
    const whole = await readFile(stateFile, 'utf8');
    await truncate(stateFile, Math.floor(whole.length / 2)); // a torn write

    const log = capturingLogger();
    http = await start(log);
    const report = log.entries.find((e) => e.level === 'error' && e.obj.module === 'state');
    expect(report, 'the corrupt state is logged as an error').to.not.equal(undefined);
    expect(report!.obj.reset).to.deep.equal(['reservations', 'node_usage']);
    const kept = await corruptCopies(dataDir, 'state.json');
    expect(kept).to.have.length(1);
    expect(await readFile(path.join(dataDir, kept[0]!), 'utf8')).to.equal(whole.slice(0, Math.floor(whole.length / 2)));

    // The old jobs answer under their old ids, and the next job gets the next number.
    const old = await http.get(`/api/v1/jobs${job2.job_uid}`);
    expect(old.status).to.equal(200);
    expect(old.body.result_counts).to.deep.equal(job2.result_counts);
    const job3 = await runJob(http);
    expect(job3.job_id).to.equal(job2.job_id + 1);
    expect(job3.job_uid.split('/')[2]).to.equal(job1.job_uid.split('/')[2]);
    const results = await http.get('/api/v1/results').query({ filter: `job:${job1.job_uid}` });
    expect(results.body).to.have.length(3);
  });

  it('state.json that is valid JSON of the wrong shape is not trusted, and reservation ids stay above every id used before', async () => {
    let http = await start(capturingLogger());
    const job1 = await runJob(http);
    await stop();
    await writeFile(path.join(dataDir, 'state.json'), JSON.stringify({ installation_hex: 42, last_job_number: 'x' }));
    const log = capturingLogger();
    const state = await StateStore.open(dataDir, { logger: log, nodeId: 'farmhand-test' });
    expect(state.data.installation_hex).to.equal(job1.job_uid.split('/')[2]);
    expect(state.data.last_job_number).to.equal(job1.job_id);
    expect(state.data.last_reservation_id).to.be.greaterThan(1_000_000_000);
    expect(log.entries.filter((e) => e.level === 'error')).to.have.length(1);
    http = await start(capturingLogger());
    expect((await runJob(http)).job_id).to.equal(job1.job_id + 1);
  });

  it('a missing state.json beside existing jobs is recovered the same way (never job number 1 again)', async () => {
    const http = await start(capturingLogger());
    await runJob(http);
    const job2 = await runJob(http);
    await stop();
    await rm(path.join(dataDir, 'state.json'));
    const log = capturingLogger();
    const state = await StateStore.open(dataDir, { logger: log });
    expect(state.data.last_job_number).to.equal(job2.job_id);
    expect(log.entries.some((e) => e.level === 'error' && /missing/.test(String(e.obj.problem)))).to.equal(true);
  });

  it('a corrupt jobs/<n>.json of the latest job is reported and rebuilt from its results, exited', async () => {
    let http = await start(capturingLogger());
    const job = await runJob(http);
    await stop();
    const jobFile = path.join(dataDir, 'jobs', `${job.job_id}.json`);
    await writeFile(jobFile, '{"job_uid": "/farmhand-te');

    const log = capturingLogger();
    http = await start(log);
    expect(log.entries.some((e) => e.level === 'error' && e.obj.file === jobFile)).to.equal(true);
    expect(await corruptCopies(path.join(dataDir, 'jobs'), `${job.job_id}.json`)).to.have.length(1);
    const again = await http.get(`/api/v1/jobs${job.job_uid}`);
    expect(again.status).to.equal(200);
    expect(again.body.status).to.equal('exited');
    expect(again.body.result_counts).to.deep.equal({ pass: 1, fail: 1, error: 1, total: 3 });
  });

  it('a corrupt latest job with a run in flight: the run becomes an error saying the daemon restarted', async () => {
    let http = await start(capturingLogger());
    const job = await runJob(http);
    await stop();
    // As if the daemon died during a fourth run: its folder exists, without result.json.
    const hex = job.job_uid.split('/')[2]!;
    const inflight = path.join(dataDir, 'results', hex, String(job.job_id), '2099-01-01_00.00.00');
    await import('node:fs/promises').then((fs) => fs.mkdir(inflight, { recursive: true }));
    await writeFile(path.join(inflight, 'test-name'), 'tests/t.py::test_pass\n');
    await writeFile(path.join(dataDir, 'jobs', `${job.job_id}.json`), 'garbage');

    http = await start(capturingLogger());
    const again = await http.get(`/api/v1/jobs${job.job_uid}`);
    expect(again.body.status).to.equal('exited');
    expect(again.body.result_counts).to.deep.equal({ pass: 1, fail: 1, error: 2, total: 4 });
    const r = await http.get(`/api/v1/result${job.job_uid}/2099-01-01_00.00.00`);
    expect(r.status).to.equal(200);
    expect(r.body.failure_reason).to.match(/restarted/);
  });

  it('a garbage results index.jsonl is reported and rebuilt from the result folders, not treated as empty', async () => {
    let http = await start(capturingLogger());
    await runJob(http);
    await runJob(http);
    const before = await listing(http);
    expect(before).to.have.length(6);
    await stop();
    const index = path.join(dataDir, 'results', 'index.jsonl');
    await writeFile(index, 'this is not json\n\u0000\u0001\u0002 garbage\n{"half": \n');

    const log = capturingLogger();
    http = await start(log);
    expect(log.entries.some((e) => e.level === 'error' && e.obj.module === 'results' && e.obj.bad_lines === 3)).to.equal(true);
    expect(await corruptCopies(path.join(dataDir, 'results'), 'index.jsonl')).to.have.length(1);
    const after = await listing(http);
    expect(after).to.deep.equal(before);
    // The rebuilt index is whole: a further restart loads it without complaint.
    await stop();
    const log2 = capturingLogger();
    http = await start(log2);
    expect(log2.entries.filter((e) => e.level === 'error')).to.deep.equal([]);
    expect(await listing(http)).to.deep.equal(before);
  });
});
