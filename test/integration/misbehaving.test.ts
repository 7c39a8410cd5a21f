/**
 * Hostile test scripts cannot wedge the node, lose a result or hurt the next
 * run: FIFOs under every name the runner writes or reads, a report that is a
 * FIFO, a test that forks and returns, daemons that detach (with and without
 * the run's environment), a script that ignores SIGTERM, unbounded output on
 * both streams. For each: the job ends (or stop ends it), the outcome and
 * failure_reason are the right ones, run_tests is accepted afterwards, and the
 * daemon still stops.
 */
import { expect } from 'chai';
import { lstatSync, readdirSync, type Stats } from 'node:fs';
import path from 'node:path';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import request from 'supertest';
import { DAEMON_RESTARTED } from '../../src/core/jobs.js';
import { necRemote } from '../fixtures/remotes.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { isAlive } from '../helpers/processes.js';
import { waitFor } from '../helpers/wait.js';
import { kill, startCli, type Cli } from './crash-lib.js';

/** Every name the runner, the store, capture and the video write or read in a result folder. */
const RESULT_NAMES = [
  'duration', 'exit-status', 'failure-reason', 'test-name', 'test-args', 'git-commit', 'farmhand-version.log',
  'stdout.log', 'stderr.log', 'combined.log', 'farmhand.log', 'screenshot.png', 'thumbnail.jpg', 'video.mp4', 'video.json', 'result.json',
];

const py = (...lines: string[]) => `${lines.join('\n')}\n`;
const FILES = {
  'tests/rude.py': py(
    'import os, signal, subprocess, sys, time',
    '',
    `NAMES = ${JSON.stringify(RESULT_NAMES)}`,
    '',
    'def _fifos():',
    '    for name in NAMES:',
    '        try:',
    '            os.unlink(name)',
    '        except FileNotFoundError:',
    '            pass',
    '        os.mkfifo(name)',
    '',
    'def test_fifos():',
    '    _fifos()',
    '',
    'def test_fifos_then_hang():',
    '    _fifos()',
    '    print("fifos made", flush=True)',
    '    while True:',
    '        time.sleep(1000)',
    '',
    'def test_report_fifo():',
    '    # The report path is in the environment: a FIFO there, and no report written.',
    '    os.mkfifo(os.environ["FARMHAND_REPORT"])',
    '    sys.stdout.flush()',
    '    os._exit(0)',
    '',
    'def test_fork_and_return():',
    '    if os.fork() == 0:',
    '        time.sleep(30)  # still running when the parent has returned: farmhand ends it',
    '    # both the parent and (once ended) the child come back here',
    '',
    'def _daemonise(clear_env):',
    '    r, w = os.pipe()',
    '    if os.fork() == 0:',
    '        os.setsid()',
    '        if os.fork() == 0:',
    '            os.close(r)',
    '            os.write(w, str(os.getpid()).encode())',
    '            os.close(w)',
    '            code = "import time\\nn = 0\\nwhile True:\\n    n += 1\\n    open(\'late.txt\', \'w\').write(str(n))\\n    time.sleep(0.01)\\n"',
    '            env = {} if clear_env else dict(os.environ)',
    '            os.execve(sys.executable, [sys.executable, "-c", code], env)',
    '        os._exit(0)',
    '    os.close(w)',
    '    pid = os.read(r, 32).decode()',
    '    with open("daemon-pid.txt", "w") as f:',
    '        f.write(pid)',
    '    while not os.path.exists("late.txt"):',
    '        time.sleep(0.01)',
    '',
    'def test_daemonises():',
    '    _daemonise(clear_env=False)',
    '',
    'def test_daemonises_clean_env():',
    '    _daemonise(clear_env=True)',
    '',
    'def test_ignores_sigterm_and_hangs():',
    '    signal.signal(signal.SIGTERM, signal.SIG_IGN)',
    '    open("sigterm-ignored", "w").close()',
    '    while True:',
    '        time.sleep(1000)',
    '',
    'def test_floods():',
    '    line = "x" * 999 + "\\n"',
    '    for _ in range(8000):',
    '        sys.stdout.write(line)',
    '        sys.stderr.write(line)',
    '        sys.stdout.write("\\n" * 50)',
  ),
};

