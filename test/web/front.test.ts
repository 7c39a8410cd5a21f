// The front door and its reservations in a real Chromium (docs/portal.md, "The front door",
// "Reservations in the page"): readable without JavaScript; with it, signing in, reserving,
// a second person seeing the holder and getting their press refused, interrupting with a message,
// and a job started through the API appearing without a reload.
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { VSTB_LIRCD_CONF, VSTB_REMOTE_NAME } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';

const NODE = 'farmhand-test';
const WAIT = { timeout: 30_000 };
const FILES = {
  ...STANDARD_FILES,
  'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF,
  'config/test-farm/farmhand-test.conf': '[node]\nfriendly_name = Rack 3, shelf 2\n',
};

/** A press through the same path the web remote uses: api() from /static/api.js, in the page. */
async function pressInPage(page: Page): Promise<{ ok: true } | { status: number; code: string; message: string }> {
  return page.evaluate(
    async ([node, remote]) => {
      const src = '/static/api.js';
      const { api } = (await import(src)) as { api: (m: string, p: string, b?: unknown) => Promise<unknown> };
      try {
        await api('POST', `/api/v2/nodes/${node}/press`, { key: 'KEY_OK', remote_control: remote });
        return { ok: true as const };
      } catch (e) {
        const err = e as { status: number; code: string; message: string };
        return { status: err.status, code: err.code, message: err.message };
      }
    },
    [NODE, VSTB_REMOTE_NAME] as const,
  );
}

