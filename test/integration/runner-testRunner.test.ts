import { expect } from 'chai';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RunOutcome } from '../../src/core/model.js';
import type { IniConfig } from '../../src/core/ports.js';
import { GitTestPack } from '../../src/runner/gitTestPack.js';
import { ProcessTestRunner, type ProcessTestRunnerOptions } from '../../src/runner/testRunner.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { isAlive } from '../helpers/processes.js';
import { waitFor } from '../helpers/wait.js';

const STAMPED = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00 /;
const METADATA = ['test-name', 'test-args', 'git-commit', 'duration', 'exit-status', 'failure-reason', 'farmhand-version.log'];
const LOGS = ['stdout.log', 'stderr.log', 'combined.log', 'farmhand.log'];

/** The file's text once it exists and is not empty. */
const waitForFile = (file: string): Promise<string> => waitFor(() => readFile(file, 'utf8').catch(() => ''), `${file} to appear`);

/** The time stamp of the first farmhand.log line that contains `text`, in seconds. */
function stampOf(log: string, text: string): number {
  const line = log.split('\n').find((l) => l.includes(text));
  expect(line, `a farmhand.log line with "${text}"`).to.match(STAMPED);
  return Date.parse((line as string).slice(0, 32).replace(/(\.\d{3})\d{3}/, '$1')) / 1000;
}

