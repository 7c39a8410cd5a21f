/**
 * "A job survives a daemon restart as data": kill the daemon with SIGKILL
 * during a run, start it again on the same data directory, and check the job
 * and its results.
 */
import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { DAEMON_RESTARTED } from '../../src/core/jobs.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { isAlive } from '../helpers/processes.js';
import { waitFor } from '../helpers/wait.js';
import { startCli } from './crash-lib.js';

/** A config file for the CLI daemon: loopback port 0, no capture, data below `dir`. */
async function writeCliConfig(dir: string, pack: TestPackRepo, nodeId: string): Promise<string> {
  const file = path.join(dir, 'farmhand.json');
  const config = {
    node_id: nodeId,
    listen: '127.0.0.1:0',
    data_dir: path.join(dir, 'data'),
    test_pack: { url: pack.dir },
    capture: { uri: 'none:' },
    log_level: 'warn',
    runner: { kill_grace_secs: 1, run_tests_as: false },
  };
  await writeFile(file, JSON.stringify(config));
  return file;
}

/** The pid of `testCase` once the job's file records it running. */
function runningPid(dataDir: string, jobUid: string, testCase: string): Promise<number> {
  const jobFile = path.join(dataDir, 'data', 'jobs', `${jobUid.split('/').pop()}.json`);
  return waitFor(async () => {
    const job = JSON.parse(await readFile(jobFile, 'utf8').catch(() => '{}')) as { current_run?: { test_case: string; pid: number | null } };
    return job.current_run?.test_case === testCase ? job.current_run.pid : null;
  }, `${testCase} to run`);
}

/** Whether a run's stdout.log below `resultsDir` contains `text`. */
async function printed(resultsDir: string, text: string): Promise<boolean> {
  const files = await readdir(resultsDir, { recursive: true }).catch(() => []);
  for (const f of files.filter((name) => name.endsWith('stdout.log'))) {
    if ((await readFile(path.join(resultsDir, f), 'utf8').catch(() => '')).includes(text)) return true;
  }
  return false;
}

describe('restart after SIGKILL', function () {
  this.timeout(60_000);
  let pack: TestPackRepo;
  let dataDir: string;
  let configFile: string;
  const children: ChildProcess[] = [];

  before(async () => {
    pack = await makeTestPack({
      'tests/slow.py': 'import time\n\ndef test_quick():\n    pass\n\ndef test_slow():\n    with open("started", "w") as f:\n        f.write("yes")\n    time.sleep(60)\n',
    });
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-restart-'));
    configFile = await writeCliConfig(dataDir, pack, 'restart-node');
  });
  after(async () => {
    for (const c of children) c.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
    await pack.cleanup();
  });

  it('the running job is exited after restart, its in-flight run is an error saying the daemon restarted', async () => {
    const first = await startCli(configFile);
    children.push(first.child);
    let http = request(first.url);
    const run = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/slow.py::test_quick', 'tests/slow.py::test_slow'] });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;

    // Wait until the slow test is running (its job file records the child's pid).
    const pid = await runningPid(dataDir, uid, 'tests/slow.py::test_slow');
    // The pid is saved at spawn; the test writes "started" once Python reaches its body. Wait for it, so the kill
    // lands mid-test however fast the next daemon starts.
    await waitFor(async () => (await readdir(path.join(dataDir, 'data', 'results'), { recursive: true })).some((f) => f.endsWith(`${path.sep}started`)), {
      what: 'test_slow to write "started"',
      timeoutMs: 60_000,
    });
    first.child.kill('SIGKILL');
    await new Promise((r) => first.child.once('exit', r));
    expect(isAlive(pid), 'the test process outlives the daemon (own process group)').to.equal(true);

    const second = await startCli(configFile);
    children.push(second.child);
    http = request(second.url);
    const job = (await http.get(`/api/v1/jobs${uid}`)).body;
    expect(job.status).to.equal('exited');
    expect(job.end_time).to.be.a('string');
    expect(job.result_counts).to.include({ pass: 1, error: 1 });
    const results = (await http.get(`/api/v1/jobs${uid}/results`).query({ sort: 'date:asc' })).body;
    expect(results.map((r: { result: string }) => r.result)).to.deep.equal(['pass', 'error']);
    expect(results[1].failure_reason).to.equal(DAEMON_RESTARTED);
    const artifacts = (await http.get(`/api/v1/result${results[1].result_id}/artifacts/`)).body;
    expect(artifacts).to.have.property('started');
    expect(isAlive(pid), 'the orphaned test process was ended at start-up').to.equal(false);

    // And the node takes a new job at once.
    const next = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/slow.py::test_quick'] });
    expect(next.status).to.equal(200);
    expect(next.body.job_id).to.equal(run.body.job_id + 1);
    second.child.kill('SIGTERM');
    await new Promise((r) => second.child.once('exit', r));
  });
});

describe('graceful shutdown on SIGTERM', function () {
  this.timeout(60_000);
  let pack: TestPackRepo;
  let dataDir: string;
  let configFile: string;

  before(async () => {
    pack = await makeTestPack({ 'tests/slow.py': 'import time\n\ndef test_slow():\n    print("working", flush=True)\n    time.sleep(1000)\n' });
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-term-'));
    configFile = await writeCliConfig(dataDir, pack, 'term-node');
  });
  after(async () => {
    await rm(dataDir, { recursive: true, force: true });
    await pack.cleanup();
  });

  it('stops the running job the way the stop endpoint does, records its result, and exits 0', async () => {
    const d = await startCli(configFile);
    const http = request(d.url);
    const run = await http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/slow.py::test_slow'] });
    expect(run.status).to.equal(200);
    // SIGTERM once the test has written its line. The test would sleep 1000 s: a shutdown that waited
    // for it instead of stopping it hangs, and mocha fails this test at its timeout.
    await waitFor(() => printed(path.join(dataDir, 'data', 'results'), 'working'), 'the test to print "working"');
    d.child.kill('SIGTERM');
    const code = await new Promise<number | null>((r) => d.child.once('exit', (c) => r(c)));
    expect(code).to.equal(0);

    const again = await startCli(configFile);
    const h2 = request(again.url);
    const job = (await h2.get(`/api/v1/jobs${run.body.job_uid}`)).body;
    expect(job.status).to.equal('exited');
    expect(job.result_counts).to.include({ error: 1, total: 1 });
    const [r] = (await h2.get(`/api/v1/jobs${run.body.job_uid}/results`)).body;
    expect(r.failure_reason).to.match(/^Stopped/);
    const log = await h2.get(`/api/v1/result${r.result_id}/farmhand.log`);
    expect(log.text).to.include('working');
    again.child.kill('SIGTERM');
    await new Promise((res) => again.child.once('exit', res));
  });
});
