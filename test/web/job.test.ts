import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { expectError } from '../helpers/errors.js';
import type { Browser } from 'playwright-core';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { waitForRunOutput } from '../helpers/runs.js';

const WAIT = { timeout: 30_000 };

describe('portal: the job page', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let browser: Browser;
  let alice: Awaited<ReturnType<typeof asUser>>;
  let tmp: string;
  let go: string;

  before(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'farmhand-jobpage-'));
    go = path.join(tmp, 'go');
    // A test that prints a line, waits for the test to let it go on, prints another, then hangs until stopped.
    const live = [
      'import os, time',
      '',
      'def test_live():',
      '    print("first line from the test")',
      `    while not os.path.exists(${JSON.stringify(go)}):`,
      '        time.sleep(0.05)',
      '    print("second line from the test")',
      '    while True:',
      '        time.sleep(1000)',
      '',
    ].join('\n');
    d = await startTestDaemon({ files: { ...STANDARD_FILES, 'tests/live.py': live } });
    browser = await launchBrowser();
    alice = await asUser(d, 'alice');
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
    await rm(tmp, { recursive: true, force: true });
  });

  it('shows the counts, the running test and its log growing, and Stop ends the job', async () => {
    const res = await alice
      .post('/api/v2/run_tests')
      .send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/live.py::test_live'] });
    expect(res.status, res.text).to.equal(200);
    const uid = res.body.job_uid as string;
    try {
      await followAndStop(uid);
    } finally {
      await alice.post(`/api/v2/jobs${uid}/stop`);
      await waitForJob(d, uid);
    }
  });

  async function followAndStop(uid: string): Promise<void> {
    const resultId = await waitForRunOutput(d, uid, 'first line from the test');

    const ctx = await browser.newContext({ extraHTTPHeaders: { Authorization: `token ${alice.token}` } });
    const page = await ctx.newPage();
    await page.goto(`${d.url}/app/jobs${uid}`);
    await page.waitForSelector('#job[data-live="on"]', WAIT);

    const job = (await alice.get(`/api/v2/jobs${uid}`)).body as { result_counts: Record<string, number> };
    // total: the planned runs of a run-once job.
    expect(job.result_counts).to.deep.equal({ pass: 1, fail: 1, error: 0, total: 3 });
    for (const [k, n] of Object.entries(job.result_counts)) expect(await page.locator(`#count-${k}`).innerText(), k).to.equal(String(n));
    expect(await page.locator('#job-status').innerText()).to.equal('running');
    expect(await page.locator('#running-test').innerText()).to.equal('tests/live.py::test_live');
    expect(await page.locator('#running-test').getAttribute('href')).to.equal(`/app/results${resultId}`);
    expect(await page.locator('#log-tail').innerText()).to.contain('first line from the test');
    expect(await page.locator('#job-results tbody tr').count()).to.equal(2);

    // The tail follows the log without a reload.
    await writeFile(go, '');
    await page.waitForFunction(() => document.getElementById('log-tail')?.textContent?.includes('second line from the test'), undefined, WAIT);

    await page.locator('#stop-job').click();
    await page.waitForFunction(() => document.getElementById('job-status')?.textContent === 'exited', undefined, WAIT);
    const ended = await waitForJob(d, uid);
    expect(ended.status).to.equal('exited');
    const counts = ended.result_counts as Record<string, number>;
    for (const [k, n] of Object.entries(counts)) {
      await page.waitForFunction(([id, v]) => document.getElementById(id!)?.textContent === v, [`count-${k}`, String(n)], WAIT);
    }
    expect(counts.total).to.equal(3);
    await page.waitForFunction(() => document.querySelectorAll('#job-results tbody tr').length === 3, undefined, WAIT);
    expect(await page.locator('#job-actions').isHidden()).to.equal(true);
    await ctx.close();
  }

  it('a signed-out person reads the page and is asked to sign in to stop', async () => {
    const res = await alice.post('/api/v2/run_tests').send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] });
    const uid = res.body.job_uid as string;
    await waitForRunOutput(d, uid, 'about to hang');
    const page = await browser.newPage();
    await page.goto(`${d.url}/app/jobs${uid}`);
    expect(await page.locator('#stop-job').count()).to.equal(0);
    expect(await page.locator('#sign-in-to-stop').innerText()).to.equal('Sign in to stop');
    expect(await page.locator('#log-tail').innerText()).to.contain('about to hang');
    await page.close();
    const stop = await alice.post(`/api/v2/jobs${uid}/stop`);
    expect(stop.status).to.be.oneOf([200, 202]);
    await waitForJob(d, uid);
    // The contract check sees the page too, running and ended.
    const html = await d.http.get(`/app/jobs${uid}`);
    expect(html.status).to.equal(200);
    expect(html.text).to.contain('Nothing: the job has ended.');
  });

  it('an unknown job is a 404 page to a browser, the JSON not_found to other clients', async () => {
    const res = await d.http.get('/app/jobs/farmhand-test/abc/999').set('Accept', 'text/html,application/xhtml+xml,*/*;q=0.8');
    expect(res.status).to.equal(404);
    expect(res.type).to.equal('text/html');
    expect(res.text).to.contain('No such job');
    expectError(await d.http.get('/app/jobs/farmhand-test/abc/999'), 404, 'not_found');
  });

  it('the running log answers a Range from where the reader is', async () => {
    const res = await alice.post('/api/v2/run_tests').send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] });
    const uid = res.body.job_uid as string;
    const id = await waitForRunOutput(d, uid, 'about to hang');
    const whole = await d.http.get(`/api/v1/result${id}/farmhand.log`);
    expect(whole.status).to.equal(200);
    const size = Buffer.byteLength(whole.text);
    const part = await d.http.get(`/api/v1/result${id}/farmhand.log`).set('Range', `bytes=${size - 5}-`);
    expect(part.status).to.equal(206);
    expect(part.headers['content-range']).to.match(new RegExp(`^bytes ${size - 5}-${size - 1}/\\d+$`));
    const none = await d.http.get(`/api/v1/result${id}/farmhand.log`).set('Range', `bytes=${size + 1000}-`);
    expect(none.status).to.equal(416);
    await alice.post(`/api/v2/jobs${uid}/stop`);
    await waitForJob(d, uid);
  });
});
