/**
 * Start-up and the `farmhand` command, with real processes: the built
 * command runs by itself, command-line mistakes exit 64, one daemon per data
 * directory, a port in use fails fast leaving nothing running, test-pack
 * problems are clear, and a second Ctrl-C still leaves consistent state.
 */
import { expect } from 'chai';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { mkdir, mkdtemp, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runCli } from '../../src/cli/program.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { version } from '../../src/version.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { ensureBuilt } from '../helpers/build.js';
import { runCaptured } from '../helpers/cli.js';
import { waitFor } from '../helpers/wait.js';
import { RUN_FILES, startCli, type Cli } from './crash-lib.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = path.join(ROOT, 'src/main.ts');

interface Exited {
  code: number | null;
  signal: NodeJS.Signals | null;
  out: string;
  err: string;
}

/** Every process a test starts, SIGKILLed after each test (a failing test may leave one running). */
const children: ChildProcess[] = [];

/** Run `farmhand <args>` (src/main.ts through tsx) to its end. `env` is added to the environment. */
function farmhand(args: string[], env: Record<string, string> = {}): Promise<Exited> {
  const child = spawn(process.execPath, ['--import', 'tsx', MAIN, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  return exited(child);
}

function exited(child: ChildProcess): Promise<Exited> {
  let out = '';
  let err = '';
  child.stdout?.on('data', (b: Buffer) => (out += b.toString()));
  child.stderr?.on('data', (b: Buffer) => (err += b.toString()));
  return new Promise((resolve) => child.once('close', (code, signal) => resolve({ code, signal, out, err })));
}

/** pids of live processes whose environment holds `mark` (a daemon's children inherit it). */
function processesMarked(mark: string): number[] {
  const found: number[] = [];
  for (const p of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      if (readFileSync(`/proc/${p}/environ`, 'latin1').includes(mark) && !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${p}/stat`, 'utf8'))) found.push(Number(p));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return false;
  }
};

const SLOW_PACK = {
  'tests/slow.py': 'import time\n\ndef test_slow():\n    with open("started", "w") as f:\n        f.write("yes")\n    time.sleep(120)\n',
};

describe('start-up and the farmhand command (real processes)', function () {
  this.timeout(120_000);
  let pack: TestPackRepo;
  let dir: string;

  before(async () => {
    pack = await makeTestPack(SLOW_PACK);
  });
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-startup-'));
  });
  afterEach(async () => {
    for (const c of children.splice(0)) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    await rm(dir, { recursive: true, force: true });
  });
  after(() => pack.cleanup());

  async function writeConfig(overrides: Record<string, unknown> = {}): Promise<string> {
    const file = path.join(dir, `farmhand-${Math.random().toString(16).slice(2)}.json`);
    const cfg = { node_id: 'startup-node', listen: '127.0.0.1:0', data_dir: path.join(dir, 'data'), test_pack: { url: pack.dir }, capture: { uri: 'none:' }, log_level: 'info', runner: { kill_grace_secs: 1, run_tests_as: false }, ...overrides };
    await writeFile(file, JSON.stringify(cfg));
    return file;
  }

  /** Start a run of the slow test; resolves with its job file and the test process's pid once it runs. */
  async function startSlowRun(cli: Cli): Promise<{ jobFile: string; pid: number }> {
    const res = await fetch(`${cli.url}/api/v1/run_tests`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ test_pack_revision: 'main', test_cases: ['tests/slow.py::test_slow'] }) });
    expect(res.status).to.equal(200);
    const uid = ((await res.json()) as { job_uid: string }).job_uid;
    const jobFile = path.join(dir, 'data', 'jobs', `${uid.split('/').pop()}.json`);
    const pid = await waitFor(() => {
      const job = JSON.parse(existsSync(jobFile) ? readFileSync(jobFile, 'utf8') : '{}') as { current_run?: { pid: number | null; result_id: string } };
      return job.current_run?.pid ?? undefined;
    }, { what: 'the slow test to run', timeoutMs: 60_000 });
    return { jobFile, pid };
  }

  it('after a build, dist/main.js has its run bit and runs by itself (`dist/main.js --version`)', async () => {
    const bin = path.join(ROOT, 'dist/main.js');
    // Built from the current src/, and not being rebuilt by another test process meanwhile (test/helpers/build.ts).
    await ensureBuilt();
    expect((await stat(bin)).mode & 0o111, 'dist/main.js is not executable: the build must chmod it').to.not.equal(0);
    const r = await exited(spawn(bin, ['--version'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(r.code, r.err).to.equal(0);
    expect(r.out).to.equal(`${version}\n`);
  });

  it('scripts/link-command.sh (what setup.sh runs) puts a working `farmhand` in a bin folder', async () => {
    await ensureBuilt(); // it links dist/main.js
    const bin = path.join(dir, 'bin');
    const linked = await exited(spawn('bash', [path.join(ROOT, 'scripts/link-command.sh'), bin], { stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(linked.code, linked.err).to.equal(0);
    const r = await exited(spawn(path.join(bin, 'farmhand'), ['--version'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(r.code, r.err).to.equal(0);
    expect(r.out).to.equal(`${version}\n`);
  });

  it('scripts/install-appliance.sh --root links /usr/local/bin/farmhand to the installed, executable dist/main.js', async () => {
    await ensureBuilt(); // the installer copies dist/
    const root = path.join(dir, 'root');
    const r = await exited(spawn('bash', [path.join(ROOT, 'scripts/install-appliance.sh'), '--root', root, '--test-pack', 'https://git.example.invalid/t.git'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(r.code, r.err).to.equal(0);
    expect(readlinkSync(path.join(root, 'usr/local/bin/farmhand'))).to.equal('/opt/farmhand/dist/main.js');
    const installed = path.join(root, 'opt/farmhand/dist/main.js');
    const v = await exited(spawn(installed, ['--version'], { stdio: ['ignore', 'pipe', 'pipe'] }));
    expect(v.code, v.err).to.equal(0);
    expect(v.out).to.equal(`${version}\n`);
  });

  it('command-line mistakes print usage and exit 64, never a stack trace', async () => {
    const cases = [
      ['serve', '--bogus'],
      ['serve', '--listen', '127.0.0.1:99999'],
      ['serve', '--listen', 'no-port'],
      ['serve', '--config'],
      ['frobnicate'],
      [],
      ['token', 'create', '--user'],
      ['token', 'list'],
      ['ir', 'encode', 'remote.conf', 'KEY_OK', '--count', '0'],
    ];
    // Every case through the parser in this process (fast), and two through the real command.
    for (const args of cases) {
      const { code, out, err } = await runCaptured((argv, o, e) => runCli(argv, { out: o, err: e }, { serve: () => Promise.reject(new Error('serve must not run')) }), args);
      const what = `farmhand ${args.join(' ')}: ${err}`;
      expect(code, what).to.equal(64);
      expect(err, what).to.match(/usage: farmhand/i);
      expect(out, what).to.equal('');
    }
    for (const args of [cases[0]!, cases[1]!]) {
      const r = await farmhand(args);
      const what = `farmhand ${args.join(' ')}: ${r.err}`;
      expect(r.code, what).to.equal(64);
      expect(r.err, what).to.match(/usage: farmhand serve/i);
      expect(r.err, what).not.to.match(/^\s+at /m);
    }
    expect((await farmhand(['help'])).code).to.equal(0);
  });

  it('two serves on one data directory: the second exits at once naming the first one\'s pid; the first and its running test are untouched', async () => {
    const config = await writeConfig();
    const first = await startCli(config);
    children.push(first.child);
    const { jobFile, pid } = await startSlowRun(first);
    const second = await farmhand(['serve', '--config', config]);
    expect(second.code).to.not.equal(0);
    expect(second.err.trim().split('\n')).to.have.length(1);
    expect(second.err).to.include(`pid ${first.child.pid}`).and.include('in use');
    // The first daemon's test still runs, its job is still running, and it still answers.
    expect(alive(pid)).to.equal(true);
    expect(JSON.parse(readFileSync(jobFile, 'utf8')).status).to.equal('running');
    expect((await fetch(`${first.url}/api/v1/results`)).status).to.equal(200);
  });

  it('a daemon SIGKILLed does not keep the next one out (the kernel drops the lock)', async () => {
    const config = await writeConfig();
    const first = await startCli(config);
    children.push(first.child);
    const gone = exited(first.child);
    first.child.kill('SIGKILL');
    await gone;
    const next = await startCli(config);
    children.push(next.child);
    expect((await fetch(`${next.url}/api/v1/results`)).status).to.equal(200);
  });

  it('port in use: one line on stderr, non-zero exit, and nothing left running (no ffmpeg)', async () => {
    const busy: Server = createServer();
    await new Promise<void>((ok) => busy.listen(0, '127.0.0.1', ok));
    const port = (busy.address() as { port: number }).port;
    try {
      // Real capture (testsrc through ffmpeg), so a daemon that started capture before binding would leave ffmpeg.
      const config = await writeConfig({ listen: `127.0.0.1:${port}`, capture: { uri: 'testsrc:', width: 160, height: 120, record_video: true } });
      const mark = `FARMHAND_STARTUP_TEST=${process.pid}-${Date.now()}`;
      const r = await farmhand(['serve', '--config', config], { FARMHAND_STARTUP_TEST: mark.split('=')[1]! });
      expect(r.code).to.equal(1);
      expect(r.err.trim().split('\n'), r.err).to.have.length(1);
      expect(r.err).to.match(/^farmhand: cannot listen on 127\.0\.0\.1:\d+: the address is already in use/);
      expect(processesMarked(mark)).to.deep.equal([]);
    } finally {
      busy.close();
    }
  });

  it('a test pack that does not exist or is not a git repository: one clear line and exit 78 (EX_CONFIG)', async () => {
    const missing = await farmhand(['serve', '--config', await writeConfig({ test_pack: { url: path.join(dir, 'nope') } })]);
    expect(missing.code).to.equal(78);
    expect(missing.err.trim().split('\n')).to.have.length(1);
    expect(missing.err).to.include('no such file or directory');
    await mkdir(path.join(dir, 'plain'));
    const plain = await farmhand(['serve', '--config', await writeConfig({ test_pack: { url: path.join(dir, 'plain') } })]);
    expect(plain.code).to.equal(78);
    expect(plain.err.trim().split('\n')).to.have.length(1);
    // git's own reason, whole.
    expect(plain.err).to.include('does not appear to be a git repository');
  });

  it('a test-pack URL that is down: the daemon starts, says "test pack unreachable, retrying" in its log and in the node status (and warns that v1 is open to callers without a token while users have roles)', async () => {
    const dataDir = path.join(dir, 'data');
    const { token } = await new TokenStore(tokensFile(dataDir)).create('ops', { role: 'read' });
    const config = await writeConfig({ test_pack: { url: 'http://127.0.0.1:1/pack.git' } });
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'serve', '--config', config], { stdio: ['ignore', 'pipe', 'pipe'] });
    children.push(child);
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    const url = await waitFor(() => /listening on (http:\/\/\S+)/.exec(out)?.[1], { what: 'the daemon to listen', timeoutMs: 60_000 });
    expect(out).to.include('test pack unreachable, retrying');
    expect(out).to.include('users have roles, but auth.v1_requires_token is false');
    const res = await fetch(`${url}/api/v2/nodes/startup-node`, { headers: { Authorization: `token ${token}` } });
    expect(res.status).to.equal(200);
    const body = (await res.json()) as { test_pack_problem?: string };
    expect(body.test_pack_problem).to.match(/^test pack unreachable, retrying: git fetch failed: .*127\.0\.0\.1/);
  });

  it('double Ctrl-C: the second SIGINT is logged and ignored; the job is exited and the run recorded with its files', async () => {
    const config = await writeConfig();
    const cli = await startCli(config);
    children.push(cli.child);
    let out = '';
    // The second SIGINT goes the moment "stopping" is read, not at a later poll: on a fast machine the whole stop
    // can be over between two polls, and the signal would find no process.
    let second = false;
    cli.child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      if (!second && out.includes('"msg":"stopping"')) second = cli.child.kill('SIGINT');
    });
    const end = exited(cli.child);
    const { jobFile, pid } = await startSlowRun(cli);
    cli.child.kill('SIGINT');
    await waitFor(() => second, { what: 'the daemon to log "stopping", and the second SIGINT sent', timeoutMs: 60_000 });
    const r = await end;
    expect(r.signal, 'the second SIGINT killed the daemon').to.equal(null);
    expect(r.code).to.equal(0);
    expect(out).to.include('already stopping');
    expect(alive(pid)).to.equal(false);
    const job = JSON.parse(readFileSync(jobFile, 'utf8')) as { status: string; job_uid: string };
    expect(job.status).to.equal('exited');
    // The run's folder: results/<hex>/<job number>/<stamp>, with every file of a finished run.
    const jobDir = path.join(dir, 'data', 'results', ...job.job_uid.split('/').filter(Boolean).slice(-2));
    const runs = readdirSync(jobDir);
    expect(runs).to.have.length(1);
    const missing = RUN_FILES.filter((f) => !existsSync(path.join(jobDir, runs[0]!, f)));
    expect(missing).to.deep.equal([]);
  });

  it('SIGKILL of `farmhand token create` while it holds the tokens lock: the next create works', async () => {
    const dataDir = path.join(dir, 'data');
    await mkdir(dataDir);
    // tokens.json as a FIFO: create blocks reading it, inside the lock, until killed.
    await new Promise<void>((ok, fail) => execFile('mkfifo', [tokensFile(dataDir)], (e) => (e ? fail(e) : ok())));
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'token', 'create', '--user', 'stuck', '--data-dir', dataDir], { stdio: 'ignore' });
    children.push(child);
    const lockFile = path.join(dataDir, '.tokens.json.lock');
    await waitFor(() => existsSync(lockFile) && new RegExp(`^${child.pid}\\b`).test(readFileSync(lockFile, 'utf8')), { what: 'the lock file to name the child', timeoutMs: 60_000 });
    const gone = exited(child);
    child.kill('SIGKILL');
    await gone;
    await rm(tokensFile(dataDir));
    const next = await farmhand(['token', 'create', '--user', 'next', '--data-dir', dataDir]);
    expect(next.code, next.err).to.equal(0);
    expect(next.out).to.match(/^fh_[0-9a-f]{8}_/);
  });
});
