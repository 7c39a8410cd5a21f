/**
 * Test runs as child processes: `python -m farmhand.run <test case>` in its
 * own process group, with the result folder as working directory. The
 * runner logs the child's output, enforces the timeout, ends the whole group
 * on stop, and writes the run's metadata files; it resolves only when the
 * process group is gone and every file is written.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { classifyOutcome, infrastructureReason } from '../core/infrastructure.js';
import type { RunOutcome } from '../core/model.js';
import type { Logger, TestRunner, TestRunSpec } from '../core/ports.js';
import { writeFileAtomic } from '../storage/atomic.js';
import { HeldRunDir } from '../storage/runDir.js';
import { projectRoot } from '../version.js';
import { exitStatusOf } from './exec.js';
import { decideOutcome, readReport, STOPPED_REASON, timeoutReason, type ProcessEnd } from './outcome.js';
import { groupAlive, killEscapedProcesses, processStartTicks, terminateGroup } from './processGroup.js';
import { RunLogs } from './runLogs.js';
import { asTestUser, giveToTest, prepareRun, reclaimResultDir, sweepAfterRun, type TestUser } from './testUser.js';

export interface ProcessTestRunnerOptions {
  /** The interpreter; default `/usr/bin/python3`. */
  python?: string;
  /** The folder holding the `farmhand` Python package; default the project's `python/`. */
  pythonPath?: string;
  /** Between SIGTERM and SIGKILL. */
  killGraceSecs: number;
  /** Cap on stdout+stderr of one run. */
  maxOutputBytes: number;
  /** farmhand's version, written to `farmhand-version.log`. */
  version: string;
  logger?: Logger;
  /** Where the per-run config and report files go (never the result folder); default os.tmpdir(). */
  tmpDir?: string;
  /** Run tests as this user (`runner.run_tests_as`, src/runner/testUser.ts); default the daemon's own. */
  testUser?: TestUser;
  /** The node's id, as FARMHAND_NODE_ID: `stbt.get_config` reads `config/test-farm/<node_id>.conf` over the pack's stbt.conf. */
  nodeId?: string;
}

/** The longest delay setTimeout accepts (about 24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** After the group is gone, how long to wait for pipes held open by a process that left the group. */
const PIPE_CLOSE_MS = 2000;

export class ProcessTestRunner implements TestRunner {
  private readonly python: string;
  private readonly pythonPath: string;

  constructor(private readonly o: ProcessTestRunnerOptions) {
    this.python = o.python ?? '/usr/bin/python3';
    this.pythonPath = o.pythonPath ?? path.join(projectRoot, 'python');
  }

