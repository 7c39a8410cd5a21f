/**
 * `runner.run_tests_as` unset, on a daemon that is not root (docs/configuration.md, "Running tests as another
 * user"): with CAP_SETUID, CAP_SETGID and CAP_KILL (the shipped unit's) it can switch user, so its tests run as
 * farmhand-test; without them it cannot, and it says at start that its tests can read the node's credential, and
 * runs them as its own user. The real `farmhand serve` as a real unprivileged user (test/helpers/testUser.ts);
 * the root daemon's default is test/farm/security-reattack.test.ts's.
 */
import { expect } from 'chai';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { packFiles } from '../fixtures/testUserPack.js';
import { addToGroup, ensureSystemUser, holdSystemUser, type SystemUser } from '../helpers/testUser.js';
import { waitFor } from '../helpers/wait.js';

const MAIN = fileURLToPath(new URL('../../src/main.ts', import.meta.url));
const TEST_USER = 'farmhand-test';
/** Stands for the shipped unit's `farmhand` user (as in test-user-nonroot.test.ts). */
const DAEMON_USER = 'farmhand-suite-node';

describe('runner.run_tests_as unset on a daemon that is not root', function () {
  this.timeout(180_000);
  // One file at a time runs tests as TEST_USER: a daemon ends that user's processes (test/helpers/testUser.ts).
  let releaseUser: (() => void) | undefined;
  before(async function () {
    this.timeout(11 * 60_000);
    releaseUser = await holdSystemUser(TEST_USER);
  });
  let node: SystemUser;
  let root: string;
  let pack: TestPackRepo;
  let credentialFile: string;
  let child: ChildProcess | undefined;
  let output = '';

  before(async () => {
    ensureSystemUser(TEST_USER);
    node = ensureSystemUser(DAEMON_USER);
    addToGroup(DAEMON_USER, TEST_USER);
    root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-default-user-'));
    await chmod(root, 0o755);
    const drop = path.join(root, 'drop');
    await mkdir(drop);
    credentialFile = path.join(root, 'node-credential');
    await writeFile(credentialFile, 'fhn_credential-of-a-default-node\n', { mode: 0o600 });
    await chown(credentialFile, node.uid, node.gid);
    pack = await makeTestPack(packFiles(credentialFile, drop));
    // The node's user fetches the test pack: git wants it owned by that user.
    execFileSync('chown', ['-R', `${node.uid}:${node.gid}`, path.dirname(pack.dir)]);
  });
  afterEach(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      const gone = new Promise((r) => child!.once('exit', r));
      child.kill('SIGTERM');
      await gone;
    }
    child = undefined;
  });
  after(async () => {
    await rm(root, { recursive: true, force: true });
    await pack?.cleanup();
  });
  after(() => releaseUser?.());

  /** `farmhand serve` as the node's user with `caps` (setpriv's list, '' for none), on a fresh data directory; its output once it listens. */
  async function serve(name: string, caps: string): Promise<string> {
    const dataDir = path.join(root, name);
    await mkdir(dataDir, { mode: 0o750 });
    await chown(dataDir, node.uid, node.gid);
    const config = path.join(root, `${name}.json`);
    const settings = {
      node_id: name,
      listen: '127.0.0.1:0',
      data_dir: dataDir,
      test_pack: { url: pack.dir },
      capture: { uri: 'none:' },
      // Nothing listens there: the node need not reach its portal for the credential to matter.
      portal: { url: 'http://127.0.0.1:9', node_credential_file: credentialFile },
      log_level: 'info',
    };
    await writeFile(config, JSON.stringify(settings), { mode: 0o644 });
    const privs = caps ? [`--inh-caps=-all,${caps}`, `--ambient-caps=${caps}`, `--bounding-set=-all,${caps}`] : ['--inh-caps=-all', '--bounding-set=-all'];
    output = '';
    child = spawn('/usr/bin/setpriv', [`--reuid=${node.uid}`, `--regid=${node.gid}`, '--init-groups', ...privs, '--no-new-privs', '--', process.execPath, '--import', 'tsx', MAIN, 'serve', '--config', config], {
      cwd: path.dirname(path.dirname(MAIN)),
      env: { ...process.env, HOME: dataDir, PATH: '/usr/local/bin:/usr/bin:/bin' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', (b: Buffer) => (output += b.toString()));
    child.stderr!.on('data', (b: Buffer) => (output += b.toString()));
    const exited = new Promise<never>((_, reject) => child!.once('exit', (code) => reject(new Error(`the daemon exited (${code}): ${output}`))));
    await Promise.race([waitFor(() => /listening on http/.test(output), { what: 'the daemon to listen', timeoutMs: 60_000 }), exited]);
    exited.catch(() => undefined);
    return output;
  }

  it('without the capabilities it cannot switch user: tests run as its own user, and it warns that they can read the credential', async () => {
    const out = await serve('nocaps', '');
    expect(out).to.match(/tests run as the daemon's own user \(the daemon can switch to no other user[^)]*\), so any test can read the node's portal credential/);
    expect(out).to.include(credentialFile);
    expect(out).to.not.include('tests run as another user');
  });

  it("with the shipped unit's capabilities it can: tests run as farmhand-test, and no warning", async () => {
    const out = await serve('caps', '+kill,+setgid,+setuid');
    expect(out).to.match(/"user":"farmhand-test".*"msg":"tests run as another user"/);
    expect(out).to.not.include('any test can read');
  });
});