describe('portal: the front door and reservations in the page', function () {
  this.timeout(300_000);
  let d: TestDaemon;
  let browser: Browser;
  let alice: Awaited<ReturnType<typeof asUser>>;
  let bob: Awaited<ReturnType<typeof asUser>>;
  const contexts: BrowserContext[] = [];

  before(async () => {
    d = await startTestDaemon({ files: FILES, config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 } } });
    alice = await asUser(d, 'alice');
    bob = await asUser(d, 'bob');
    await waitOnline(d);
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await d?.stop();
  });

  async function person(token?: string, opts: { javaScriptEnabled?: boolean } = {}): Promise<Page> {
    const ctx = await browser.newContext(opts);
    contexts.push(ctx);
    const page = await ctx.newPage();
    if (token) {
      await page.goto(`${d.url}/app/sign-in?next=%2F`);
      await page.getByLabel('Access token').fill(token);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${d.url}/`, WAIT);
      await page.locator('#front[data-live="yes"]').waitFor(WAIT);
    }
    return page;
  }

  it('without JavaScript the front door shows the node, its state and the links', async () => {
    const page = await person(undefined, { javaScriptEnabled: false });
    await page.goto(`${d.url}/`);
    expect(await page.locator('h1').textContent()).to.equal('Rack 3, shelf 2');
    expect(await page.locator('.node-id code').first().textContent()).to.equal(NODE);
    expect(await page.locator('.node-online').textContent()).to.match(/^Online/);
    expect(await page.locator('#reservation-state').textContent()).to.contain('Not reserved');
    expect(await page.getByRole('link', { name: 'Sign in to reserve' }).count()).to.equal(1);
    for (const href of ['/app/results', '/app/live', '/app/api']) expect(await page.locator(`#front a[href="${href}"]`).count(), href).to.be.greaterThan(0);
  });

  it('a bad token is shown next to the box, with the form kept', async () => {
    const page = await person();
    await page.goto(`${d.url}/app/sign-in?next=%2Fapp%2Flive`);
    await page.getByLabel('Access token').fill('fh_12345678_nope');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator('#token-error').waitFor(WAIT);
    expect(await page.locator('#token-error').textContent()).to.contain('not accepted');
    expect(await page.getByLabel('Access token').getAttribute('aria-invalid')).to.equal('true');
    expect(await page.locator('input[name="next"]').getAttribute('value')).to.equal('/app/live');
  });

  it('sign in and reserve; another person sees the holder and message and is refused a press; they interrupt with a message the holder sees', async () => {
    const a = await person(alice.token);
    await a.getByLabel(/^Message/).fill('Checking the EPG on build 42');
    await a.getByLabel(/minutes/).fill('30');
    await a.getByRole('button', { name: 'Reserve' }).click();
    await a.locator('#reservation-state .holder', { hasText: 'alice' }).waitFor(WAIT);
    expect(await a.locator('#reservation-state').textContent()).to.contain('(you)');
    expect(await pressInPage(a), 'the holder may press').to.deep.equal({ ok: true });

    const reader = await person();
    await reader.goto(`${d.url}/`);
    expect(await reader.locator('#reservation-state .holder').textContent()).to.equal('alice');
    expect(await reader.locator('.reservation-message').textContent()).to.equal('Checking the EPG on build 42');
    expect(await reader.getByRole('link', { name: 'Sign in to reserve' }).count()).to.equal(1);

    const b = await person(bob.token);
    expect(await b.locator('#reservation-state .holder').textContent()).to.equal('alice');
    expect(await b.locator('.reservation-message').textContent()).to.equal('Checking the EPG on build 42');
    const refused = await pressInPage(b);
    expect(refused).to.include({ status: 403, code: 'forbidden' });
    expect((refused as { message: string }).message).to.contain('alice');

    await b.getByLabel('Interrupt with a message to alice').fill('Need the box for the release check');
    await b.getByRole('button', { name: 'Interrupt reservation' }).click();
    await b.locator('#reservation-state .unreserved').waitFor(WAIT);
    // The holder's page follows without a reload, and shows the interrupter's message.
    await a.locator('#reservation-state .unreserved').waitFor(WAIT);
    await a.locator('#front-notices', { hasText: 'Need the box for the release check' }).waitFor(WAIT);
    expect(await a.locator('#front-notices strong').textContent()).to.equal('bob');
  });

  it('the holder extends and ends their reservation from the page; API errors are shown next to the form', async () => {
    const a = await person(alice.token);
    await a.getByLabel(/^Message/).fill('short one');
    await a.getByRole('button', { name: 'Reserve' }).click();
    await a.getByRole('button', { name: 'Extend' }).waitFor(WAIT);
    const before = (await alice.get(`/api/v2/nodes/${NODE}`)).body.reservation;
    expect(before.expires, 'made without a duration').to.equal(null);
    await a.getByRole('button', { name: 'End my reservation' }).click();
    await a.locator('#reservation-state .unreserved').waitFor(WAIT);
    expect((await alice.get(`/api/v2/nodes/${NODE}`)).body.reservation).to.equal(null);

    await a.getByLabel(/^Message/).fill('timed');
    await a.getByLabel(/minutes/).fill('10');
    await a.getByRole('button', { name: 'Reserve' }).click();
    await a.getByRole('button', { name: 'Extend' }).waitFor(WAIT);
    const made = (await alice.get(`/api/v2/nodes/${NODE}`)).body.reservation;
    await a.getByLabel('Extend by minutes').fill('20');
    await a.getByRole('button', { name: 'Extend' }).click();
    // The page follows the reservation.extended event.
    await a.locator(`#reservation-state .expires time:not([datetime="${made.expires as string}"])`).waitFor(WAIT);
    const extended = (await alice.get(`/api/v2/nodes/${NODE}`)).body.reservation.expires as string;
    expect(await a.locator('#reservation-state .expires time').getAttribute('datetime')).to.equal(extended);
    expect(Date.parse(extended) - Date.parse(made.expires as string)).to.equal(20 * 60 * 1000);
    await a.getByRole('button', { name: 'End my reservation' }).click();
    await a.locator('#reservation-state .unreserved').waitFor(WAIT);

    // An error from the API (a job is running: 409) appears next to the form.
    const run = await bob.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'], remote_control: VSTB_REMOTE_NAME });
    expect(run.status).to.equal(200);
    try {
      await a.locator('#job .job-status.running').waitFor(WAIT);
      await a.getByLabel(/^Message/).fill('while busy');
      await a.getByRole('button', { name: 'Reserve' }).click();
      await a.locator('#res-error:not(:empty)').waitFor(WAIT);
      expect(await a.locator('#res-error').textContent()).to.match(/job|busy|running/i);
    } finally {
      expect((await bob.post(`/api/v2/jobs${run.body.job_uid}/stop`)).status).to.equal(200);
    }
    await a.locator('#job .job-status.exited').waitFor(WAIT);
  });

  it('with JavaScript, a job started through the API appears without a reload, with its job page link and the running test case', async () => {
    const reader = await person();
    await reader.goto(`${d.url}/`);
    await reader.locator('#front[data-live="yes"]').waitFor(WAIT);
    await reader.evaluate(() => {
      (window as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    const run = await alice.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'], remote_control: VSTB_REMOTE_NAME });
    expect(run.status).to.equal(200);
    const uid = run.body.job_uid as string;
    try {
      await reader.locator('#job .current-test', { hasText: 'tests/hang.py::test_hang' }).waitFor(WAIT);
      expect(await reader.locator('#job .job-status').textContent()).to.equal('running');
      expect(await reader.locator('#job a.job-link').getAttribute('href')).to.equal(`/app/jobs${uid}`);
      expect(await reader.evaluate(() => (window as unknown as { notReloaded?: boolean }).notReloaded)).to.equal(true);
    } finally {
      expect((await alice.post(`/api/v2/jobs${uid}/stop`)).status).to.equal(200);
    }
    // The run is recorded: it appears in the latest results, linking to its result page.
    const link = reader.locator(`#latest a[href^="/app/results${uid}/"]`);
    await link.waitFor(WAIT);
    expect(await link.textContent()).to.equal('tests/hang.py::test_hang');
    expect(await reader.locator('#latest li').first().locator('a').getAttribute('href'), 'newest first').to.equal(await link.getAttribute('href'));
  });
});
