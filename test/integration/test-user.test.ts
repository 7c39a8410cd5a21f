/**
 * `runner.run_tests_as`: a hostile test runs as another user (a real one,
 * created here) and cannot read the node's portal credential, tokens.json,
 * state.json or the data directory, cannot get root or the daemon's uid back,
 * cannot signal or read the daemon; and yet its run works as before: log,
 * screenshot, artifacts, key presses, stop of a hung test (its whole group and
 * a process that left it), retention of its folder, even one the test made
 * unreadable. The daemon here runs as root in-process (the suite's user);
 * test-user-nonroot.test.ts runs one as an unprivileged user holding only the
 * capabilities the shipped unit gives.
 */
import { expect } from 'chai';
import { chmod, lstat, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { expectConfined, packFiles } from '../fixtures/testUserPack.js';
import { testConfig, type TestConfig } from '../helpers/daemon.js';
import { capturingLogger } from '../helpers/logger.js';
import { isAlive } from '../helpers/processes.js';
import { ensureSystemUser, holdSystemUser, type SystemUser } from '../helpers/testUser.js';
import { waitFor } from '../helpers/wait.js';

const TEST_USER = 'farmhand-test';
const CREDENTIAL = 'fhn_secret-credential-of-the-node-5d1c';

interface Run {
  result_id: string;
  result: string;
  failure_reason: string | null;
}

describe('tests run as another user (runner.run_tests_as)', function () {
  this.timeout(120_000);
  // One file at a time runs tests as TEST_USER: a daemon ends that user's processes (test/helpers/testUser.ts).
  let releaseUser: (() => void) | undefined;
  before(async function () {
    this.timeout(11 * 60_000);
    releaseUser = await holdSystemUser(TEST_USER);
  });
  let user: SystemUser;
  let parent: string;
  let drop: string;
  let credentialFile: string;
  let pack: TestPackRepo;
  let dataDir: string;
  let daemon: Daemon | undefined;
  const umask = process.umask();

  const config = (over: TestConfig = {}) =>
    testConfig(pack.dir, dataDir, {
      ir: { uri: 'virtual:' },
      retention: { max_results: 2, min_free_mb: 0 },
      // Nothing listens there: the node need not reach its portal for the credential to matter.
      portal: { url: 'http://127.0.0.1:9', node_credential_file: credentialFile },
      ...over,
      runner: { run_tests_as: TEST_USER, ...over.runner },
    });
  const http = () => request(daemon!.url);
  const runOne = async (testCase: string): Promise<{ job: string; run: Run }> => {
    const res = await http().post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [testCase] });
    expect(res.status, res.text).to.equal(200);
    const job = res.body.job_uid as string;
    await waitFor(async () => (await http().get(`/api/v1/jobs${job}`)).body.status === 'exited', { what: `job ${job} to end`, timeoutMs: 60_000 });
    const [run] = (await http().get(`/api/v1/jobs${job}/results`)).body as Run[];
    return { job, run: run! };
  };

  before(async () => {
    user = ensureSystemUser(TEST_USER);
    parent = await mkdtemp(path.join(os.tmpdir(), 'farmhand-testuser-'));
    // As /etc/farmhand: a folder anyone may pass through, holding the credential at mode 0600.
    await chmod(parent, 0o755);
    credentialFile = path.join(parent, 'node-credential');
    await writeFile(credentialFile, `${CREDENTIAL}\n`, { mode: 0o600 });
    drop = path.join(parent, 'drop');
    await mkdir(drop);
    await chmod(drop, 0o777);
    pack = await makeTestPack(packFiles(credentialFile, drop));
    dataDir = path.join(parent, 'data');
    await mkdir(dataDir);
    // Made before the daemon starts, world-readable as an admin's umask leaves it: the start must close it.
    await new TokenStore(tokensFile(dataDir)).create('alice');
    expect((await lstat(tokensFile(dataDir))).mode & 0o004).to.not.equal(0);
    daemon = await startDaemon(config(), capturingLogger());
    await waitFor(() => daemon!.services.frames.health().online, { what: 'capture to come online', timeoutMs: 15_000 });
  });
  after(async () => {
    await daemon?.stop();
    process.umask(umask);
    await rm(parent, { recursive: true, force: true });
    await pack?.cleanup();
  });
  after(() => releaseUser?.());

  let first: Run;
  it('the test cannot read the credential, tokens.json, state.json or the data directory, nor get any uid back; its run works', async () => {
    // A token made while the daemon runs, as `farmhand token create` does it with an admin's umask: tokens.json stays closed.
    const daemons = process.umask(0o022);
    try {
      await new TokenStore(tokensFile(dataDir)).create('bob');
    } finally {
      process.umask(daemons);
    }
    const { run } = await runOne('tests/hostile.py::test_reach');
    first = run;
    expect(run.result, run.failure_reason ?? '').to.equal('pass');
    const reach = JSON.parse((await http().get(`/api/v1/result${run.result_id}/artifacts/reach.json`)).text) as Record<string, unknown>;
    expectConfined(reach, user.uid);
    // The run as it always was: logs with the press, the screenshot, the test's artifacts.
    const log = (await http().get(`/api/v1/result${run.result_id}/farmhand.log`)).text;
    expect(log).to.match(/press KEY_OK remote=box transport=virtual:/);
    expect(log).to.include(`as user ${TEST_USER}`);
    expect((await http().get(`/api/v1/result${run.result_id}/artifacts/stdout.log`)).text).to.include('reached');
    const listing = (await http().get(`/api/v1/result${run.result_id}/artifacts/`)).body as Record<string, unknown>;
    expect(Object.keys(listing)).to.include.members(['reach.json', 'shots/frame.png', 'screenshot.png', 'farmhand.log', 'test-name', 'exit-status']);
    const shot = await http().get(`/api/v1/result${run.result_id}/artifacts/shots/frame.png`).buffer(true);
    expect(shot.status).to.equal(200);
    expect((shot.body as Buffer).subarray(1, 4).toString()).to.equal('PNG');
  });

  it('after the run its folder is the daemon\'s again: the test\'s files readable by the group, nothing for the test user', async () => {
    const dir = daemon!.services.results.dirOf(first.result_id);
    const top = await lstat(dir);
    expect(top.mode & 0o7777, 'result folder mode').to.equal(0o750);
    expect(top.gid, 'result folder group').to.equal(process.getgid!());
    for (const p of ['private', 'private/deeper']) {
      const st = await lstat(path.join(dir, p));
      expect(st.uid, p).to.equal(user.uid);
      expect(st.gid, p).to.equal(user.gid);
      expect(st.mode & 0o7777, p).to.equal(0o770);
    }
    const secret = await lstat(path.join(dir, 'private/deeper/secret.txt'));
    expect(secret.mode & 0o777).to.equal(0o660);
    // The data directory's own files: nothing for others.
    for (const f of [tokensFile(dataDir), path.join(dataDir, 'state.json'), path.join(dataDir, 'results', 'index.jsonl')]) {
      expect((await lstat(f)).mode & 0o007, f).to.equal(0);
    }
  });

  it('stop ends a hung test: its whole group and a process that left it with a clean environment', async () => {
    const res = await http().post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/hostile.py::test_hang'] });
    expect(res.status, res.text).to.equal(200);
    const job = res.body.job_uid as string;
    const pids = await waitFor(async () => JSON.parse(await readFile(path.join(drop, 'pids.json'), 'utf8')) as { leader: number; child: number; escaped: number }, {
      what: 'the hung test to start its processes',
      timeoutMs: 60_000,
    });
    for (const pid of Object.values(pids)) expect(isAlive(pid), `pid ${pid} before the stop`).to.equal(true);
    const stop = await http().post(`/api/v1/jobs${job}/stop`);
    expect(stop.status, stop.text).to.equal(200);
    expect(stop.body.status).to.equal('exited');
    for (const [what, pid] of Object.entries(pids)) expect(isAlive(pid), `${what} (pid ${pid}) after the stop`).to.equal(false);
    const [run] = (await http().get(`/api/v1/jobs${job}/results`)).body as Run[];
    expect(run!.failure_reason).to.match(/Stopped/);
  });

  it('retention deletes the first run\'s folder, with the folders the test made unreadable', async () => {
    const dir = daemon!.services.results.dirOf(first.result_id);
    const { run } = await runOne('tests/hostile.py::test_pass');
    expect(run.result, run.failure_reason ?? '').to.equal('pass');
    expect((await http().get(`/api/v1/result${first.result_id}/`)).status).to.equal(410);
    await expectGone(dir);
  });

  it('refuses to start when the test user can read the credential file', async () => {
    await daemon!.stop();
    daemon = undefined;
    await chmod(credentialFile, 0o644);
    try {
      const err = await startDaemon(config(), capturingLogger()).then(
        (d) => {
          daemon = d;
          return undefined;
        },
        (e: unknown) => e as Error & { exitCode?: number },
      );
      expect(err, 'start-up refused').to.be.instanceOf(Error);
      expect(err!.message).to.include(`${TEST_USER} can read ${credentialFile}`);
      expect(err!.exitCode).to.equal(78);
    } finally {
      await chmod(credentialFile, 0o600);
    }
  });

  it('with run_tests_as false, a node of a farm warns at start that its tests can read its credential', async () => {
    await daemon?.stop();
    daemon = undefined;
    const log = capturingLogger();
    daemon = await startDaemon({ ...config(), runner: { ...config().runner, run_tests_as: false } }, log);
    const warning = log.entries.find((e) => e.level === 'warn' && e.msg.includes('run_tests_as'));
    expect(warning?.msg).to.match(/any test can read the node's portal credential/);
  });
});

async function expectGone(p: string): Promise<void> {
  const st = await lstat(p).catch((e: NodeJS.ErrnoException) => e.code);
  expect(st, p).to.equal('ENOENT');
}
