/**
 * The audit trail's page `/app/audit` in a real Chromium, on a node and on a farm portal (docs/auth.md, "Audit
 * trail"): a person signs in, is sent on to the page, sees the entries in a table, filters them with the form,
 * and nothing is logged to the console or fails to load.
 */
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { insertAuditEntries } from '../../src/farm/audit.js';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';

const NODE = 'farmhand-test';
const WAIT = { timeout: 30_000 };

/** A page that collects console errors, uncaught errors, failed requests and 4xx/5xx answers. */
async function watchedPage(browser: Browser): Promise<{ page: Page; errors: string[] }> {
  const page = await (await browser.newContext()).newPage();
  const errors: string[] = [];
  page.on('console', (m) => m.type() === 'error' && errors.push(`console: ${m.text()}`));
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()} ${r.failure()?.errorText ?? ''}`));
  page.on('response', (r) => r.status() >= 400 && errors.push(`${r.status()} for ${r.url()}`));
  return { page, errors };
}

/** Open /app/audit: the sign-in page first, then back to the audit page. */
async function signInToAudit(page: Page, origin: string, token: string): Promise<void> {
  await page.goto(`${origin}/app/audit`);
  expect(new URL(page.url()).pathname).to.equal('/app/sign-in');
  await page.locator('input[name="token"]').fill(token);
  await Promise.all([page.waitForURL(/\/app\/audit/, WAIT), page.locator('button[type="submit"]', { hasText: 'Sign in' }).click()]);
  await page.locator('table#audit').waitFor(WAIT);
}

describe('the audit page in a browser', function () {
  this.timeout(180_000);
  let browser: Browser;
  before(async () => {
    browser = await launchBrowser();
  });
  after(() => browser?.close());

  describe('on a node', () => {
    let d: TestDaemon;
    let alice: Awaited<ReturnType<typeof asUser>>;
    before(async () => {
      d = await startTestDaemon({ files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF }, config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 } } });
      alice = await asUser(d, 'alice');
      await waitOnline(d);
      const made = await alice.post('/api/v2/reservations').send({ node_ids: [NODE], duration_secs: 600, message: 'page test' });
      expect(made.status, made.text).to.equal(200);
      expect((await alice.delete(`/api/v2/reservations/${made.body.reservations[0].reservation_id}`)).status).to.equal(204);
    });
    after(() => d?.stop());

    it('renders the entries, filters them with the form, and logs no error', async () => {
      const { page, errors } = await watchedPage(browser);
      await signInToAudit(page, d.url, alice.token);
      const actions = await page.$$eval('table#audit tbody tr', (rows) => rows.map((r) => r.getAttribute('data-action')));
      expect(actions).to.deep.equal(['reservation.end', 'reservation.create']);
      expect(await page.locator('table#audit tbody tr').first().locator('td.who').textContent()).to.equal('alice');
      await page.locator('select[name="action"]').selectOption('reservation.create');
      await Promise.all([page.waitForURL(/action=reservation\.create/, WAIT), page.locator('button', { hasText: 'Filter' }).click()]);
      expect(await page.$$eval('table#audit tbody tr', (rows) => rows.map((r) => r.getAttribute('data-action')))).to.deep.equal(['reservation.create']);
      expect(errors).to.deep.equal([]);
    });
  });

  describe('on a farm portal', () => {
    let farm: TestFarm;
    let token: string;
    before(async () => {
      farm = await startTestFarm();
      token = await farm.tokenFor('root', 'admin');
      const at = new Date().toISOString();
      const base = { at, via: 'token' as const, token_id: '1a2b3c4d', from: '192.0.2.9', node: 'stb-7', detail: {}, outcome: 200 };
      await insertAuditEntries(farm.db, [
        { ...base, who: 'alice', action: 'job.run', target: '/stb-7/ab12/1' },
        { ...base, who: 'bob', action: 'reservation.interrupt', target: '12', detail: { message: 'moving <b>racks</b>' } },
      ]);
    });
    after(() => farm?.stop());

    it('renders the rows of PostgreSQL, escapes what they say, filters by user, and logs no error', async () => {
      const { page, errors } = await watchedPage(browser);
      await signInToAudit(page, farm.url, token);
      expect(await page.$$eval('table#audit tbody tr', (rows) => rows.map((r) => r.getAttribute('data-action')))).to.deep.equal(['reservation.interrupt', 'job.run']);
      expect(await page.locator('table#audit td.detail').first().textContent()).to.equal('message=moving <b>racks</b>');
      await page.locator('input[name="user"]').fill('alice');
      await Promise.all([page.waitForURL(/user=alice/, WAIT), page.locator('button', { hasText: 'Filter' }).click()]);
      expect(await page.$$eval('table#audit tbody tr td.target', (cells) => cells.map((c) => c.textContent))).to.deep.equal(['/stb-7/ab12/1']);
      expect(errors).to.deep.equal([]);
    });
  });
});
