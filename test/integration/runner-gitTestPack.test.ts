import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, readlink, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FarmError } from '../../src/core/errors.js';
import { checkTestPackSource, GitTestPack, TestPackConfigError } from '../../src/runner/gitTestPack.js';
import { makeTestPack, STANDARD_TEST_CASES, type TestPackRepo } from '../fixtures/testPack.js';
import { capturingLogger, type CapturingLogger } from '../helpers/logger.js';
import { holdableOrigin } from '../helpers/heldOrigin.js';
import { waitFor } from '../helpers/wait.js';

async function codeOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    return e instanceof FarmError ? e.code : `not a FarmError: ${String(e)}`;
  }
  return undefined;
}

describe('runner: GitTestPack (real git)', function () {
  let pack: TestPackRepo;
  let data: string;
  let log: CapturingLogger;
  const messages = () => log.messages();
  let tp: GitTestPack;
  const fetches = () => messages().filter((m) => m === 'fetched test pack').length;

  const newTestPack = (opts: Partial<ConstructorParameters<typeof GitTestPack>[0]> = {}) =>
    new GitTestPack({
      url: pack.dir,
      dir: path.join(data, 'test-pack.git'),
      worktreesDir: path.join(data, 'checkouts'),
      logger: log,
      ...opts,
    });

  beforeEach(async () => {
    pack = await makeTestPack();
    data = await mkdtemp(path.join(tmpdir(), 'farmhand-data-'));
    log = capturingLogger();
    tp = newTestPack();
    await tp.open();
  });
  afterEach(async () => {
    await pack.cleanup();
    await rm(data, { recursive: true, force: true });
  });

  describe('resolve', () => {
    it('"test_pack_revision may be HEAD, a branch, a tag, a full or abbreviated SHA" (COMPAT)', async () => {
      const other = await pack.commit({ 'tests/other.py': 'def test_o():\n  pass\n' }, { ref: 'feature/x' });
      await pack.tag('v1.0', pack.sha);
      await pack.tag('v2.0', other, 'annotated release');
      await tp.fetch();
      expect(await tp.resolve('HEAD')).to.deep.equal({ sha: pack.sha, branch: 'main' });
      expect(await tp.resolve('main')).to.deep.equal({ sha: pack.sha, branch: 'main' });
      expect(await tp.resolve('refs/heads/main')).to.deep.equal({ sha: pack.sha, branch: 'main' });
      expect(await tp.resolve('feature/x')).to.deep.equal({ sha: other, branch: 'feature/x' });
      expect(await tp.resolve(pack.sha)).to.deep.equal({ sha: pack.sha, branch: null });
      expect(await tp.resolve(pack.sha.slice(0, 7))).to.deep.equal({ sha: pack.sha, branch: null });
      expect(await tp.resolve(pack.sha.slice(0, 4))).to.deep.equal({ sha: pack.sha, branch: null });
      expect(await tp.resolve('v1.0')).to.deep.equal({ sha: pack.sha, branch: null });
      // An annotated tag resolves to the commit it points at, not to the tag object.
      expect(await tp.resolve('v2.0')).to.deep.equal({ sha: other, branch: null });
      expect(await tp.resolve('refs/tags/v2.0')).to.deep.equal({ sha: other, branch: null });
    });

    it('a commit reachable only from refs/snapshots/<user>, made after open(), resolves by its SHA after one fetch', async () => {
      const before = fetches();
      const snap = await pack.snapshot('alice', { 'tests/wip.py': 'def test_wip():\n  pass\n' });
      expect(await tp.resolve(snap)).to.deep.equal({ sha: snap, branch: null });
      expect(fetches() - before).to.equal(1);
      expect(await tp.resolve(snap.slice(0, 10))).to.deep.equal({ sha: snap, branch: null });
      expect(await tp.resolve('refs/snapshots/alice')).to.deep.equal({ sha: snap, branch: null });
      expect(fetches() - before).to.equal(1); // found locally now: no more fetches
      expect(await tp.testCaseNames(snap)).to.include('tests/wip.py::test_wip');
    });

    it('a branch pushed after open() is found by name; a moved branch needs a fetch (post-receive)', async () => {
      const fresh = await pack.commit({ 'x.txt': '1' }, { ref: 'fresh' });
      expect(await tp.resolve('fresh')).to.deep.equal({ sha: fresh, branch: 'fresh' });
      const moved = await pack.commit({ 'x.txt': '2' }, { ref: 'fresh' });
      expect((await tp.resolve('fresh')).sha).to.equal(fresh);
      await tp.fetch();
      expect((await tp.resolve('fresh')).sha).to.equal(moved);
    });

    it('keeps what a moving revision, a commit\'s remotes and its config resolved to until the next fetch, without running git', async () => {
      const sha = await pack.commit({ 'config/remote-control/tv.lircd.conf': 'x', 'config/stbt.conf': '[test_pack]\ndefault_remote_control = tv\n' }, { ref: 'main' });
      await tp.fetch();
      const first = await tp.resolve('main');
      expect(first.sha).to.equal(sha);
      expect(await tp.remoteControls(sha)).to.deep.equal(['apple-tv', 'tv', 'vstb']);
      const config = await tp.config(sha);
      // With the mirror gone, any git command would fail: these answers come from memory (a press asks for them every time).
      const mirror = path.join(data, 'test-pack.git');
      await rename(mirror, `${mirror}.away`);
      try {
        expect(await tp.resolve('main')).to.deep.equal(first);
        expect(await tp.remoteControls(sha)).to.deep.equal(['apple-tv', 'tv', 'vstb']);
        expect(await tp.config(sha)).to.deep.equal(config);
      } finally {
        await rename(`${mirror}.away`, mirror);
      }
      // A fetch (post-receive, or refresh_secs passing) forgets the moving revision: the pushed commit is found.
      const moved = await pack.commit({ 'x.txt': 'moved' }, { ref: 'main' });
      expect((await tp.resolve('main')).sha).to.equal(sha);
      await tp.fetch();
      expect((await tp.resolve('main')).sha).to.equal(moved);
    });

    it('answers not_found, naming the revision, after exactly one fetch', async () => {
      const before = fetches();
      let err: unknown;
      await tp.resolve('no-such-branch').catch((e: unknown) => (err = e));
      expect(err).to.be.instanceOf(FarmError);
      expect((err as FarmError).code).to.equal('not_found');
      expect((err as FarmError).message).to.include('no-such-branch');
      // ...and names the branches that do exist.
      expect((err as FarmError).message).to.match(/its branches are: .*\bmain\b/);
      expect(fetches() - before).to.equal(1);
      expect(await codeOf(tp.resolve('0123456789abcdef0123456789abcdef01234567'))).to.equal('not_found');
      expect(await codeOf(tp.resolve('deadbeef'))).to.equal('not_found');
    });

    it('coalesces concurrent fetches: one git fetch at a time; callers during a fetch share the one fetch that follows it', async () => {
      let before = fetches();
      const calls = [tp.fetch(), tp.fetch(), tp.fetch()];
      expect(calls[1]).to.not.equal(calls[0]);
      expect(calls[2]).to.equal(calls[1]);
      await Promise.all(calls);
      expect(fetches() - before).to.equal(2);
      before = fetches();
      const misses = await Promise.all(['nope-1', 'nope-2', 'nope-3'].map((r) => codeOf(tp.resolve(r))));
      expect(misses).to.deep.equal(['not_found', 'not_found', 'not_found']);
      // The first miss starts a fetch; misses arriving while it runs wait for it instead of starting their own.
      expect(fetches() - before).to.be.within(1, 2);
    });

    it('fetch() (the push hook\'s) never ends on a fetch that began before it: asked while one runs, one more follows', async () => {
      const origin = await holdableOrigin(path.join(data, 'test-pack.git'));
      try {
        const before = fetches();
        await origin.hold();
        const first = tp.fetch();
        await waitFor(async () => (await origin.heldCount()) === 1, 'the first fetch to be held in upload-pack');
        const pushed = await pack.commit({ 'pushed.txt': 'after the first fetch began' }, { ref: 'pushed' });
        const hook = tp.fetch();
        await origin.release();
        await Promise.all([first, hook]);
        // Two fetches: the hook's answer came from one that started after it was asked for.
        expect(fetches() - before).to.equal(2);
        expect(await tp.resolve('pushed')).to.deep.equal({ sha: pushed, branch: 'pushed' });
      } finally {
        await origin.cleanup();
      }
    });

    it('refuses option-injection revisions before git runs, and nothing is executed', async () => {
      const marker = path.join(data, 'pwned');
      for (const bad of [`--upload-pack=touch ${marker}`, `--output=${marker}`, '--all', 'main:tests/basic.py', 'HEAD~1', 'main..other', 'HEAD@{0}', '-h']) {
        expect(await codeOf(tp.resolve(bad)), bad).to.equal('invalid_request');
      }
      expect(existsSync(marker)).to.equal(false);
      expect(await codeOf(tp.testCaseNames('--all'))).to.equal('invalid_request');
      expect(await codeOf(tp.checkout('-x'))).to.equal('invalid_request');
      expect(await codeOf(tp.readFile(pack.sha, '../outside'))).to.equal('invalid_request');
    });

    it('HEAD follows the origin default branch when it changes', async () => {
      const dev = await pack.commit({ 'dev.txt': 'd' }, { ref: 'develop' });
      await pack.git('symbolic-ref', 'HEAD', 'refs/heads/develop');
      await tp.fetch();
      expect(await tp.resolve('HEAD')).to.deep.equal({ sha: dev, branch: 'develop' });
    });
  });

  describe('test case names', () => {
    it('lists top-level test_* functions of tests/**/*.py at a commit, sorted', async () => {
      expect(await tp.testCaseNames(pack.sha)).to.deep.equal(STANDARD_TEST_CASES);
    });

    it('follows the discovery rules: nested dirs, async def listed; indented defs and class methods not; only tests/', async () => {
      const sha = await pack.commit({
        'tests/a/b/c/deep.py': 'def test_deep():\n    pass\n',
        'tests/rules.py': 'class T:\n    def test_method(self):\n        pass\n\nif True:\n    def test_indented():\n        pass\n\nasync def test_async_top():\n    pass\n',
        'tests/notes.md': 'def test_markdown():\n',
        'tests/link.py': { symlink: 'rules.py' },
        'lib/test_lib.py': 'def test_lib():\n    pass\n',
      });
      await tp.fetch();
      const names = await tp.testCaseNames(sha);
      expect(names).to.include.members(['tests/a/b/c/deep.py::test_deep', 'tests/rules.py::test_async_top']);
      expect(names.filter((n) => /method|indented|markdown|test_lib|link\.py/.test(n))).to.deep.equal([]);
      expect(names).to.deep.equal([...names].sort());
    });

    it('not_found for a commit the mirror does not have', async () => {
      expect(await codeOf(tp.testCaseNames('0123456789abcdef0123456789abcdef01234567'))).to.equal('not_found');
    });
  });

  describe('config, remote controls, files', () => {
    const confAt = async (files: Parameters<TestPackRepo['commit']>[0]) => {
      const base = { 'config/farmhand.conf': null, 'config/stbt.conf': null, '.stbt.conf': null };
      const sha = await pack.commit({ ...base, ...files });
      await tp.fetch();
      return tp.config(sha);
    };

    it('config/farmhand.conf wins over config/stbt.conf and .stbt.conf', async () => {
      const cfg = await confAt({ 'config/farmhand.conf': '[a]\nk = farmhand\n', 'config/stbt.conf': '[a]\nk = stbt\n', '.stbt.conf': '[a]\nk = dot\n' });
      expect(cfg.a?.k).to.equal('farmhand');
    });

    it('then config/stbt.conf, then .stbt.conf; "{}" when none', async () => {
      expect((await confAt({ 'config/stbt.conf': '[a]\nk = stbt\n', '.stbt.conf': '[a]\nk = dot\n' })).a?.k).to.equal('stbt');
      expect((await confAt({ '.stbt.conf': '[a]\nk = dot\n' })).a?.k).to.equal('dot');
      expect(await confAt({})).to.deep.equal({});
    });

    it('follows a .stbt.conf symlink inside the repository, but not one leading outside', async () => {
      expect((await confAt({ 'config/real.conf': '[test_pack]\ndefault_remote_control = x\n', '.stbt.conf': { symlink: 'config/real.conf' } })).test_pack).to.deep.equal({
        default_remote_control: 'x',
      });
      expect(await confAt({ '.stbt.conf': { symlink: '../../../../etc/passwd' } })).to.deep.equal({});
    });

    it('the standard pack: config/stbt.conf with [test_pack] default_remote_control', async () => {
      expect((await tp.config(pack.sha)).test_pack?.default_remote_control).to.equal('vstb');
    });

    it('remote controls are the names of config/remote-control/*.lircd.conf, alphabetical', async () => {
      expect(await tp.remoteControls(pack.sha)).to.deep.equal(['apple-tv', 'vstb']);
      const sha = await pack.commit({ 'config/remote-control/README.md': 'x', 'config/remote-control/Zed.lircd.conf': 'z', 'config/remote-control/sub/in.lircd.conf': 'no' });
      await tp.fetch();
      expect(await tp.remoteControls(sha)).to.deep.equal(['Zed', 'apple-tv', 'vstb']);
    });

    it('readFile gives a file at a commit, undefined for a missing file or a folder', async () => {
      expect(await tp.readFile(pack.sha, 'helpers/menu.py')).to.include('def menu_items');
      expect(await tp.readFile(pack.sha, 'nope.txt')).to.equal(undefined);
      expect(await tp.readFile(pack.sha, 'tests')).to.equal(undefined);
    });
  });

  describe('checkouts', () => {
    it('checks a commit out to <worktreesDir>/<sha>, symlinks kept, and reuses it', async () => {
      const dir = await tp.checkout(pack.sha);
      expect(dir).to.equal(path.join(data, 'checkouts', pack.sha));
      expect(await readFile(path.join(dir, 'tests/basic.py'), 'utf8')).to.include('def test_pass');
      expect(await readlink(path.join(dir, '.stbt.conf'))).to.equal('config/stbt.conf');
      expect(await tp.checkout(pack.sha)).to.equal(dir);
      expect(messages().filter((m) => m === 'checked out test pack')).to.have.length(1);
    });

    it('a job\'s checkout of a commit resolved or checked out before runs no git (a process per job on its start)', async () => {
      const dir = await tp.checkout(pack.sha);
      const resolved = await pack.commit({ 'x.txt': 'resolved by its SHA' }, { ref: 'main' });
      expect((await tp.resolve(resolved)).sha).to.equal(resolved);
      const resolvedDir = await tp.checkout(resolved);
      // With the mirror gone, any git command would fail: the commits are known, the checkouts made.
      const mirror = path.join(data, 'test-pack.git');
      await rename(mirror, `${mirror}.away`);
      try {
        expect(await tp.checkout(pack.sha)).to.equal(dir);
        expect(await tp.checkout(resolved)).to.equal(resolvedDir);
        // A commit never seen is still asked of git, and refused.
        const err = await tp.checkout('0'.repeat(40)).catch((e: unknown) => e);
        expect(err).to.be.instanceOf(FarmError).and.to.have.property('code', 'not_found');
      } finally {
        await rename(`${mirror}.away`, mirror);
      }
      const err = await tp.checkout('1'.repeat(40)).catch((e: unknown) => e);
      expect(err).to.be.instanceOf(FarmError).and.to.have.property('code', 'not_found');
    });

    it('concurrent calls for one SHA share one checkout', async () => {
      const dirs = await Promise.all([tp.checkout(pack.sha), tp.checkout(pack.sha), tp.checkout(pack.sha)]);
      expect(new Set(dirs).size).to.equal(1);
      expect(messages().filter((m) => m === 'checked out test pack')).to.have.length(1);
    });

    it('a half-made checkout left by a crash is removed and the checkout redone', async () => {
      const half = path.join(data, 'checkouts', `.tmp-${pack.sha}-dead`);
      await mkdir(half, { recursive: true });
      await writeFile(path.join(half, 'partial'), 'x');
      const again = newTestPack();
      await again.open();
      expect(existsSync(half)).to.equal(false);
      const dir = await again.checkout(pack.sha);
      expect(await readdir(dir)).to.include.members(['tests', 'config', 'helpers']);
    });

    it('keeps only the N most recent checkouts', async () => {
      const small = newTestPack({ keepCheckouts: 3 });
      await small.open();
      const shas = [pack.sha];
      for (let i = 1; i < 5; i++) shas.push(await pack.commit({ 'n.txt': String(i) }));
      await small.fetch();
      // Last use is the folder's mtime: give each checkout its own, in order, instead of sleeping between them.
      const past = Date.now() / 1000 - 3600;
      for (const [i, sha] of shas.entries()) {
        await small.checkout(sha);
        const dir = path.join(data, 'checkouts', sha);
        if (existsSync(dir)) await utimes(dir, past + i, past + i);
      }
      const left = (await readdir(path.join(data, 'checkouts'))).filter((n) => !n.startsWith('.')).sort();
      expect(left).to.deep.equal([shas[2], shas[3], shas[4]].sort());
    });
  });

  describe('the mirror', () => {
    it('open() again is harmless; a broken mirror folder is recreated', async () => {
      await newTestPack().open();
      expect((await tp.resolve('main')).sha).to.equal(pack.sha);
      await rm(path.join(data, 'test-pack.git'), { recursive: true });
      await mkdir(path.join(data, 'test-pack.git'));
      await writeFile(path.join(data, 'test-pack.git', 'junk'), 'not a repository');
      const fresh = newTestPack();
      await fresh.open();
      expect((await fresh.resolve('main')).sha).to.equal(pack.sha);
    });

    it('open() succeeds while the origin is unreachable; resolve then answers not_found', async () => {
      const offline = new GitTestPack({
        url: path.join(data, 'no-such-origin.git'),
        dir: path.join(data, 'offline.git'),
        worktreesDir: path.join(data, 'offline-checkouts'),
        logger: log,
      });
      await offline.open();
      expect(messages()).to.include('test pack unreachable, retrying');
      expect(await codeOf(offline.resolve('main'))).to.equal('not_found');
      offline.close();
    });

    it("a not_found after a failed fetch keeps git's reason whole (the first line is the reason)", async () => {
      const offline = newTestPack({ url: path.join(data, 'no-such-origin.git'), dir: path.join(data, 'offline.git') });
      await offline.open();
      const err = await offline.resolve('main').catch((e: unknown) => e as FarmError);
      offline.close();
      expect((err as FarmError).code).to.equal('not_found');
      expect((err as FarmError).message).to.include('does not appear to be a git repository').and.include('Could not read from remote repository');
    });

    it('while the origin is down: problem() says "unreachable, retrying" with git\'s reason, and the retries find it once it is up', async () => {
      const later = path.join(data, 'later.git');
      const offline = newTestPack({ url: later, dir: path.join(data, 'offline.git'), retryAfterMs: 20 });
      await offline.open();
      try {
        expect(offline.problem()).to.match(/^test pack unreachable, retrying: git fetch failed: .*does not appear to be a git repository/);
        await pack.git('clone', '--quiet', '--bare', pack.dir, later); // the server comes back
        await waitFor(() => offline.problem() === undefined, 'the test pack to be reachable again');
        expect(messages()).to.include('test pack reachable again');
        expect((await offline.resolve('main')).sha).to.equal(pack.sha);
      } finally {
        offline.close();
      }
    });
  });

  describe('checkTestPackSource (at start)', () => {
    it('a local path that does not exist, or is not a git repository, is a TestPackConfigError with git\'s reason', async () => {
      const missing = await checkTestPackSource(path.join(data, 'nope')).catch((e: unknown) => e);
      expect(missing).to.be.instanceOf(TestPackConfigError);
      expect((missing as Error).message).to.include('no such file or directory');
      const plain = await checkTestPackSource(data).catch((e: unknown) => e);
      expect(plain).to.be.instanceOf(TestPackConfigError);
      expect((plain as Error).message).to.include('does not appear to be a git repository');
    });

    it('a git repository (a path or file:// URL) passes; a network URL is not checked (it may come up later)', async () => {
      await checkTestPackSource(pack.dir);
      await checkTestPackSource(`file://${pack.dir}`);
      await checkTestPackSource('http://127.0.0.1:1/pack.git');
      await checkTestPackSource('git@git.example.invalid:team/pack.git');
    });
  });
});