  async run(spec: TestRunSpec, signal: AbortSignal): Promise<RunOutcome> {
    const work = await mkdtemp(path.join(this.o.tmpDir ?? tmpdir(), 'farmhand-run-'));
    const logs = new RunLogs(spec.resultDir, this.o.maxOutputBytes);
    spec.control?.onEvent?.((text) => logs.event(text));
    let outcome: RunOutcome;
    let seconds = 0;
    let held: HeldRunDir | undefined;
    // Written before the run (readers of a run in progress want them) and again when it is sealed (the test may have replaced them).
    const identity = {
      'test-name': spec.testCase,
      'test-args': '',
      'git-commit': spec.testPackSha,
      'farmhand-version.log': this.o.version,
    };
    try {
      // Before the test starts: the folder as it is now is the run's, whatever the test does to the name.
      held = await HeldRunDir.hold(spec.resultDir);
      if (this.o.testUser) await prepareRun({ resultDir: spec.resultDir, work, checkoutDir: spec.checkoutDir }, this.o.testUser);
      await this.writeFiles(spec.resultDir, identity);
      logs.tool(`Running ${spec.testCase} at ${spec.testPackSha}${this.o.testUser ? ` as user ${this.o.testUser.name}` : ''}`);
      const started = process.hrtime.bigint();
      const end: ProcessEnd = signal.aborted ? { exitStatus: null, endedBy: 'stop' } : await this.execute(spec, signal, logs, work, held.realPath);
      seconds = Number(process.hrtime.bigint() - started) / 1e9;
      logs.endOfOutput();
      outcome = decideOutcome(end, await readReport(path.join(work, 'report.json')), spec.timeoutSecs, this.python);
      const faults = spec.faults?.() ?? [];
      for (const f of faults) logs.tool(`Infrastructure fault during the run: ${f.kind}: ${f.detail}`);
      outcome = classifyOutcome(outcome, faults);
      const reason = outcome.failure_reason ? `: ${outcome.failure_reason}` : '';
      logs.tool(`Finished ${spec.testCase}: ${outcome.result}${reason} (exit status ${String(outcome.exit_status)}, ${seconds.toFixed(3)} s)`);
    } catch (e) {
      // The result folder could not be written (disk full, folder gone): the node's error, not a crash of the job.
      const kind = (e as NodeJS.ErrnoException).code === 'ENOSPC' ? 'disk_full' : 'runner_timeout';
      // Whatever of the test may have started: ended, and its files given back (never throws).
      if (this.o.testUser) await this.sweep(this.o.testUser, spec.resultDir, work, logs);
      outcome = { result: 'error', failure_reason: infrastructureReason(kind, `could not run the test: ${(e as Error).message}`), traceback: null, exit_status: null };
      this.o.logger?.error({ err: e, dir: spec.resultDir }, 'test run failed to start or to write its files');
    }
    // Every process of the test is gone: before anything more is written into the folder by name (here and by
    // the job: screenshot, video, result.json), the name must lead to the run's own folder (src/storage/runDir.ts).
    const putRight = await held?.reclaim().catch((e: unknown) => {
      this.o.logger?.error({ err: e, dir: spec.resultDir }, 'the result folder was replaced and could not be put back');
      return `The result folder was replaced and could not be put back: ${(e as Error).message}`;
    });
    if (putRight) {
      logs.tool(putRight);
      this.o.logger?.warn({ dir: spec.resultDir, what: putRight }, 'the test replaced its result folder');
    }
    spec.control?.onEvent?.(undefined);
    await logs.close().catch((e: unknown) => this.o.logger?.error({ err: e, dir: spec.resultDir }, 'could not write the run logs'));
    await this.writeFiles(spec.resultDir, {
      ...identity,
      duration: seconds.toFixed(3),
      'exit-status': outcome.exit_status === null ? '' : String(outcome.exit_status),
      'failure-reason': outcome.result === 'pass' ? '' : (outcome.failure_reason ?? ''),
    }).catch((e: unknown) => this.o.logger?.error({ err: e, dir: spec.resultDir }, 'could not write the run metadata'));
    if (this.o.testUser) {
      await reclaimResultDir(spec.resultDir).catch((e: unknown) => this.o.logger?.error({ err: e, dir: spec.resultDir }, "could not take the result folder back from the test's user"));
    }
    await rm(work, { recursive: true, force: true }).catch((e: unknown) => this.o.logger?.error({ err: e, dir: work }, 'could not remove the run\'s work folder'));
    return outcome;
  }

  /**
   * After a run as another user: every process of that user killed, its files
   * in the result and work folders given to the daemon's reach (testUser.ts).
   * A failure is logged in the run's log; the run's result stands.
   */
  private async sweep(user: TestUser, resultDir: string, work: string, logs: RunLogs): Promise<void> {
    try {
      const r = await sweepAfterRun(user, this.python, [resultDir, work]);
      for (const e of r.errors) logs.tool(`Could not give a file of the test to the daemon: ${e}`);
    } catch (e) {
      logs.tool(`Could not end the processes of user ${user.name} or take back its files: ${(e as Error).message}`);
      this.o.logger?.error({ err: e, dir: resultDir }, 'after-run sweep of the test user failed');
    }
  }

