/**
 * A person signed in on the portal stays signed in across a portal restart (docs/auth.md, "Sessions on
 * the portal"), in a real Chromium against a real portal (startFarmPortal) on a throwaway PostgreSQL: the
 * portal is stopped and a new one started on the same address and database, and the same page, reloaded,
 * is still the person's; signing out there ends the session in the table.
 */
import { expect } from 'chai';
import type { Browser } from 'playwright-core';
import { launchBrowser } from '../helpers/browser.js';
import { startTestFarm, type TestFarm, throughReplicas } from '../helpers/farm.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { freePort } from '../helpers/processFarm.js';

const WAIT = { timeout: 30_000 };

describe('farm portal: a signed-in person stays signed in across a portal restart (Chromium)', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): restarts the one portal on the port it set (`listen`); sessions across replicas: portal-web through replicas.
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(180_000);
  let cluster: TestPostgres;
  let farm: TestFarm | undefined;
  let browser: Browser;
  let listen: string;

  before(async () => {
    cluster = await startPostgres();
    listen = `127.0.0.1:${await freePort()}`;
    farm = await startTestFarm({ cluster, portal: { listen } });
    browser = await launchBrowser();
  });

  after(async () => {
    await browser?.close();
    await farm?.stop();
    await cluster?.stop();
  });

  it('signed in, the portal restarted, the page reloaded: still signed in; signing out ends the session', async () => {
    const token = await farm!.tokenFor('dana');
    const ctx = await browser.newContext();
    const page = await ctx.newPage();
    await page.goto(`${farm!.url}/app/sign-in?next=%2F`);
    await page.getByLabel('Access token').fill(token);
    await Promise.all([page.waitForURL(`${farm!.url}/`, { ...WAIT, waitUntil: 'commit' }), page.getByRole('button', { name: 'Sign in' }).click()]);
    await page.locator('.who', { hasText: 'dana' }).waitFor(WAIT);

    const url = farm!.url;
    await farm!.stop();
    farm = undefined;
    farm = await startTestFarm({ cluster, portal: { listen } });
    expect(farm.url).to.equal(url);
    await page.reload();
    expect(await page.locator('.who').textContent(), 'the same browser, after the restart').to.contain('dana');
    expect(await page.getByRole('button', { name: 'Sign out' }).count()).to.equal(1);

    await Promise.all([page.waitForURL(`${farm.url}/`, WAIT), page.getByRole('button', { name: 'Sign out' }).click()]);
    expect(await page.locator('.who').textContent()).to.contain('Sign in');
    expect((await farm.db.query("SELECT 1 FROM web_sessions WHERE username = 'dana'")).rowCount, 'sign-out deleted the row').to.equal(0);
    await ctx.close();
  });
});
