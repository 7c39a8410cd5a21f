/**
 * Artifacts never run in farmhand's origin (docs/results-formats.md,
 * "Artifacts in a browser"): a signed-in person opens a test's HTML report
 * (an inline script, an `<img onerror>`) and SVG (a script) in real Chromium,
 * on a node and on the portal (its copy uploaded by the node); each script
 * tries to read the CSRF token, reserve the node as her and start a job. None
 * runs: no request leaves the document, the node stays unreserved, no job
 * starts, the document is not marked; the report's text, inline style and
 * its picture from the same result are shown.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { HOSTILE_CASE, HOSTILE_TEST } from '../fixtures/hostileArtifactPack.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { waitFor } from '../helpers/wait.js';

const WAIT = { timeout: 30_000 };
const BLOCKED = /Blocked script execution|Refused to execute/;

/** Where the person reads the artifacts, and how the test looks at the node's reservation. */
interface Site {
  /** Where the person signs in and opens the artifacts. */
  url: string;
  token: string;
  resultId: string;
  /** The reservation of the result's node, as the site reports it (null: none). */
  reservation(): Promise<unknown>;
}

/** Run the hostile test case on a node through its own v1; the job and result ids. */
async function runOn(d: TestDaemon): Promise<{ job: string; id: string }> {
  const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [HOSTILE_CASE] });
  expect(res.status, res.text).to.equal(200);
  const job = res.body.job_uid as string;
  await waitForJob(d, job);
  return { job, id: ((await d.http.get(`/api/v1/jobs${job}/results`)).body as Array<{ result_id: string }>)[0]!.result_id };
}