  /** Spawn the child, pump its output into the logs, and wait until its process group is gone. */
  /** @param cwdRoot the real path of the result folder, taken before the test started (not after: the test may have made it a symlink to anywhere). */
  private async execute(spec: TestRunSpec, signal: AbortSignal, logs: RunLogs, work: string, cwdRoot: string): Promise<ProcessEnd> {
    const started = await this.start(spec, work, logs);
    if ('spawnError' in started) return { exitStatus: null, endedBy: null, spawnError: started.spawnError };
    const { child, pid, exit, closed } = started;
    const since = await processStartTicks(pid);
    this.o.logger?.debug({ pid, test: spec.testCase }, 'test process started');
    try {
      spec.onSpawn?.(pid);
    } catch (e) {
      this.o.logger?.warn({ err: e }, 'onSpawn callback failed');
    }
    let end: ProcessEnd;
    try {
      end = await this.supervise(exit, pid, spec, signal, logs);
    } finally {
      // Whatever ended the run: nothing of it may write into the result folder once the result is sealed.
      const escaped = await killEscapedProcesses(`FARMHAND_REPORT=${path.join(work, 'report.json')}`, { cwdRoot, since });
      if (escaped.length) {
        const shown = escaped.length > 20 ? `${escaped.slice(0, 20).join(', ')} ...` : escaped.join(', ');
        logs.tool(`Killed ${escaped.length} process(es) the test had detached from its process group (pids ${shown})`);
      }
      // As another user: every process of that user (also one the search above cannot see), then its files given back.
      if (this.o.testUser) await this.sweep(this.o.testUser, spec.resultDir, work, logs);
    }
    const timeout = new Promise<boolean>((resolve) => setTimeout(() => resolve(false), PIPE_CLOSE_MS).unref());
    if (!(await Promise.race([closed, timeout]))) {
      logs.tool("A process that left the test's process group still holds its output open; no longer reading it");
      child.stdout?.destroy();
      child.stderr?.destroy();
    }
    return end;
  }

