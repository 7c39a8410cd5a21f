/**
 * Seeing why a check failed (issue 18 item 5), in a real Chromium on a real
 * daemon with the virtual set-top box: a pack's failed wait_for_match,
 * match_text and ocr each show on their result page, first, the frame they
 * looked at, the region boxed and the score or the words that made them fail;
 * the v2 result detail names the records (`checks_url`) and they are served
 * as an artifact.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';

const CHECKS_TEST = [
  'import numpy as np',
  'import stbt',
  '',
  'def test_wait_for_match():',
  '    template = np.random.RandomState(1).randint(0, 255, (40, 40, 3)).astype(np.uint8)',
  '    stbt.wait_for_match(template, timeout_secs=1, region=stbt.Region(100, 50, 300, 200))',
  '',
  'def test_match_text():',
  '    assert stbt.match_text("Zanzibar", region=stbt.Region(0, 0, 640, 360))',
  '',
  'def test_ocr():',
  '    text = stbt.ocr(region=stbt.Region(0, 0, 640, 360))',
  '    assert text == "Zanzibar", text',
  '',
].join('\n');

const CASES = ['test_wait_for_match', 'test_match_text', 'test_ocr'].map((n) => `tests/checks.py::${n}`);
const WAIT = { timeout: 30_000 };

describe('portal: why a check failed (the result page`s checks)', function () {
  this.timeout(400_000);
  let d: TestDaemon;
  let browser: Browser;
  let ctx: BrowserContext;
  let page: Page;
  let user: Awaited<ReturnType<typeof asUser>>;
  const results = new Map<string, { result_id: string; result: string; checks_url: string | null; triage_url: string }>();

  before(async () => {
    d = await startTestDaemon({
      files: { ...STANDARD_FILES, 'tests/checks.py': CHECKS_TEST },
      config: { capture: { uri: 'virtual:', width: 640, height: 360, record_video: true }, ir: { uri: 'virtual:' } },
    });
    await waitOnline(d, 30_000);
    user = await asUser(d, 'alice');
    const res = await user.post('/api/v2/run_tests').send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: CASES });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 300_000);
    const list = (await user.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<{ result_id: string }>;
    for (const r of list) {
      const detail = (await user.get(`/api/v2/results${r.result_id}`)).body as { test_case: string; result_id: string; result: string; checks_url: string | null; triage_url: string };
      results.set(detail.test_case, detail);
    }
    browser = await launchBrowser();
    ctx = await browser.newContext({ extraHTTPHeaders: { Authorization: `token ${user.token}` }, viewport: { width: 1400, height: 1000 } });
    page = await ctx.newPage();
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  /** The "Why it failed" box of a test case's page, after the frame in it has loaded. */
  async function whyBox(testCase: string) {
    const r = results.get(testCase)!;
    expect(r.result).to.equal('fail');
    await page.goto(r.triage_url);
    const why = page.locator('section.why-failed');
    await why.waitFor(WAIT);
    // the box is on the first screen: its top is inside the viewport without scrolling
    const top = await why.evaluate((el) => el.getBoundingClientRect().top);
    expect(top).to.be.lessThan(1000);
    // the frame is a real, loaded picture of the capture's size
    await page.waitForFunction(
      () => {
        const img = document.querySelector('section.why-failed svg image');
        return img !== null && (img as SVGImageElement).getBBox().width > 0;
      },
      undefined,
      WAIT,
    );
    const frameUrl = await why.locator('svg image').getAttribute('href');
    const frame = await user.get(frameUrl!.slice(d.url.length > 0 && frameUrl!.startsWith('http') ? d.url.length : 0));
    expect(frame.status).to.equal(200);
    expect(frame.headers['content-type']).to.match(/image\/jpeg/);
    return why;
  }

  it('the v2 result detail names the checks and they are served as an artifact', async () => {
    const r = results.get(CASES[0]!)!;
    expect(r.checks_url).to.equal(`${d.url}/api/v2/results${r.result_id}/artifacts/checks.jsonl`);
    const got = await fetch(r.checks_url!, { headers: { Authorization: `token ${user.token}` } });
    expect(got.status).to.equal(200);
    const body = await got.text();
    const recs = body.trim().split('\n').map((l) => JSON.parse(l) as { kind: string; passed: boolean; frame: string });
    expect(recs.at(-1)).to.include({ kind: 'wait_for_match', passed: false });
    const listing = (await user.get(`/api/v2/results${r.result_id}/artifacts/`)).body as Record<string, unknown>;
    expect(listing).to.include.keys('checks.jsonl', recs.at(-1)!.frame);
  });

  it('a failed wait_for_match: the frame, the searched region boxed, the template, the score under the threshold', async () => {
    const why = await whyBox(CASES[0]!);
    expect(await why.locator('li.check').getAttribute('data-kind')).to.equal('wait_for_match');
    const region = why.locator('svg rect.region');
    expect(await region.getAttribute('x')).to.equal('100');
    expect(await region.getAttribute('width')).to.equal('300');
    expect(await region.isVisible()).to.equal(true);
    expect(await why.locator('svg rect.best').count()).to.equal(1);
    expect(await why.locator('figure.template img').evaluate((img) => (img as HTMLImageElement).naturalWidth)).to.equal(40);
    expect(await why.locator('.verdict').textContent()).to.match(/^score -?\d[\d.]* < threshold 0\.\d+; first pass failed, confirm pass not run$/);
  });

  it('a failed match_text: the frame, the region boxed and the words read, boxed', async () => {
    const why = await whyBox(CASES[1]!);
    expect(await why.locator('li.check').getAttribute('data-kind')).to.equal('match_text');
    expect(await why.locator('svg rect.region').getAttribute('width')).to.equal('640');
    expect(await why.locator('svg rect.word').count()).to.be.greaterThan(0);
    const verdict = (await why.locator('.verdict').textContent())!;
    expect(verdict).to.match(/^looked for "Zanzibar", read: \S/);
    expect(await why.locator('ul.words li').count()).to.equal(await why.locator('svg rect.word').count());
  });

  it('a failed ocr assertion: its last read, with the frame, the region boxed and the words', async () => {
    const why = await whyBox(CASES[2]!);
    expect(await why.locator('li.check').getAttribute('data-kind')).to.equal('ocr');
    expect(await why.locator('svg rect.region').count()).to.equal(1);
    expect(await why.locator('svg rect.word').count()).to.be.greaterThan(0);
    expect(await why.locator('.verdict').textContent()).to.match(/^read "\S/);
    // the Checks section lists it at its time on the video's clock
    const link = page.locator('#checks li.check a.ts').last();
    expect(await link.getAttribute('href')).to.match(/^#t=\d+\.\d{3}$/);
  });
});