describe('runner: ProcessTestRunner (real python3 children)', function () {
  // Bounds only (a hang becomes a message): several python starts per test, on a loaded 2-core box.
  this.timeout(90_000);
  let pack: TestPackRepo;
  let data: string;
  let checkoutDir: string;
  let runs = 0;

  before(async () => {
    pack = await makeTestPack();
    data = await mkdtemp(path.join(tmpdir(), 'farmhand-runs-'));
    const tp = new GitTestPack({ url: pack.dir, dir: path.join(data, 'tp.git'), worktreesDir: path.join(data, 'checkouts') });
    await tp.open();
    checkoutDir = await tp.checkout(pack.sha);
  });
  after(async () => {
    await pack.cleanup();
    await rm(data, { recursive: true, force: true });
  });

  const runner = (o: Partial<ProcessTestRunnerOptions> = {}) =>
    new ProcessTestRunner({ killGraceSecs: 2, maxOutputBytes: 1 << 20, version: '9.8.7', tmpDir: data, ...o });

  interface Run {
    outcome: RunOutcome;
    dir: string;
    pid: number | undefined;
    file(name: string): Promise<string>;
  }

  async function run(
    testCase: string,
    opts: { timeoutSecs?: number; config?: IniConfig; signal?: AbortSignal; runner?: ProcessTestRunner; onSpawn?: (pid: number) => void } = {},
  ): Promise<Run> {
    const dir = path.join(data, 'results', String(++runs));
    await mkdir(dir, { recursive: true });
    let pid: number | undefined;
    const outcome = await (opts.runner ?? runner()).run(
      {
        resultDir: dir,
        checkoutDir,
        testCase,
        testPackSha: pack.sha,
        config: opts.config ?? { test_pack: { default_remote_control: 'vstb' }, 'result.tags': { 'jenkins/BUILD_ID': '42' } },
        timeoutSecs: opts.timeoutSecs ?? 20,
        onSpawn: (p) => {
          pid = p;
          opts.onSpawn?.(p);
        },
      },
      opts.signal ?? new AbortController().signal,
    );
    return { outcome, dir, pid, file: (name) => readFile(path.join(dir, name), 'utf8') };
  }

  describe('outcomes', () => {
    it('return -> pass: metadata files, logs, and nothing else in the result folder', async () => {
      const r = await run('tests/basic.py::test_pass');
      expect(r.outcome).to.deep.equal({ result: 'pass', failure_reason: null, traceback: null, exit_status: 0 });
      expect((await readdir(r.dir)).sort()).to.deep.equal([...METADATA, ...LOGS].sort());
      expect(await r.file('test-name')).to.equal('tests/basic.py::test_pass\n');
      expect(await r.file('test-args')).to.equal('');
      expect(await r.file('git-commit')).to.equal(`${pack.sha}\n`);
      expect(await r.file('exit-status')).to.equal('0\n');
      expect(await r.file('failure-reason')).to.equal('');
      expect(await r.file('farmhand-version.log')).to.equal('9.8.7\n');
      const duration = Number(await r.file('duration'));
      expect(duration).to.be.above(0).and.below(20); // under the run's 20 s timeout, or it would have ended as one
      expect(await r.file('duration')).to.match(/^\d+\.\d{3}\n$/);
      expect(await r.file('stdout.log')).to.equal('hello from test_pass\n');
      expect(r.pid).to.be.a('number');
    });

    it('AssertionError -> fail, failure_reason "<ExceptionType>: <message>" and the Python traceback', async () => {
      const r = await run('tests/basic.py::test_fail');
      expect(r.outcome.result).to.equal('fail');
      expect(r.outcome.failure_reason).to.equal('AssertionError: arithmetic is broken');
      expect(r.outcome.traceback).to.match(/^Traceback \(most recent call last\):\n {2}File ".*tests\/basic\.py", line 7, in test_fail\n/);
      expect(r.outcome.traceback).to.not.include('farmhand/run.py');
      expect(r.outcome.exit_status).to.equal(1);
      expect(await r.file('failure-reason')).to.equal('AssertionError: arithmetic is broken\n');
      expect(await r.file('exit-status')).to.equal('1\n');
      expect(await r.file('stderr.log')).to.include('AssertionError: arithmetic is broken');
    });

    it('UITestFailure -> fail; an stb-tester style UITestFailure subclass -> fail', async () => {
      const ui = await run('tests/basic.py::test_ui_failure');
      expect(ui.outcome).to.deep.include({ result: 'fail', failure_reason: 'UITestFailure: the menu did not appear' });
      const stbt = await run('tests/stbt_compat.py::test_match_timeout');
      expect(stbt.outcome).to.deep.include({ result: 'fail', failure_reason: 'MatchTimeout: no match for button.png' });
    });

    it('any other exception -> error, UITestError included; an empty message gives just the type', async () => {
      const e = await run('tests/basic.py::test_error');
      expect(e.outcome).to.deep.include({ result: 'error', failure_reason: 'RuntimeError: something went wrong', exit_status: 2 });
      expect(e.outcome.traceback).to.include('raise RuntimeError("something went wrong")');
      const ui = await run('tests/basic.py::test_ui_error');
      expect(ui.outcome).to.deep.include({ result: 'error', failure_reason: 'UITestError: the capture card is unplugged' });
      const empty = await run('tests/basic.py::test_empty_message');
      expect(empty.outcome).to.deep.include({ result: 'error', failure_reason: 'ValueError' });
    });

    it('a missing file or function -> error with a clear reason', async () => {
      const f = await run('tests/nope.py::test_x');
      expect(f.outcome).to.deep.include({ result: 'error', failure_reason: 'FileNotFoundError: tests/nope.py: no such file in the test pack', traceback: null });
      const fn = await run('tests/basic.py::test_nope');
      expect(fn.outcome).to.deep.include({ result: 'error', failure_reason: 'AttributeError: tests/basic.py has no function test_nope' });
      const outside = await run('../../etc/passwd::x');
      expect(outside.outcome.result).to.equal('error');
      expect(outside.outcome.failure_reason).to.match(/^ValueError: /);
    });

    it('get_config("result.tags", "jenkins/BUILD_ID") answers the run\'s tag; config sections too; a default when missing', async () => {
      const r = await run('tests/config_tags.py::test_tags');
      expect(r.outcome.result).to.equal('pass');
      expect(await r.file('tag.txt')).to.equal('42 vstb fallback');
      const missing = await run('tests/config_tags.py::test_missing_config');
      expect(missing.outcome.result).to.equal('error');
      expect(missing.outcome.failure_reason).to.match(/^ConfigurationError: .*no\/such\/tag/);
    });

    it('imports the test pack\'s own helpers; runs nested files and async def tests', async () => {
      for (const t of ['tests/uses_helper.py::test_helper', 'tests/sub/nested.py::test_nested', 'tests/sub/nested.py::test_async']) {
        expect((await run(t)).outcome, t).to.deep.include({ result: 'pass', failure_reason: null });
      }
    });

    it('a crash without a report (os._exit, a signal) -> error naming the exit status', async () => {
      const exit = await run('tests/crash.py::test_os_exit');
      expect(exit.outcome).to.deep.equal({
        result: 'error',
        failure_reason: 'Crash: the test process exited with status 3 without reporting a result',
        traceback: null,
        exit_status: 3,
      });
      const segv = await run('tests/crash.py::test_segfault');
      expect(segv.outcome).to.deep.include({ result: 'error', exit_status: 139 });
      expect(segv.outcome.failure_reason).to.include('SIGSEGV');
      expect(await segv.file('exit-status')).to.equal('139\n');
    });

    it('a test process that ends at once is seen to end, with its output and exit status (exit and output are listened to from the spawn on)', async () => {
      // An "interpreter" that writes and exits at once, many times: its exit and output must never be missed,
      // however the event loop orders the child's exit and the runner's own first steps.
      const quick = path.join(data, 'quick-python');
      await writeFile(quick, '#!/bin/sh\necho "to stdout"\necho "to stderr" >&2\nexit 3\n', { mode: 0o755 });
      for (let i = 0; i < 30; i++) {
        const r = await run('tests/basic.py::test_pass', { runner: runner({ python: quick }), timeoutSecs: 60 });
        expect(r.outcome, `run ${i}`).to.deep.include({ result: 'error', exit_status: 3 });
        expect(await r.file('stdout.log'), `run ${i}`).to.equal('to stdout\n');
        expect(await r.file('stderr.log'), `run ${i}`).to.equal('to stderr\n');
      }
    });

    it('an interpreter that does not exist -> error, exit status unknown, files still written', async () => {
      const r = await run('tests/basic.py::test_pass', { runner: runner({ python: path.join(data, 'no-python') }) });
      expect(r.outcome).to.deep.include({ result: 'error', exit_status: null });
      expect(r.outcome.failure_reason).to.match(/^InfrastructureError: runner_timeout: could not start .*no-python/);
      expect(await r.file('exit-status')).to.equal('');
      expect(r.pid).to.equal(undefined);
    });
  });

  describe('logs', () => {
    it('"each line is an ISO 8601 timestamp, a space, then the message"; farmhand.log has the tool\'s lines too', async () => {
      const before = Date.now();
      const r = await run('tests/basic.py::test_fail');
      const combined = (await r.file('combined.log')).trimEnd().split('\n');
      expect(combined.length).to.be.above(3);
      for (const line of combined) expect(line).to.match(STAMPED);
      const first = Date.parse((combined[0] as string).slice(0, 23) + 'Z');
      expect(first).to.be.within(before - 5, Date.now());
      const tool = (await r.file('farmhand.log')).trimEnd().split('\n');
      for (const line of tool) expect(line).to.match(STAMPED);
      expect(tool[0]).to.match(new RegExp(`^\\S+ Running tests/basic\\.py::test_fail at ${pack.sha}$`));
      expect(tool.at(-1)).to.match(/ Finished tests\/basic\.py::test_fail: fail: AssertionError: arithmetic is broken \(exit status 1, [\d.]+ s\)$/);
      expect(tool.slice(1, -1)).to.deep.equal(combined);
    });

    it('output that is not UTF-8 is kept byte for byte and breaks nothing', async () => {
      const r = await run('tests/output.py::test_not_utf8');
      expect(r.outcome.result).to.equal('pass');
      const raw = await readFile(path.join(r.dir, 'stdout.log'));
      expect(raw.includes(Buffer.from([0x20, 0xff, 0xfe, 0x80, 0x20]))).to.equal(true);
      expect(await r.file('stderr.log')).to.equal('to stderr\n');
      const combined = await readFile(path.join(r.dir, 'combined.log'));
      expect(combined.includes(Buffer.from([0xff, 0xfe, 0x80]))).to.equal(true);
    });

    it('a partial last line (no newline) is flushed at exit, before the outcome line', async () => {
      const r = await run('tests/output.py::test_partial_line');
      expect(await r.file('stdout.log')).to.equal('no newline at the end');
      const tool = (await r.file('farmhand.log')).trimEnd().split('\n');
      expect(tool.at(-2)).to.match(/ no newline at the end$/);
      expect(tool.at(-1)).to.include('Finished');
    });

    it('output past maxOutputBytes is dropped and a line says so; the test still passes', async () => {
      const r = await run('tests/output.py::test_lots_of_output', { runner: runner({ maxOutputBytes: 10_000 }) });
      expect(r.outcome.result).to.equal('pass');
      const stdout = await r.file('stdout.log');
      expect(stdout).to.match(/farmhand: the test's output and actions reached the 10000-byte cap on the run's logs; the rest is dropped\n$/);
      // The cap is on the logs together: the output is in stdout.log, combined.log and farmhand.log.
      let total = 0;
      for (const f of ['stdout.log', 'stderr.log', 'combined.log', 'farmhand.log']) total += Buffer.byteLength(await r.file(f), 'latin1');
      expect(total).to.be.within(10_000 * 0.9, 10_000 + 1024);
      expect(await r.file('farmhand.log')).to.match(/ \d+ bytes of output were dropped \(over the 10000-byte cap on the run's logs\)\n/);
    });
  });

  describe('timeouts and stops', () => {
    it('timeout -> the group is killed, error "Timeout: test ran longer than <N> s", traceback shows where it hung', async () => {
      const r = await run('tests/hang.py::test_hang', { timeoutSecs: 2 }); // long enough for Python to reach the test body on a loaded machine, so there is a traceback
      expect(r.outcome.result).to.equal('error');
      expect(r.outcome.failure_reason).to.equal('Timeout: test ran longer than 2 s');
      expect(r.outcome.traceback).to.include('time.sleep(1000)');
      expect(r.outcome.exit_status).to.equal(143);
      expect(Number(await r.file('duration'))).to.be.at.least(1.99); // the timeout never fires early (give or take libuv's 1 ms step)
      expect(isAlive(r.pid as number)).to.equal(false);
      expect(await r.file('farmhand.log')).to.include('Timeout: test ran longer than 2 s; sending SIGTERM');
    });

    it('abort -> error "Stopped: the job was stopped"; the process group, grandchild included, is gone', async () => {
      const ac = new AbortController();
      const dir = path.join(data, 'results', String(runs + 1));
      const pending = run('tests/grandchild.py::test_spawns_grandchild', { signal: ac.signal });
      const grandchild = Number(await waitForFile(path.join(dir, 'grandchild.pid')));
      expect(isAlive(grandchild)).to.equal(true);
      ac.abort();
      const r = await pending;
      expect(r.outcome).to.deep.include({ result: 'error', failure_reason: 'Stopped: the job was stopped' });
      expect(isAlive(r.pid as number)).to.equal(false);
      expect(isAlive(grandchild)).to.equal(false);
      expect(await r.file('failure-reason')).to.equal('Stopped: the job was stopped\n');
      expect((await readdir(r.dir)).sort()).to.deep.equal([...METADATA, ...LOGS, 'grandchild.pid'].sort());
    });

    it('a test that ignores SIGTERM is killed with SIGKILL after the grace period', async () => {
      const ac = new AbortController();
      const pending = run('tests/stubborn.py::test_ignores_sigterm', { signal: ac.signal, runner: runner({ killGraceSecs: 0.3 }) });
      const dir = path.join(data, 'results', String(runs));
      await waitForFile(path.join(dir, 'stdout.log'));
      ac.abort();
      const r = await pending;
      // The grace period is waited out: the run's own log stamps SIGKILL at least 0.3 s after SIGTERM.
      const log = await r.file('farmhand.log');
      expect(stampOf(log, 'sending SIGKILL') - stampOf(log, 'sending SIGTERM')).to.be.at.least(0.29); // libuv's timer clock has 1 ms steps
      expect(r.outcome).to.deep.include({ result: 'error', failure_reason: 'Stopped: the job was stopped', exit_status: 137 });
      expect(await r.file('farmhand.log')).to.include('sending SIGKILL');
      expect(isAlive(r.pid as number)).to.equal(false);
    });

    it('processes a passing test leaves behind are ended; the result stays pass', async () => {
      const r = await run('tests/grandchild.py::test_leaves_background_process');
      expect(r.outcome.result).to.equal('pass');
      expect(isAlive(Number(await r.file('grandchild.pid')))).to.equal(false);
      expect(await r.file('farmhand.log')).to.include('The test left processes running; ending them');
    });

    it('a stop that arrives while the process is starting (spawned, not yet supervised) still stops it', async () => {
      // onSpawn runs in that window: before the fix the abort event had fired before anyone listened, and
      // the hanging test ran on until its timeout (here 600 s: mocha's bound would end the test first).
      const ac = new AbortController();
      const r = await run('tests/hang.py::test_hang', { signal: ac.signal, timeoutSecs: 600, onSpawn: () => ac.abort() });
      expect(r.outcome).to.deep.include({ result: 'error', failure_reason: 'Stopped: the job was stopped' });
      expect(isAlive(r.pid as number)).to.equal(false);
    });

    it('a signal already aborted: nothing is started, the run is an error and its files are written', async () => {
      const ac = new AbortController();
      ac.abort();
      const r = await run('tests/basic.py::test_pass', { signal: ac.signal });
      expect(r.outcome).to.deep.equal({ result: 'error', failure_reason: 'Stopped: the job was stopped', traceback: null, exit_status: null });
      expect(r.pid).to.equal(undefined);
      expect(await r.file('stdout.log')).to.equal('');
      expect(await r.file('test-name')).to.equal('tests/basic.py::test_pass\n');
    });

    it('leaves no temporary files behind', async () => {
      const leftovers = (await readdir(data)).filter((n) => n.startsWith('farmhand-run-'));
      expect(leftovers).to.deep.equal([]);
      expect(existsSync(path.join(checkoutDir, 'tests', '__pycache__'))).to.equal(false);
    });
  });
});