const CAP = 1024 * 1024;

describe('hostile test scripts', function () {
  this.timeout(90_000);
  let d: TestDaemon | undefined;
  before(async () => {
    d = await startTestDaemon({ files: FILES, config: { capture: { uri: 'none:' }, runner: { max_output_bytes: CAP } } });
  });
  after(() => d?.stop());

  const start = async (testCase: string) => {
    const res = await d!.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [testCase] });
    expect(res.status, res.text).to.equal(200);
    return res.body.job_uid as string;
  };
  const resultOf = async (jobUid: string) =>
    (await d!.http.get(`/api/v1/jobs${jobUid}/results`)).body[0] as { result_id: string; result: string; failure_reason: string | null };
  const runOne = async (testCase: string) => {
    const uid = await start(testCase);
    await waitForJob(d!, uid);
    return resultOf(uid);
  };
  const farmhandLog = async (resultId: string) => (await d!.http.get(`/api/v1/result${resultId}/farmhand.log`)).text;
  /** The node takes a new job: the one before is over for good. */
  const nextRunAccepted = async () => {
    const r = await runOne('tests/rude.py::test_fifos');
    expect(r.result).to.equal('pass');
  };

  it('FIFOs under every metadata, log and artifact name: the job ends, the result is pass, its files are regular files', async () => {
    const r = await runOne('tests/rude.py::test_fifos');
    expect(r.result, JSON.stringify(r)).to.equal('pass');
    expect(r.failure_reason).to.equal(null);
    const listing = (await d!.http.get(`/api/v1/result${r.result_id}/artifacts/`)).body as Record<string, unknown>;
    for (const name of ['duration', 'exit-status', 'failure-reason', 'test-name', 'git-commit']) {
      expect(listing, name).to.have.property(name);
    }
    const exit = await d!.http.get(`/api/v1/result${r.result_id}/artifacts/exit-status`);
    expect(exit.text).to.equal('0\n');
    // The logs the test replaced are put back from what the runner wrote.
    expect(await farmhandLog(r.result_id)).to.match(/Finished tests\/rude.py::test_fifos: pass/);
    await nextRunAccepted();
  });

  it('a FIFO as the report, then os._exit(0): error Crash, not a wedge', async () => {
    const r = await runOne('tests/rude.py::test_report_fifo');
    expect(r.result).to.equal('error');
    expect(r.failure_reason).to.equal('Crash: the test process exited with status 0 without reporting a result');
    await nextRunAccepted();
  });

  it('FIFOs, then a hang: stop ends the job (error Stopped), and the next run_tests is accepted', async () => {
    const uid = await start('tests/rude.py::test_fifos_then_hang');
    // The last name of the list is a FIFO: all of them are.
    await waitFor(inSomeResult(RESULT_NAMES.at(-1)!, (st) => st.isFIFO()), { what: 'the test to make its FIFOs', timeoutMs: 30_000 });
    const stop = await d!.http.post(`/api/v1/jobs${uid}/stop`);
    expect([200, 202]).to.include(stop.status);
    await waitForJob(d!, uid);
    const r = await resultOf(uid);
    expect(r.result).to.equal('error');
    expect(r.failure_reason).to.equal('Stopped: the job was stopped');
    await nextRunAccepted();
  });

  /** Some result folder has a file `name` for which `is` holds (how a test shows it got somewhere). */
  function inSomeResult(name: string, is: (st: Stats) => boolean): () => boolean {
    return () => {
      const root = path.join(d!.dataDir, 'results');
      return readdirSync(root, { recursive: true, encoding: 'utf8' }).some((rel) => {
        if (path.basename(rel) !== name) return false;
        try {
          return is(lstatSync(path.join(root, rel)));
        } catch {
          return false;
        }
      });
    };
  }

  it('a test that forks a child and returns passes, 5 times of 5 (the child does not overwrite the report)', async () => {
    for (let i = 0; i < 5; i++) {
      const r = await runOne('tests/rude.py::test_fork_and_return');
      expect(r.result, `run ${i + 1}: ${JSON.stringify(r)}`).to.equal('pass');
      expect(await farmhandLog(r.result_id)).to.match(/left processes running; ending them/);
    }
  });

  for (const [fn, how] of [
    ['test_daemonises', 'found by the run\'s environment entry'],
    ['test_daemonises_clean_env', 'with a cleared environment, found by its working directory'],
  ] as const) {
    it(`a fully detached daemon (double fork + setsid) is gone before the result is sealed: ${how}`, async () => {
      const r = await runOne(`tests/rude.py::${fn}`);
      expect(r.result, JSON.stringify(r)).to.equal('pass');
      const pidFile = await d!.http.get(`/api/v1/result${r.result_id}/artifacts/daemon-pid.txt`);
      expect(pidFile.status, JSON.stringify(r)).to.equal(200);
      const pid = Number(pidFile.text);
      expect(pid).to.be.greaterThan(1);
      expect(isAlive(pid), `pid ${pid} still running`).to.equal(false);
      expect(await farmhandLog(r.result_id)).to.match(/detached from its process group/);
      await nextRunAccepted();
    });
  }

  it('a test that ignores SIGTERM and hangs: stop ends it with SIGKILL (error Stopped)', async () => {
    const uid = await start('tests/rude.py::test_ignores_sigterm_and_hangs');
    await waitFor(inSomeResult('sigterm-ignored', (st) => st.isFile()), { what: 'the test to start ignoring SIGTERM', timeoutMs: 30_000 });
    await d!.http.post(`/api/v1/jobs${uid}/stop`);
    await waitForJob(d!, uid);
    const r = await resultOf(uid);
    expect(r.result).to.equal('error');
    expect(r.failure_reason).to.equal('Stopped: the job was stopped');
    expect(await farmhandLog(r.result_id)).to.match(/sending SIGKILL/);
  });

  it('unbounded output on stdout and stderr: all log files together stay within the cap, and the logs say so', async () => {
    const r = await runOne('tests/rude.py::test_floods');
    expect(r.result).to.equal('pass');
    const listing = (await d!.http.get(`/api/v1/result${r.result_id}/artifacts/`)).body as Record<string, { size: number }>;
    const logs = Object.entries(listing).filter(([name]) => name.endsWith('.log'));
    const total = logs.reduce((n, [, f]) => n + f.size, 0);
    expect(total, JSON.stringify(logs)).to.be.at.most(CAP + 16 * 1024);
    const log = await farmhandLog(r.result_id);
    expect(log).to.match(/reached the 1048576-byte cap on the run's logs; the rest is dropped/);
    expect(log).to.match(/bytes of output were dropped/);
  });

  it('after all of that the daemon stops (as on SIGTERM)', async () => {
    const daemon = d!;
    d = undefined;
    await daemon.stop();
  });
});

