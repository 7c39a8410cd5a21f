/**
 * Security: a test cannot make the daemon write through, or serve from, a
 * result folder it swapped for a symlink, and a hard link to a file outside
 * (a canary the test's user can read) is never served nor listed. Real
 * daemon, real python test scripts, over HTTP.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { link, mkdir, readFile, readlink, mkdtemp, readdir, rename, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { asUser } from '../helpers/auth.js';
import { waitForRunOutput } from '../helpers/runs.js';
import { waitFor } from '../helpers/wait.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';

const CANARY = 'CANARY-5e1f0c-linked-never-serve-me';

describe('security: symlinked and hard-linked result files', function () {
  this.timeout(120_000);
  let outside: string;
  let canaryFile: string;
  let d: TestDaemon;
  let user: Awaited<ReturnType<typeof asUser>>;

  /** Run one test case; its result id. */
  async function run(testCase: string): Promise<string> {
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [testCase] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid as string);
    const results = (await d.http.get(`/api/v1/jobs${res.body.job_uid as string}/results`)).body as Array<{ result_id: string }>;
    expect(results).to.have.length(1);
    return results[0]!.result_id;
  }

  /** Fetch every way a result's files are read; none may answer 500 or carry the canary. */
  async function readAll(resultId: string, names: string[]): Promise<Record<string, number>> {
    const statuses: Record<string, number> = {};
    const paths = [
      `/api/v1/result${resultId}/artifacts/`, `/api/v2/results${resultId}/artifacts`, `/api/v2/results${resultId}`,
      `/api/v1/result${resultId}/farmhand.log`, `/api/v2/results${resultId}/stbt.log?tz=Europe/London`,
      ...names.flatMap((n) => [`/api/v1/result${resultId}/artifacts/${n}`, `/api/v2/results${resultId}/artifacts/${n}`]),
    ];
    for (const p of paths) {
      const res = await fetch(d.url + p, { headers: { Authorization: `token ${user.token}` } });
      const body = Buffer.from(await res.arrayBuffer()).toString('latin1');
      statuses[p] = res.status;
      expect(res.status, p).to.be.lessThan(500);
      expect(body.includes(CANARY), `canary served by ${p}`).to.equal(false);
    }
    return statuses;
  }

  before(async () => {
    outside = await mkdtemp(path.join(os.tmpdir(), 'farmhand-outside-'));
    canaryFile = path.join(outside, 'canary.txt');
    await writeFile(canaryFile, CANARY);
    const py = (body: string) => `import os\nOUTSIDE = ${JSON.stringify(outside)}\n\n${body}`;
    d = await startTestDaemon({
      config: { capture: { uri: 'none:' } },
      files: {
        'tests/swap.py': py(
          [
            'def test_swap_folder():',
            '    here = os.getcwd()',
            '    with open("mine.txt", "w") as f:',
            '        f.write("written by the test in its own folder\\n")',
            '    os.rename(here, here + ".moved")',
            '    os.symlink(OUTSIDE, here)',
            '    print("swapped")',
            '',
          ].join('\n'),
        ),
        'tests/livelog.py': py(
          [
            'import time',
            'SIG = os.path.join(OUTSIDE + "-signals")',
            '',
            'def wait_for(name):',
            '    while not os.path.exists(os.path.join(SIG, name)):',
            '        time.sleep(0.05)',
            '',
            'def test_live_log_link():',
            '    os.link(os.path.join(OUTSIDE, "canary.txt"), "tmp-link")',
            '    os.rename("tmp-link", "farmhand.log")',
            '    print("linked", flush=True)',
            '    wait_for("swap")',
            '    here = os.getcwd()',
            '    os.rename(here, here + ".moved")',
            '    os.symlink(OUTSIDE + "-other", here)',
            '    open(os.path.join(SIG, "swapped"), "w").close()',
            '    wait_for("done")',
            '',
          ].join('\n'),
        ),
        'tests/bystander.py': py(
          [
            'import time',
            'SIG = OUTSIDE + "-signals"',
            '',
            'def test_swap_to_bystander():',
            '    print("started", flush=True)',
            '    while not os.path.exists(os.path.join(SIG, "go")):',
            '        time.sleep(0.05)',
            '    here = os.getcwd()',
            '    os.rename(here, here + ".moved")',
            '    os.symlink(OUTSIDE + "-bystander", here)',
            '',
          ].join('\n'),
        ),
        'tests/hardlink.py': py(
          [
            'def test_hard_link():',
            '    os.link(os.path.join(OUTSIDE, "canary.txt"), "leak.txt")',
            '    os.makedirs("sub", exist_ok=True)',
            '    os.link(os.path.join(OUTSIDE, "canary.txt"), "sub/leak.html")',
            '    with open("fine.txt", "w") as f:',
            '        f.write("fine\\n")',
            '',
          ].join('\n'),
        ),
      },
    });
    user = await asUser(d, 'alice');
  });
  after(async () => {
    await d?.stop();
    await rm(outside, { recursive: true, force: true });
  });

  it('a test that swaps its result folder for a symlink gets nothing written into the target, and its own folder back', async () => {
    const id = await run('tests/swap.py::test_swap_folder');
    // The daemon wrote nothing through the link: the outside folder holds only what it held.
    expect((await readdir(outside)).sort()).to.deep.equal(['canary.txt']);
    const listing = (await user.get(`/api/v2/results${id}/artifacts`)).body as Record<string, unknown>;
    expect(listing, 'the outside file is not listed').to.not.have.property('canary.txt');
    // The run's own folder was put back, with what the test and the daemon wrote there.
    expect(listing).to.include.keys('mine.txt', 'farmhand.log', 'duration', 'test-name');
    const log = await d.http.get(`/api/v1/result${id}/farmhand.log`);
    expect(log.text).to.match(/replaced its result folder/);
    const st = await readAll(id, ['canary.txt']);
    expect(st[`/api/v2/results${id}/artifacts/canary.txt`]).to.equal(404);
    expect(st[`/api/v1/result${id}/artifacts/canary.txt`]).to.equal(404);
  });

  it('a finished result whose folder is later swapped for a symlink (by another test) serves and lists nothing from the target', async () => {
    const id = await run('tests/hardlink.py::test_hard_link');
    const [, , hex, num, stamp] = id.split('/') as [string, string, string, string, string];
    const dir = path.join(d.dataDir, 'results', hex, num, stamp);
    const before = (await user.get(`/api/v2/results${id}/artifacts`)).body as Record<string, unknown>;
    expect(before).to.include.keys('fine.txt');
    await rename(dir, `${dir}.away`);
    await symlink(outside, dir);
    try {
      const listing = (await user.get(`/api/v2/results${id}/artifacts`)).body as Record<string, unknown>;
      expect(listing, 'nothing is listed from the target').to.deep.equal({});
      const st = await readAll(id, ['canary.txt', 'fine.txt']);
      expect(st[`/api/v2/results${id}/artifacts/canary.txt`]).to.equal(404);
    } finally {
      await rm(dir);
      await rename(`${dir}.away`, dir);
    }
    // The same with a folder above it swapped: the job's folder.
    const job = path.dirname(dir);
    const fake = path.join(outside, 'fakejob');
    await mkdir(path.join(fake, stamp), { recursive: true });
    await link(canaryFile, path.join(fake, stamp, 'canary-copy.txt')).catch(() => undefined);
    await writeFile(path.join(fake, stamp, 'own.txt'), CANARY);
    await rename(job, `${job}.away`);
    await symlink(fake, job);
    try {
      expect((await user.get(`/api/v2/results${id}/artifacts`)).body).to.deep.equal({});
      const st = await readAll(id, ['own.txt']);
      expect(st[`/api/v2/results${id}/artifacts/own.txt`]).to.equal(404);
    } finally {
      await rm(job);
      await rename(`${job}.away`, job);
      await rm(fake, { recursive: true, force: true });
    }
  });

  it('the live log of a run in progress is served neither through a hard link nor from a swapped folder', async () => {
    const [signals, other] = [`${outside}-signals`, `${outside}-other`];
    await mkdir(signals);
    await mkdir(other);
    await writeFile(path.join(other, 'farmhand.log'), CANARY);
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/livelog.py::test_live_log_link'] });
    expect(res.status, res.text).to.equal(200);
    const uid = res.body.job_uid as string;
    const readLive = async (id: string, what: string) => {
      for (const p of [`/api/v1/result${id}/farmhand.log`, `/api/v1/result${id}/stbt.log`, `/api/v2/results${id}/stbt.log`]) {
        const r = await fetch(d.url + p, { headers: { Authorization: `token ${user.token}` } });
        const body = await r.text();
        expect(body.includes(CANARY), `canary served by ${p} (${what})`).to.equal(false);
        expect(r.status, `${p} (${what})`).to.equal(404);
      }
    };
    try {
      // The test put a hard link to the canary under its log's name.
      const id = await waitForRunOutput(d, uid, 'linked');
      await readLive(id, 'a hard link');
      // Then it swaps its folder for a link to a folder whose farmhand.log is the canary.
      await writeFile(path.join(signals, 'swap'), '');
      await waitFor(() => existsSync(path.join(signals, 'swapped')), 'the test to swap its folder');
      await readLive(id, 'a swapped folder');
    } finally {
      await writeFile(path.join(signals, 'done'), '');
    }
    await waitForJob(d, uid);
    expect(await readdir(other), 'nothing written into the swapped-in folder').to.deep.equal(['farmhand.log']);
    await rm(signals, { recursive: true });
    await rm(other, { recursive: true });
  });

  it('a swapped folder does not turn the search for escaped processes on a bystander working in the target', async () => {
    const [signals, target] = [`${outside}-signals`, `${outside}-bystander`];
    await mkdir(signals);
    await mkdir(target);
    const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/bystander.py::test_swap_to_bystander'] });
    expect(res.status, res.text).to.equal(200);
    const uid = res.body.job_uid as string;
    await waitForRunOutput(d, uid, 'started');
    // Started after the run began, working in the folder the test will link its result folder to: not the test's.
    const bystander = spawn('sleep', ['600'], { cwd: target, stdio: 'ignore' });
    try {
      await waitFor(async () => (await readlink(`/proc/${bystander.pid}/cwd`).catch(() => '')) === target, 'the bystander to be in its folder');
      await writeFile(path.join(signals, 'go'), '');
      await waitForJob(d, uid);
      const state = (await readFile(`/proc/${bystander.pid}/stat`, 'utf8').catch(() => '')).replace(/^.*\) /s, '')[0];
      expect(state, 'the bystander\'s state (Z or gone: killed by the daemon)').to.be.oneOf(['S', 'R', 'D']);
    } finally {
      bystander.kill('SIGKILL');
      await rm(signals, { recursive: true });
      await rm(target, { recursive: true });
    }
  });

  it('a hard link to an outside file is neither listed nor served (404, not 500), while the test`s own files are', async () => {
    const id = await run('tests/hardlink.py::test_hard_link');
    const listing = (await user.get(`/api/v2/results${id}/artifacts`)).body as Record<string, unknown>;
    expect(listing).to.include.keys('fine.txt');
    expect(listing).to.not.have.any.keys('leak.txt', 'sub/leak.html');
    const st = await readAll(id, ['leak.txt', 'sub/leak.html', 'fine.txt']);
    for (const n of ['leak.txt', 'sub/leak.html']) {
      expect(st[`/api/v1/result${id}/artifacts/${n}`], n).to.equal(404);
      expect(st[`/api/v2/results${id}/artifacts/${n}`], n).to.equal(404);
    }
    expect(st[`/api/v2/results${id}/artifacts/fine.txt`]).to.equal(200);
  });
});
