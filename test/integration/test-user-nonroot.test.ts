/**
 * `runner.run_tests_as` as shipped: the real `farmhand serve` process runs as
 * an unprivileged user (not root) holding only what systemd/farmhand.service
 * gives it: CAP_SETUID, CAP_SETGID and CAP_KILL as ambient capabilities (and
 * nothing more in its bounding set), no_new_privs, membership of the test
 * user's group. Tests run as the test user; the daemon can still read their
 * report and artifacts, stop a hung one (another uid's process group), and
 * delete, through retention, a folder the test made unreadable. Both users
 * are real (created here).
 */
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { chmod, chown, lstat, mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { execFileSync } from 'node:child_process';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { expectConfined, packFiles } from '../fixtures/testUserPack.js';
import { isAlive } from '../helpers/processes.js';
import { addToGroup, ensureSystemUser, holdSystemUser, type SystemUser } from '../helpers/testUser.js';
import { waitFor } from '../helpers/wait.js';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const TEST_USER = 'farmhand-test';
/** Stands for the shipped unit's `farmhand` user. */
const DAEMON_USER = 'farmhand-suite-node';

interface Run {
  result_id: string;
  result: string;
  failure_reason: string | null;
}

describe('tests run as another user, by a daemon that is not root (the shipped unit)', function () {
  this.timeout(180_000);
  // One file at a time runs tests as TEST_USER: a daemon ends that user's processes (test/helpers/testUser.ts).
  let releaseUser: (() => void) | undefined;
  before(async function () {
    this.timeout(11 * 60_000);
    releaseUser = await holdSystemUser(TEST_USER);
  });
  let tester: SystemUser;
  let node: SystemUser;
  let root: string;
  let drop: string;
  let dataDir: string;
  let pack: TestPackRepo;
  let child: ChildProcess | undefined;
  let url: string;
  let output = '';
  let configFile: string;

  /** `farmhand serve` as the node's user, with only the unit's capabilities; resolves once it listens. */
  const startNode = async () => {
    output = '';
    const caps = '+kill,+setgid,+setuid';
    child = spawn(
      '/usr/bin/setpriv',
      [`--reuid=${node.uid}`, `--regid=${node.gid}`, '--init-groups', `--inh-caps=-all,${caps}`, `--ambient-caps=${caps}`, `--bounding-set=-all,${caps}`, '--no-new-privs', '--', process.execPath, '--import', 'tsx', MAIN, 'serve', '--config', configFile],
      // HOME as the unit's (the data directory); a PATH without root's own folders; run from the project (tsx is found there).
      { cwd: path.dirname(path.dirname(MAIN)), env: { ...process.env, HOME: dataDir, PATH: '/usr/local/bin:/usr/bin:/bin' }, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (output += b.toString()));
    const exited = new Promise<never>((_, reject) => child!.once('exit', (code) => reject(new Error(`the daemon exited (${code}): ${output}`))));
    url = await Promise.race([waitFor(() => /listening on (http:\/\/\S+)/.exec(output)?.[1], { what: 'the daemon to listen', timeoutMs: 60_000 }), exited]);
    exited.catch(() => undefined);
  };

  const api = async (method: string, p: string, body?: unknown) => {
    const res = await fetch(url + p, { method, ...(body !== undefined && { body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } }) });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) };
  };
  const runOne = async (testCase: string): Promise<Run> => {
    const res = await api('POST', '/api/v1/run_tests', { test_pack_revision: 'main', test_cases: [testCase] });
    expect(res.status, res.text).to.equal(200);
    const job = res.json().job_uid as string;
    await waitFor(async () => (await api('GET', `/api/v1/jobs${job}`)).json().status === 'exited', { what: `job ${job} to end`, timeoutMs: 90_000 });
    return ((await api('GET', `/api/v1/jobs${job}/results`)).json() as Run[])[0]!;
  };

  before(async () => {
    tester = ensureSystemUser(TEST_USER);
    node = ensureSystemUser(DAEMON_USER);
    addToGroup(DAEMON_USER, TEST_USER);
    root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-nonroot-'));
    await chmod(root, 0o755);
    drop = path.join(root, 'drop');
    await mkdir(drop);
    await chmod(drop, 0o777);
    const credentialFile = path.join(root, 'node-credential');
    await writeFile(credentialFile, 'fhn_credential-of-a-nonroot-node\n', { mode: 0o600 });
    await chown(credentialFile, node.uid, node.gid);
    pack = await makeTestPack(packFiles(credentialFile, drop));
    // The node's user fetches the test pack: git wants it owned by that user.
    execFileSync('chown', ['-R', `${node.uid}:${node.gid}`, path.dirname(pack.dir)]);
    dataDir = path.join(root, 'data');
    await mkdir(dataDir, { mode: 0o750 });
    await chown(dataDir, node.uid, node.gid);
    // As `sudo -u farmhand farmhand token create` leaves it: the node's, readable by all (umask 022).
    await new TokenStore(tokensFile(dataDir)).create('alice');
    await chmod(tokensFile(dataDir), 0o644);
    for (const f of await readdir(dataDir)) await chown(path.join(dataDir, f), node.uid, node.gid);
    const config = {
      node_id: 'nonroot',
      listen: '127.0.0.1:0',
      data_dir: dataDir,
      test_pack: { url: pack.dir, refresh_secs: 1 },
      capture: { uri: 'testsrc:', width: 320, height: 240, preview_fps: 10, record_video: false },
      ir: { uri: 'virtual:' },
      retention: { max_results: 2, min_free_mb: 0 },
      portal: { url: 'http://127.0.0.1:9', node_credential_file: credentialFile },
      runner: { run_tests_as: TEST_USER, kill_grace_secs: 1, stop_response_secs: 10 },
      log_level: 'warn',
    };
    configFile = path.join(root, 'farmhand.json');
    await writeFile(configFile, JSON.stringify(config), { mode: 0o644 });
    await startNode();
  });
  after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    }
    await rm(root, { recursive: true, force: true });
    await pack?.cleanup();
  });
  after(() => releaseUser?.());

  it('the daemon is not root and holds only CAP_SETUID, CAP_SETGID and CAP_KILL', async () => {
    const status = await readFile(`/proc/${child!.pid}/status`, 'utf8');
    expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).to.equal(String(node.uid));
    expect(/^CapEff:\s+(\w+)/m.exec(status)?.[1]).to.equal('00000000000000e0');
    expect(/^CapBnd:\s+(\w+)/m.exec(status)?.[1]).to.equal('00000000000000e0');
  });

  let first: Run;
  it('a test is confined to its user, and its run works: verdict, log with the press, artifacts the test made unreadable', async () => {
    first = await runOne('tests/hostile.py::test_reach');
    expect(first.result, first.failure_reason ?? output).to.equal('pass');
    const reach = (await api('GET', `/api/v1/result${first.result_id}/artifacts/reach.json`)).json() as Record<string, unknown>;
    expectConfined(reach, tester.uid);
    const log = (await api('GET', `/api/v1/result${first.result_id}/farmhand.log`)).text;
    expect(log).to.match(/press KEY_OK remote=box transport=virtual:/);
    const listing = (await api('GET', `/api/v1/result${first.result_id}/artifacts/`)).json() as Record<string, unknown>;
    expect(Object.keys(listing)).to.include.members(['reach.json', 'shots/frame.png', 'screenshot.png', 'private/deeper/secret.txt']);
    const secret = await api('GET', `/api/v1/result${first.result_id}/artifacts/private/deeper/secret.txt`);
    expect(secret.status).to.equal(200);
    expect(secret.text).to.equal('mine');
  });

  it('stop ends a hung test of another uid: its group and a process that left it', async () => {
    const res = await api('POST', '/api/v1/run_tests', { test_pack_revision: 'main', test_cases: ['tests/hostile.py::test_hang'] });
    expect(res.status, res.text).to.equal(200);
    const job = res.json().job_uid as string;
    const pids = await waitFor(async () => JSON.parse(await readFile(path.join(drop, 'pids.json'), 'utf8')) as Record<string, number>, { what: 'the hung test', timeoutMs: 60_000 });
    for (const pid of Object.values(pids)) expect(isAlive(pid), `pid ${pid} before the stop`).to.equal(true);
    const stop = await api('POST', `/api/v1/jobs${job}/stop`);
    expect(stop.status, stop.text).to.equal(200);
    for (const [what, pid] of Object.entries(pids)) expect(isAlive(pid), `${what} (pid ${pid}) after the stop`).to.equal(false);
    const [run] = (await api('GET', `/api/v1/jobs${job}/results`)).json() as Run[];
    expect(run!.failure_reason).to.match(/Stopped/);
  });

  it('retention deletes the first run\'s folder, with the folders the test made unreadable', async () => {
    const hex = first.result_id.split('/').slice(2).join('/');
    const dir = path.join(dataDir, 'results', hex);
    expect((await lstat(path.join(dir, 'private'))).uid).to.equal(tester.uid);
    const run = await runOne('tests/hostile.py::test_pass');
    expect(run.result, run.failure_reason ?? '').to.equal('pass');
    expect((await api('GET', `/api/v1/result${first.result_id}/`)).status).to.equal(410);
    expect(await lstat(dir).catch((e: NodeJS.ErrnoException) => e.code)).to.equal('ENOENT');
    expect(output, 'nothing logged at error or above').to.not.match(/"level":(50|60)/);
  });

  it('after a crash mid-run, the next start ends the test user\'s processes and takes the run folder back', async () => {
    const res = await api('POST', '/api/v1/run_tests', { test_pack_revision: 'main', test_cases: ['tests/hostile.py::test_hide_then_hang'] });
    expect(res.status, res.text).to.equal(200);
    const job = res.json().job_uid as string;
    const pids = await waitFor(async () => JSON.parse(await readFile(path.join(drop, 'hidden.json'), 'utf8')) as Record<string, number>, { what: 'the hung test', timeoutMs: 60_000 });
    const gone = new Promise((r) => child!.once('exit', r));
    child!.kill('SIGKILL');
    await gone;
    for (const pid of Object.values(pids)) expect(isAlive(pid), `pid ${pid} after the crash`).to.equal(true);
    await startNode();
    for (const [what, pid] of Object.entries(pids)) expect(isAlive(pid), `${what} (pid ${pid}) after the restart`).to.equal(false);
    const [run] = (await api('GET', `/api/v1/jobs${job}/results`)).json() as Run[];
    expect(run!.result).to.equal('error');
    const dir = path.join(dataDir, 'results', run!.result_id.split('/').slice(2).join('/'));
    expect((await lstat(dir)).mode & 0o7777, 'the run folder').to.equal(0o750);
    for (const p of ['private', 'private/deeper']) expect((await lstat(path.join(dir, p))).mode & 0o7777, p).to.equal(0o770);
    const listing = await api('GET', `/api/v1/result${run!.result_id}/artifacts/`);
    expect(listing.status, listing.text).to.equal(200);
  });
});