/** The browser cases, the same on a node and on the portal. */
function sandboxCases(site: () => Site, browser: () => Browser): void {
  let ctx: BrowserContext;
  before(async () => {
    const s = site();
    ctx = await browser().newContext();
    // Signed in through the form: a real session cookie, and the CSRF token in every page.
    const page = await ctx.newPage();
    await page.goto(`${s.url}/app/sign-in?next=%2F`);
    await page.getByLabel('Access token').fill(s.token);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${s.url}/`, WAIT);
    expect(await page.locator('meta[name="csrf-token"]').getAttribute('content')).to.match(/^[A-Za-z0-9_-]{16,}$/);
    await page.close();
  });
  after(async () => {
    await ctx?.close();
  });

  /**
   * Open an artifact in a new tab of the signed-in person; resolves once each of its `scripts` attack scripts
   * is either refused by the browser (one console message each) or has done its work (the node reserved).
   */
  async function open(name: string, scripts: number): Promise<{ page: Page; requests: string[] }> {
    const s = site();
    const page = await ctx.newPage();
    const requests: string[] = [];
    const blocked: string[] = [];
    page.on('request', (r) => requests.push(`${r.method()} ${new URL(r.url()).pathname}`));
    page.on('console', (m) => {
      if (BLOCKED.test(m.text())) blocked.push(m.text());
    });
    const res = await page.goto(`${s.url}/api/v1/result${s.resultId}/artifacts/${name}`);
    expect(res?.status(), name).to.equal(200);
    await waitFor(async () => blocked.length >= scripts || (await s.reservation()) !== null, { what: `the ${scripts} script(s) of ${name} to be refused or to act`, timeoutMs: 30_000 });
    return { page, requests: requests.filter((r) => !r.endsWith(`/artifacts/${name}`)) };
  }

  it('an HTML report: its inline script and onerror handler do nothing; its text, style and picture show', async () => {
    const { page, requests } = await open('report.html', 2);
    expect(await site().reservation(), 'the node was reserved by the report').to.equal(null);
    expect(await page.evaluate(() => document.documentElement.getAttribute('data-pwned'))).to.equal(null);
    expect(requests.filter((r) => !r.startsWith('GET /api/v1/result')), 'requests the report made').to.deep.equal([]);
    // Readable: the text, its inline style sheet, an inline style attribute, the picture from the same result.
    expect(await page.locator('#verdict').textContent()).to.equal('REPORT-TEXT-VISIBLE: 3 checks passed');
    expect(await page.locator('#verdict').isVisible()).to.equal(true);
    expect(await page.locator('#verdict').evaluate((e) => getComputedStyle(e).color)).to.equal('rgb(0, 128, 0)');
    expect(await page.locator('#styled').evaluate((e) => getComputedStyle(e).fontWeight)).to.equal('700');
    await page.waitForFunction(() => (document.getElementById('shot') as HTMLImageElement).complete, undefined, WAIT);
    expect(await page.locator('#shot').evaluate((e) => (e as HTMLImageElement).naturalWidth)).to.equal(2);
    await page.close();
  });

  it('an SVG: its script does nothing; its text shows', async () => {
    const { page, requests } = await open('evil.svg', 1);
    expect(await site().reservation(), 'the node was reserved by the SVG').to.equal(null);
    expect(await page.evaluate(() => document.documentElement.getAttribute('data-pwned'))).to.equal(null);
    expect(requests, 'requests the SVG made').to.deep.equal([]);
    expect(await page.locator('text').textContent()).to.equal('SVG-TEXT-VISIBLE');
    await page.close();
  });
}

describe('artifacts in a browser: no script of a test runs as the person who opens it', function () {
  this.timeout(300_000);
  let browser: Browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
  });

  describe('on a node', () => {
    let d: TestDaemon;
    let user: Awaited<ReturnType<typeof asUser>>;
    let first: { job: string; id: string };
    before(async () => {
      d = await startTestDaemon({ files: { 'tests/hostile.py': HOSTILE_TEST }, config: { capture: { uri: 'none:' } } });
      user = await asUser(d, 'alice');
      first = await runOn(d);
    });
    after(async () => {
      await d?.stop();
    });
    const site = (): Site => ({
      url: d.url,
      token: user.token,
      resultId: first.id,
      reservation: async () => ((await user.get('/api/v2/nodes/farmhand-test')).body as { reservation?: unknown }).reservation ?? null,
    });
    sandboxCases(site, () => browser);

    it('the artifacts carry the sandbox through v1 and v2, and no script started a job', async () => {
      for (const p of [`/api/v2/results${first.id}/artifacts/report.html`, `/api/v1/result${first.id}/artifacts/evil.svg`]) {
        const res = await user.get(p);
        expect(res.status, p).to.equal(200);
        expect(res.headers['content-security-policy'], p).to.match(/^sandbox;/).and.match(/default-src 'none'/).and.not.match(/allow-scripts|allow-same-origin|script-src/);
        expect(res.headers['x-content-type-options'], p).to.equal('nosniff');
      }
      // No job was started by the scripts: the next job the node numbers is the second.
      const res = await d.http.post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/hostile.py::test_nothing'] });
      expect(res.status, res.text).to.equal(200);
      const [prefix, num] = [first.job.replace(/\/\d+$/, ''), Number(/\/(\d+)$/.exec(first.job)![1])];
      expect(res.body.job_uid, 'the job after the first').to.equal(`${prefix}/${num + 1}`);
      await waitForJob(d, res.body.job_uid as string);
    });
  });

  describe('on the portal, from its uploaded copy', () => {
    let farm: TestFarm;
    let token: string;
    let id: string;
    before(async () => {
      farm = await startTestFarm();
      const node = await farm.addNode('rack-web', { files: { 'tests/hostile.py': HOSTILE_TEST }, config: { capture: { uri: 'none:' } } });
      token = await farm.tokenFor('alice');
      id = (await runOn(node)).id;
      // Served from the portal's storage (not forwarded): the node uploaded every file.
      await waitFor(async () => (await farm.portal.store.get(id)) !== undefined && !(await farm.portal.store.filesOnNode(id)), { what: 'the result uploaded to the portal', timeoutMs: 60_000 });
    });
    after(async () => {
      await farm?.stop();
    });
    const site = (): Site => ({
      url: farm.url,
      token,
      resultId: id,
      reservation: async () =>
        ((await (await fetch(`${farm.url}/api/v2/nodes/rack-web`, { headers: { Authorization: `token ${token}` } })).json()) as { reservation?: unknown }).reservation ?? null,
    });
    sandboxCases(site, () => browser);
  });
});
