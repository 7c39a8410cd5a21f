/**
 * A role check's 403 in a person's browser is a page (src/web/pages/forbidden.tsx; docs/auth.md, "A 403 in a
 * browser"), in real Chromium, on a node and on a farm portal: who she is, her role, what the page needs, whom
 * to ask, in the site's layout. Over HTTP: the same refusal to a program (the API, or JSON asked for) stays the
 * JSON `{"error": "forbidden", ...}`.
 */
import { expect } from 'chai';
import request from 'supertest';
import type { Browser, Page } from 'playwright-core';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';

const WAIT = { timeout: 30_000 };

/** Sign in with a token in a fresh context, then open `path`; answers the page and the status of its navigation. */
async function openAs(browser: Browser, origin: string, token: string, path: string): Promise<{ page: Page; status: number; errors: string[] }> {
  const page = await (await browser.newContext()).newPage();
  const errors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && !/status of 403/.test(m.text()) && errors.push(`console: ${m.text()}`));
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  await page.goto(`${origin}/app/sign-in`);
  await page.locator('input[name="token"]').fill(token);
  await Promise.all([page.waitForURL((u) => u.pathname === '/', WAIT), page.locator('button[type="submit"]', { hasText: 'Sign in' }).click()]);
  const res = await page.goto(`${origin}${path}`);
  return { page, status: res?.status() ?? 0, errors };
}

async function expectForbiddenPage(p: { page: Page; status: number; errors: string[] }, want: { login: string; role: string; need: string; ask: RegExp }): Promise<void> {
  expect(p.status).to.equal(403);
  // The site's layout: its navigation and the signed-in person in the header.
  await p.page.locator('header.top nav').waitFor(WAIT);
  expect(await p.page.locator('header.top .who strong').first().textContent()).to.equal(want.login);
  expect(await p.page.locator('#forbidden h1').textContent()).to.equal('You may not open this page');
  expect(await p.page.locator('#forbidden .forbidden-login').textContent()).to.equal(want.login);
  expect(await p.page.locator('#forbidden .forbidden-role').textContent()).to.equal(want.role);
  expect(await p.page.locator('#forbidden .forbidden-need').textContent()).to.equal(want.need);
  expect(await p.page.locator('#forbidden .forbidden-ask').textContent()).to.match(want.ask);
  expect(await p.page.title()).to.equal('Not allowed - farmhand');
  expect(p.errors).to.deep.equal([]);
}

describe('a 403 of a role check, in a browser: a page; to programs: JSON', function () {
  this.timeout(180_000);
  let browser: Browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(() => browser?.close());

  describe('on a node', () => {
    let d: TestDaemon;
    const t: Record<string, string> = {};
    before(async () => {
      d = await startTestDaemon({ config: { capture: { uri: 'none:' } } });
      const store = new TokenStore(tokensFile(d.dataDir));
      t.reader = (await store.create('rita', { role: 'read' })).token;
      t.runner = (await store.create('rob', { role: 'run' })).token;
      await store.create('ada', { role: 'admin' });
    });
    after(() => d?.stop());

    it('read opening /app/live gets the page: who, role, needs manual, whom to ask', async () => {
      await expectForbiddenPage(await openAs(browser, d.url, t.reader!, '/app/live'), { login: 'rita', role: 'read', need: 'manual', ask: /^Ask an administrator of this node \(ada\) to give your user the role manual/ });
    });

    it('run opening /app/audit gets the page (needs admin)', async () => {
      await expectForbiddenPage(await openAs(browser, d.url, t.runner!, '/app/audit'), { login: 'rob', role: 'run', need: 'admin', ask: /\(ada\)/ });
    });

    it('over HTTP: the signed-in session asking for JSON, and the API with Accept text/html, keep the JSON 403', async () => {
      const signIn = await request(d.url).post('/app/sign-in').type('form').send({ token: t.reader, next: '/' });
      expect(signIn.status).to.equal(303);
      const cookie = String(signIn.headers['set-cookie']).split(';')[0]!;
      const page = await request(d.url).get('/app/live').set('Cookie', cookie).set('Accept', 'text/html');
      expect(page.status).to.equal(403);
      expect(page.type).to.equal('text/html');
      const json = await request(d.url).get('/app/live').set('Cookie', cookie).set('Accept', 'application/json');
      expect(json.status).to.equal(403);
      expect(json.type).to.equal('application/json');
      expect(json.body).to.include({ error: 'forbidden' });
      expect(json.body.message).to.match(/^read may not use the live view/);
      const api = await request(d.url).get('/api/v2/audit').set('Authorization', `token ${t.runner}`).set('Accept', 'text/html,application/xhtml+xml');
      expect(api.status).to.equal(403);
      expect(api.type).to.equal('application/json');
      expect(api.body.error).to.equal('forbidden');
      const cliLike = await request(d.url).post('/api/v2/run_tests').set('Cookie', cookie).set('Accept', 'text/html').send({});
      expect(cliLike.status).to.equal(403);
      expect(cliLike.type).to.equal('application/json');
    });
  });

  describe('on a farm portal', () => {
    let farm: TestFarm;
    const t: Record<string, string> = {};
    before(async () => {
      farm = await startTestFarm();
      await farm.tokenFor('zed', 'admin');
      t.reader = await farm.tokenFor('rita', 'read');
      t.runner = await farm.tokenFor('rob', 'run');
    });
    after(() => farm?.stop());

    it('read opening a node\'s live view through the portal gets the portal\'s page (the portal refuses before forwarding)', async () => {
      await expectForbiddenPage(await openAs(browser, farm.url, t.reader!, '/app/nodes/stb-1/live'), { login: 'rita', role: 'read', need: 'manual', ask: /^Ask an administrator of the farm \(zed\)/ });
    });

    it('run opening /app/audit gets the page; the API keeps JSON', async () => {
      await expectForbiddenPage(await openAs(browser, farm.url, t.runner!, '/app/audit'), { login: 'rob', role: 'run', need: 'admin', ask: /\(zed\)/ });
      const api = await request(farm.url).get('/api/v2/audit').set('Authorization', `token ${t.runner}`).set('Accept', 'text/html');
      expect(api.status).to.equal(403);
      expect(api.type).to.equal('application/json');
      expect(api.body.message).to.match(/^run may not read the audit trail/);
    });
  });
});
