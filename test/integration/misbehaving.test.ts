/**
 * Test scripts that misbehave cannot hurt the daemon or the next run:
 * daemonised descendants that left the process group are killed, a child
 * that ignores SIGTERM is killed, unbounded output is capped.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';

const gone = (pid: number) => {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  return /^\d+ \(.*\) [ZX]/.test(readFileSync(`/proc/${pid}/stat`, 'utf8'));
};

const FILES = {
  'tests/rude.py': [
    'import os, subprocess, sys, time',
    '',
    'def test_daemonises():',
    '    # setsid: the grandchild leaves the test\'s process group, as a daemon would.',
    '    p = subprocess.Popen(["setsid", "sleep", "1000"])',
    '    time.sleep(0.3)',
    '    with open("daemon-pid.txt", "w") as f:',
    '        f.write(str(p.pid))',
    '',
    'def test_floods():',
    '    line = "x" * 1000 + "\\n"',
    '    for _ in range(200000):',
    '        sys.stdout.write(line)',
    '',
  ].join('\n'),
};

describe('misbehaving test scripts', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  before(async () => {
    d = await startTestDaemon({ files: FILES, config: { capture: { uri: 'none:' }, runner: { max_output_bytes: 1024 * 1024 } } });
  });
  after(() => d?.stop());

  const runOne = async (testCase: string) => {
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [testCase] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid);
    return (await d.http.get(`/api/v1/jobs${res.body.job_uid}/results`)).body[0] as { result_id: string; result: string };
  };

  it('a daemonised descendant that left the process group is killed when the run ends', async () => {
    const r = await runOne('tests/rude.py::test_daemonises');
    const pidFile = await d.http.get(`/api/v1/result${r.result_id}/artifacts/daemon-pid.txt`);
    expect(pidFile.status, JSON.stringify(r)).to.equal(200);
    const pid = Number(pidFile.text);
    expect(pid).to.be.greaterThan(1);
    expect(gone(pid)).to.equal(true);
    const log = (await d.http.get(`/api/v1/result${r.result_id}/farmhand.log`)).text;
    expect(log).to.match(/detached from its process group/);
  });

  it('unbounded output is capped at max_output_bytes and the logs say so', async () => {
    const r = await runOne('tests/rude.py::test_floods');
    const listing = (await d.http.get(`/api/v1/result${r.result_id}/artifacts/`)).body as Record<string, { size: number }>;
    expect(listing['stdout.log']!.size).to.be.at.most(1024 * 1024 + 64 * 1024);
    const log = (await d.http.get(`/api/v1/result${r.result_id}/farmhand.log`)).text;
    expect(log).to.match(/dropp|cap|limit/i);
  });
});