describe('hostile test scripts: the run log of what the test did', function () {
  this.timeout(90_000);
  let d: TestDaemon | undefined;
  const LOG_CAP = 256 * 1024;
  before(async () => {
    d = await startTestDaemon({
      files: {
        'config/stbt.conf': '[test_pack]\ndefault_remote_control = box\n',
        'config/remote-control/box.lircd.conf': necRemote('box', 0x7a85, { KEY_OK: 0x08f7, KEY_UP: 0x8877 }),
        'tests/loud.py': py(
          'import farmhand',
          'from farmhand import control',
          '',
          'def test_presses_then_floods_the_log():',
          '    farmhand.press("KEY_OK")',
          '    print("pressed", flush=True)',
          '    for i in range(20000):',
          '        control.log_event("match fake.png: matched (confidence 1.000) %d" % i)',
        ),
      },
      config: { capture: { uri: 'none:' }, ir: { uri: 'virtual:' }, runner: { max_output_bytes: LOG_CAP } },
    });
  });
  after(() => d?.stop());

  it('key presses reach the job\'s farmhand.log (key, remote, transport); a flood of log lines stays within the cap', async () => {
    const res = await d!.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/loud.py::test_presses_then_floods_the_log'] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d!, res.body.job_uid as string);
    const [r] = (await d!.http.get(`/api/v1/jobs${res.body.job_uid as string}/results`)).body as Array<{ result_id: string; result: string; failure_reason: string | null }>;
    expect(r!.result, r!.failure_reason ?? '').to.equal('pass');
    const log = (await d!.http.get(`/api/v1/result${r!.result_id}/farmhand.log`)).text;
    const texts = log.split('\n').map((l) => l.slice(l.indexOf(' ') + 1));
    expect(texts.indexOf('press KEY_OK remote=box transport=virtual:')).to.be.within(0, texts.indexOf('pressed'));
    expect(texts).to.include('match fake.png: matched (confidence 1.000) 0');
    expect(texts.some((t) => /reached the 262144-byte cap on the run's logs/.test(t))).to.equal(true);
    const listing = (await d!.http.get(`/api/v1/result${r!.result_id}/artifacts/`)).body as Record<string, { size: number }>;
    const total = Object.entries(listing).filter(([n]) => n.endsWith('.log')).reduce((n, [, f]) => n + f.size, 0);
    expect(total).to.be.at.most(LOG_CAP + 16 * 1024);
  });
});

describe('hostile test scripts against the real `farmhand serve` process', function () {
  this.timeout(120_000);
  let pack: TestPackRepo;
  let root: string;
  let cli: Cli | undefined;
  before(async () => {
    pack = await makeTestPack(FILES);
    root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-hostile-'));
    const cfg = { node_id: 'hostile', listen: '127.0.0.1:0', data_dir: path.join(root, 'data'), test_pack: { url: pack.dir }, capture: { uri: 'none:' }, log_level: 'warn', runner: { kill_grace_secs: 1, run_tests_as: false } };
    await writeFile(path.join(root, 'farmhand.json'), JSON.stringify(cfg));
  });
  after(async () => {
    if (cli) await kill(cli);
    await pack.cleanup();
    await rm(root, { recursive: true, force: true });
  });

  const http = () => request(cli!.url);
  const fifosIn = (dataDir: string) => () => {
    const top = path.join(dataDir, 'results');
    return readdirSync(top, { recursive: true, encoding: 'utf8' }).some((rel) => {
      try {
        return path.basename(rel) === RESULT_NAMES.at(-1) && lstatSync(path.join(top, rel)).isFIFO();
      } catch {
        return false;
      }
    });
  };
  const startFifoHang = async () => {
    const res = await http().post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/rude.py::test_fifos_then_hang'] });
    expect(res.status, res.text).to.equal(200);
    await waitFor(fifosIn(path.join(root, 'data')), { what: 'the FIFOs', timeoutMs: 30_000 });
    return res.body.job_uid as string;
  };
  const resultOf = async (uid: string) => (await http().get(`/api/v1/jobs${uid}/results`)).body as Array<{ result: string; failure_reason: string }>;

  it('SIGTERM while the test sits among its FIFOs: the daemon exits; after a SIGKILL there, the next start recovers the run', async () => {
    cli = await startCli(path.join(root, 'farmhand.json'));
    const stopped = await startFifoHang();
    const exited = new Promise<number | null>((r) => cli!.child.once('exit', (code) => r(code)));
    cli.child.kill('SIGTERM');
    expect(await exited).to.equal(0);

    cli = await startCli(path.join(root, 'farmhand.json'));
    const [first] = await resultOf(stopped);
    expect(first?.result).to.equal('error');
    const killed = await startFifoHang();
    await kill(cli);
    // Recovery reads the in-flight run's files (test-name is a FIFO now): it must not block the start.
    cli = await startCli(path.join(root, 'farmhand.json'));
    const [second] = await resultOf(killed);
    expect(second).to.include({ result: 'error', failure_reason: DAEMON_RESTARTED });
    const next = await http().post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/rude.py::test_fifos'] });
    expect(next.status, next.text).to.equal(200);
    const exitedAgain = new Promise<number | null>((r) => cli!.child.once('exit', (code) => r(code)));
    cli.child.kill('SIGTERM');
    expect(await exitedAgain).to.equal(0);
    cli = undefined;
  });
});
