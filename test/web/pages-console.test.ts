/**
 * The pages as a person gets them, in a real Chromium (issue 20, items 3 and 4):
 * - every page of a node's web pages and of a farm portal, reached by following
 *   the links from the front door, logs no console error and has no failed
 *   request (the favicon's JSON 404 was one on every first page);
 * - the favicon is ours, an image served at /favicon.ico, cached, and linked
 *   by every page;
 * - the API reference sits in the pages' layout (header, a way back), renders
 *   its Markdown (no backticks shown), has a table of contents and one section
 *   per endpoint group, folds endpoints and schemas, and is short on a phone.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext } from 'playwright-core';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { OPERATIONS as ENDPOINTS } from '../../src/http/openapi/endpoint.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';

const FILES = { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF };
const CONFIG = { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 } } as const;
/** Links that are not pages: streams, downloads, artifacts, forms' targets. */
const NOT_A_PAGE = /stream\.mjpeg|frame\.png|\.(png|jpe?g|mp4|webm|json|txt|log|zip|tar|gz)(\?|$)|\/artifacts\/|sign-out|\/api\//;

interface Visit {
  errors: string[];
  pages: string[];
}

/** Open `start`, then every same-origin page linked from the pages seen (up to `max`), collecting what went wrong. */
async function crawl(ctx: BrowserContext, origin: string, start: string, max = 40): Promise<Visit> {
  const errors: string[] = [];
  const page = await ctx.newPage();
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${page.url()}: console: ${m.text()}`);
  });
  page.on('pageerror', (e) => errors.push(`${page.url()}: uncaught: ${e.message}`));
  page.on('requestfailed', (r) => {
    // ERR_ABORTED is the browser cancelling what is still loading because the test goes to the next
    // page (the live picture, the event stream, a thumbnail): no failure of the page. Errors the server
    // answers are counted below, by status.
    if (r.failure()?.errorText !== 'net::ERR_ABORTED') errors.push(`${page.url()}: request failed: ${r.url()} ${r.failure()?.errorText ?? ''}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400) errors.push(`${page.url()}: ${r.status()} for ${r.url()}`);
  });
  const seen = new Set<string>([start]);
  const queue = [start];
  const pages: string[] = [];
  while (queue.length > 0 && pages.length < max) {
    const p = queue.shift() as string;
    const res = await page.goto(`${origin}${p}`, { waitUntil: 'load' });
    expect(res?.status(), p).to.equal(200);
    pages.push(p);
    const hrefs = await page.$$eval('a[href]', (as) => as.map((a) => a.getAttribute('href') ?? ''));
    for (const h of hrefs) {
      const u = new URL(h, `${origin}${p}`);
      if (u.origin !== origin || NOT_A_PAGE.test(u.pathname)) continue;
      // One visit per path: the results list's sort links are the same page.
      const key = u.pathname;
      if (!seen.has(key)) {
        seen.add(key);
        queue.push(key);
      }
    }
  }
  await page.close();
  return { errors, pages };
}