  /**
   * Spawn the child and, in the same tick, listen for its exit, its close and its output: a test that
   * ends at once must not end before anyone listens (its exit would be missed, and Node discards the
   * output of stdio nobody reads when the child exits).
   */
  private async start(
    spec: TestRunSpec,
    work: string,
    logs: RunLogs,
  ): Promise<{ child: ChildProcess; pid: number; exit: Promise<number | null>; closed: Promise<boolean> } | { spawnError: Error }> {
    const configFile = path.join(work, 'config.json');
    await writeFile(configFile, JSON.stringify(spec.config));
    if (this.o.testUser) await giveToTest(configFile, this.o.testUser);
    const argv = [this.python, '-m', 'farmhand.run', spec.testCase];
    const { cmd, args } = this.o.testUser ? asTestUser(this.o.testUser, argv) : { cmd: argv[0]!, args: argv.slice(1) };
    const child = spawn(cmd, args, {
      cwd: spec.resultDir,
      env: this.env(spec, configFile, path.join(work, 'report.json')),
      detached: true, // setsid: the child leads a new process group that we can signal as a whole
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code, sig) => resolve(exitStatusOf(code, sig))));
    const closed = new Promise<boolean>((resolve) => child.once('close', () => resolve(true)));
    this.pump(child, logs);
    const spawnError = await new Promise<Error | undefined>((resolve) => {
      child.once('spawn', () => resolve(undefined));
      child.once('error', resolve);
    });
    if (spawnError || child.pid === undefined) return { spawnError: spawnError ?? new Error('the child has no pid') };
    return { child, pid: child.pid, exit, closed };
  }

  /** Wait for the child's exit, ending its group on timeout or abort, and any leftovers after. */
  private async supervise(exit: Promise<number | null>, pid: number, spec: TestRunSpec, signal: AbortSignal, logs: RunLogs): Promise<ProcessEnd> {
    let exited = false;
    void exit.then(() => (exited = true));
    let endedBy: ProcessEnd['endedBy'] = null;
    let ending: Promise<void> | undefined;
    const end = (why: 'timeout' | 'stop') => {
      if (exited || endedBy) return;
      endedBy = why;
      logs.tool(`${why === 'timeout' ? timeoutReason(spec.timeoutSecs) : STOPPED_REASON}; sending SIGTERM to the test's process group`);
      ending = this.endGroup(pid, () => exited, logs);
    };
    const timer = setTimeout(() => end('timeout'), Math.min(spec.timeoutSecs * 1000, MAX_TIMER_MS));
    const onAbort = () => end('stop');
    signal.addEventListener('abort', onAbort, { once: true });
    // A stop that came while the process was being started (after run() looked, before this listener):
    // an abort event fires once, so a listener added later never hears it.
    if (signal.aborted) onAbort();
    const exitStatus = await exit;
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    if (ending) await ending;
    else if (await groupAlive(pid)) {
      logs.tool('The test left processes running; ending them');
      await this.endGroup(pid, () => true, logs);
    }
    return { exitStatus, endedBy };
  }

  private env(spec: TestRunSpec, configFile: string, reportFile: string): NodeJS.ProcessEnv {
    const pythonPath = [this.pythonPath, spec.checkoutDir, process.env.PYTHONPATH].filter(Boolean).join(path.delimiter);
    return {
      ...process.env,
      ...spec.env,
      PYTHONPATH: pythonPath,
      PYTHONUNBUFFERED: '1',
      // No __pycache__ in the shared checkout or in farmhand's install folder.
      PYTHONDONTWRITEBYTECODE: '1',
      FARMHAND_TEST_PACK_DIR: spec.checkoutDir,
      ...(this.o.nodeId !== undefined && { FARMHAND_NODE_ID: this.o.nodeId }),
      FARMHAND_CONFIG: configFile,
      // Unique per run: it also marks every descendant, so ones that leave the process group are found.
      FARMHAND_REPORT: reportFile,
      // Another user's: a home of its own for the run (the daemon's is not writable to it), its own name.
      ...(this.o.testUser && { HOME: path.dirname(reportFile), USER: this.o.testUser.name, LOGNAME: this.o.testUser.name }),
    };
  }

  /** Child output into the logs; pauses the pipes while the files catch up, so memory stays bounded. */
  private pump(child: ChildProcess, logs: RunLogs): void {
    let paused = false;
    const streams = [child.stdout, child.stderr];
    const feed = (name: 'stdout' | 'stderr') => (chunk: Buffer) => {
      logs.output(name, chunk);
      if (paused || logs.writable) return;
      paused = true;
      streams.forEach((s) => s?.pause());
      void logs.drained().then(() => {
        paused = false;
        streams.forEach((s) => s?.resume());
      });
    };
    child.stdout?.on('data', feed('stdout'));
    child.stderr?.on('data', feed('stderr'));
  }

  private async endGroup(pid: number, leaderExited: () => boolean, logs: RunLogs): Promise<void> {
    const graceMs = this.o.killGraceSecs * 1000;
    const gone = await terminateGroup(pid, {
      graceMs,
      leaderExited,
      onKill: () => logs.tool(`The test's processes were still running ${this.o.killGraceSecs} s after SIGTERM; sending SIGKILL`),
    });
    if (!gone) {
      logs.tool('Some of the test\'s processes survived SIGKILL');
      this.o.logger?.error({ pid }, 'test process group survived SIGKILL');
    }
  }

  /**
   * Through a new temporary file and a rename: the test may have put a FIFO
   * or a symlink under any of these names, and a rename replaces it without
   * opening it (an open of a FIFO would block a libuv thread for ever).
   */
  private async writeFiles(dir: string, files: Record<string, string>): Promise<void> {
    await Promise.all(Object.entries(files).map(([name, text]) => writeFileAtomic(path.join(dir, name), text === '' ? '' : `${text}\n`)));
  }
}