describe('web pages in Chromium: favicon, API reference, no console error on any page', function () {
  this.timeout(300_000);
  let d: TestDaemon;
  let farm: TestFarm;
  let browser: Browser;
  let token: string;

  before(async () => {
    d = await startTestDaemon({ files: FILES, config: CONFIG });
    await waitOnline(d);
    const alice = await asUser(d, 'alice');
    token = alice.token;
    // A job with a passing and a failing run, so the job and result pages are among those visited.
    const res = await alice.post('/api/v2/run_tests').send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass', 'tests/basic.py::test_fail'] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid as string);
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
    await farm?.stop();
  });

  it("every page of a node's web pages: no console error, no failed request", async () => {
    for (const signedIn of [false, true]) {
      const ctx = await browser.newContext(signedIn ? { extraHTTPHeaders: { Authorization: `token ${token}` } } : {});
      const v = await crawl(ctx, d.url, '/');
      await ctx.close();
      expect(v.errors, v.errors.join('\n')).to.deep.equal([]);
      for (const p of ['/', '/app/results', '/app/live', '/app/api']) expect(v.pages, `visited ${v.pages.join(' ')}`).to.include(p);
      expect(v.pages.some((p) => p.startsWith('/app/results/')), `a result page among ${v.pages.join(' ')}`).to.equal(true);
    }
  });

  it('the favicon is an image of our own at /favicon.ico, cached, and every page links it', async () => {
    const res = await fetch(`${d.url}/favicon.ico`);
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.equal('image/svg+xml');
    expect(res.headers.get('cache-control')).to.match(/max-age=\d{4,}/);
    expect(await res.text()).to.match(/^<svg /);
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    for (const p of ['/', '/app/results', '/app/live', '/app/api']) {
      await page.goto(`${d.url}${p}`);
      expect(await page.locator('link[rel=icon]').getAttribute('href'), p).to.equal('/favicon.ico');
    }
    // Chromium shows it: the icon decodes as an image.
    const size = await page.evaluate(async () => {
      const img = new Image();
      img.src = '/favicon.ico';
      await img.decode();
      return img.naturalWidth;
    });
    expect(size).to.be.greaterThan(0);
    await ctx.close();
  });

  it('the API reference: the layout and a way back, rendered Markdown, contents, one section per group, short on a phone', async () => {
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, isMobile: true });
    const page = await ctx.newPage();
    const errors: string[] = [];
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    await page.goto(`${d.url}/app/api`);
    // The layout: the header's navigation with the way back to the node, the API section current.
    expect(await page.locator('header.top nav a[href="/"]').count()).to.equal(1);
    expect(await page.locator('header.top nav a[aria-current=page]').getAttribute('href')).to.equal('/app/api');
    // Markdown rendered: code spans are <code>, no backtick is left in the text.
    const text = await page.locator('main').innerText();
    expect(text).not.to.contain('`');
    expect(await page.locator('main .api-op code').count()).to.be.greaterThan(ENDPOINTS.length);
    // One section per endpoint group, each in the contents.
    const groups = [...new Set(ENDPOINTS.map((e) => e.tag))];
    expect(await page.locator('main section.api-group').count()).to.equal(groups.length + 1); // + schemas
    const toc = await page.$$eval('#api-contents a', (as) => as.map((a) => a.getAttribute('href')));
    expect(toc).to.have.length(groups.length + 1);
    for (const href of toc) expect(await page.locator(href as string).count(), href ?? '').to.equal(1);
    // Short on a phone: folded, and nothing wider than the screen.
    const { height, width } = await page.evaluate(() => ({ height: document.documentElement.scrollHeight, width: document.documentElement.scrollWidth }));
    expect(height, 'page height on a phone').to.be.lessThan(844 * 12);
    expect(width, 'page width on a phone').to.be.at.most(390);
    // A link to a schema opens the folded schema it names.
    const schemaLink = page.locator('main .api-op a[href^="#schema-"]').first();
    const target = (await schemaLink.getAttribute('href')) as string;
    await page.locator('main .api-op', { has: page.locator('a[href^="#schema-"]') }).first().locator('summary').click();
    await schemaLink.click();
    await page.waitForFunction((sel) => document.querySelector<HTMLDetailsElement>(sel)?.open === true, target);
    expect(errors).to.deep.equal([]);
    await ctx.close();
  });

  it('every page of a farm portal and of a node through it: no console error, no failed request', async () => {
    farm = await startTestFarm();
    await farm.addNode('node-a', { files: FILES, config: CONFIG });
    const ftoken = await farm.tokenFor('alice');
    for (const signedIn of [false, true]) {
      const ctx = await browser.newContext(signedIn ? { extraHTTPHeaders: { Authorization: `token ${ftoken}` } } : {});
      const v = await crawl(ctx, farm.url, '/');
      const live = await crawl(ctx, farm.url, '/app/nodes/node-a/live', 1);
      await ctx.close();
      expect([...v.errors, ...live.errors], [...v.errors, ...live.errors].join('\n')).to.deep.equal([]);
      expect(v.pages, `visited ${v.pages.join(' ')}`).to.include.members(['/', '/app/results']);
    }
    const icon = await fetch(`${farm.url}/favicon.ico`);
    expect(icon.status).to.equal(200);
    expect(icon.headers.get('content-type')).to.equal('image/svg+xml');
  });
});
