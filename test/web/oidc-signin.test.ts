// Sign-in with OpenID Connect on a node (docs/auth.md, "Sign-in with OpenID Connect"), in Chromium,
// against a real provider (oidc-provider, test/helpers/oidcProvider.ts) on another site (localhost;
// the node is 127.0.0.1): the flow, the role from the claims, and every way it must fail cleanly.
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { launchBrowser } from '../helpers/browser.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';
import { CLIENT_ID, CLIENT_SECRET, startTestProvider, type TestProvider } from '../helpers/oidcProvider.js';

const ROLE_MAP = { 'lab-viewers': 'read', 'lab-runners': 'run', 'lab-admins': 'admin' } as const;

/** Press the provider's button on the sign-in page of `next`. */
async function startSignIn(page: Page, base: string, next: string): Promise<void> {
  await page.goto(`${base}/app/sign-in?next=${encodeURIComponent(next)}`);
  await page.getByRole('link', { name: 'Sign in with Test SSO' }).click();
}

/** The provider's own login form (any password): sign in there as `login`. */
async function providerLogin(page: Page, issuer: string, login: string): Promise<void> {
  await page.waitForURL((u) => u.href.startsWith(issuer));
  await page.locator('input[name=login]').fill(login);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('button[type=submit]').click();
}

/** GET /api/v2/user from the page (its session cookie, no token): the status and the login. */
const whoAmI = (page: Page) =>
  page.evaluate(async () => {
    const r = await fetch('/api/v2/user');
    return { status: r.status, body: (await r.json()) as { login?: string; error?: string } };
  });

describe('OIDC sign-in on a node (Chromium, a real provider)', function () {
  this.timeout(120_000);
  let provider: TestProvider;
  let d: TestDaemon;
  let browser: Browser;
  let dir: string;
  let context: BrowserContext;
  let page: Page;

  before(async () => {
    provider = await startTestProvider();
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-oidc-'));
    const secretFile = path.join(dir, 'client-secret');
    await writeFile(secretFile, `${CLIENT_SECRET}\n`, { mode: 0o600 });
    // The provider is down (not registered yet): the node starts all the same (discovery waits for the first sign-in).
    d = await startTestDaemon({
      config: {
        oidc: { issuer: provider.issuer, name: 'Test SSO', client_id: CLIENT_ID, client_secret_file: secretFile, role_claim: 'groups', role_map: ROLE_MAP },
      },
    });
    provider.claims.set('alice', { preferred_username: 'alice', groups: ['lab-viewers', 'lab-runners'] });
    provider.claims.set('bob', { preferred_username: 'bob', groups: ['marketing'] });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
    await provider?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    context = await browser.newContext();
    // The provider's development pages load a web font from the Internet: the tests reach nothing off this host.
    await context.route(/^https:\/\/fonts\./, (route) => route.abort());
    // evil.example answers (instead of failing to resolve), so a redirect there would visibly land there.
    await context.route(/^https?:\/\/evil\.example\//, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<title>evil</title>' }));
    page = await context.newPage();
  });
  afterEach(async () => {
    await context?.close();
  });
  /** The provider answers from the first test on (which starts with it down: discovery is then still to come); a test run alone brings it up. */
  let registered = false;
  const ensureUp = () => {
    if (!registered) provider.register([`${d.url}/app/oidc/callback`]);
    registered = true;
  };

  it('while the provider is down: a clear page (503) with a retry link, JSON for a program; once it is up, the retry signs in', async () => {
    await startSignIn(page, d.url, '/app/results');
    expect(await page.locator('h1').textContent()).to.equal('Sign-in failed');
    expect(await page.getByRole('alert').textContent()).to.match(/cannot be reached/);
    const api = await fetch(`${d.url}/app/sign-in/oidc`, { headers: { Accept: 'application/json' } });
    expect(api.status).to.equal(503);
    expect(((await api.json()) as { error: string }).error).to.equal('provider_unreachable');
    ensureUp();
    await page.getByRole('link', { name: 'Try again with Test SSO' }).click();
    await providerLogin(page, provider.issuer, 'alice');
    await page.waitForURL(`${d.url}/app/results`);
    expect((await whoAmI(page)).body.login).to.equal('alice');
  });

  it('signs in through the provider: lands on the wanted page, signed in, with the highest mapped role; tokens still work', async () => {
    ensureUp();
    await startSignIn(page, d.url, '/app/results?sort=date:asc');
    await providerLogin(page, provider.issuer, 'alice');
    await page.waitForURL(`${d.url}/app/results?sort=date:asc`);
    // The page itself was answered to the session (the header), not only a later fetch.
    expect(await page.locator('.who').textContent()).to.match(/Signed in as alice \(run\)/);
    expect((await whoAmI(page)).body.login).to.equal('alice');
    const cookies = await context.cookies(d.url);
    const session = cookies.find((c) => c.name === 'farmhand_session');
    expect(session, 'the session cookie').to.include({ httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(cookies.map((c) => c.name), 'the flow cookie is gone').not.to.include('farmhand_oidc');
    // CI's tokens are unchanged.
    const ci = await asUser(d, 'jenkins');
    const me = await ci.get('/api/v2/user');
    expect(me.status).to.equal(200);
    expect(me.body.login).to.equal('jenkins');
  });

  it('a callback whose state was tampered with is refused (400, a page with a retry link); the flow is then used up', async () => {
    ensureUp();
    await startSignIn(page, d.url, '/app/results');
    await page.waitForURL((u) => u.href.startsWith(provider.issuer));
    const flowCookie = (await context.cookies(d.url + '/app/oidc/callback')).find((c) => c.name === 'farmhand_oidc');
    expect(flowCookie, 'the flow cookie').to.include({ httpOnly: true, sameSite: 'Lax', path: '/app/oidc/callback' });
    const res = await page.goto(`${d.url}/app/oidc/callback?code=forged&state=tampered&iss=${encodeURIComponent(provider.issuer)}`);
    expect(res!.status()).to.equal(400);
    expect(await page.getByRole('alert').textContent()).to.match(/does not belong to the sign-in this browser started/);
    expect(await page.getByRole('link', { name: 'Try again with Test SSO' }).getAttribute('href')).to.match(/^\/app\/sign-in\/oidc\?next=/);
    expect((await whoAmI(page)).status).to.equal(403);
    // The genuine answer comes too late: the flow was taken by the tampered one, on the server (the
    // browser is given its flow cookie back, as a replay would carry it).
    await context.addCookies([flowCookie!]);
    await page.goBack();
    await providerLogin(page, provider.issuer, 'alice');
    await page.waitForURL((u) => u.href.startsWith(`${d.url}/app/oidc/callback`));
    expect(await page.getByRole('alert').textContent()).to.match(/not started in this browser|already used/);
    expect((await whoAmI(page)).status).to.equal(403);
  });

  it("the provider's answer to one browser, opened in another (login CSRF, an injected code), is refused", async () => {
    ensureUp();
    // Alice's browser signs in; the provider's answer (code, state) is seen on its way.
    let callback = '';
    page.on('request', (r) => {
      if (r.url().startsWith(`${d.url}/app/oidc/callback`)) callback = r.url();
    });
    await startSignIn(page, d.url, '/');
    await providerLogin(page, provider.issuer, 'alice');
    await waitFor(() => callback !== '', 'the callback to be requested');
    const other = await browser.newContext();
    try {
      const victim = await other.newPage();
      // No sign-in started in this browser: nothing to finish.
      let res = await victim.goto(callback);
      expect(res!.status()).to.equal(400);
      expect(await victim.getByRole('alert').textContent()).to.match(/not started in this browser/);
      // A sign-in of its own started: the answer belongs to another one (its state differs).
      await startSignIn(victim, d.url, '/');
      await victim.waitForURL((u) => u.href.startsWith(provider.issuer));
      res = await victim.goto(callback);
      expect(res!.status()).to.equal(400);
      expect(await victim.getByRole('alert').textContent()).to.match(/does not belong to the sign-in this browser started/);
      expect((await whoAmI(victim)).status).to.equal(403);
    } finally {
      await other.close();
    }
    // A program gets the JSON error.
    const api = await fetch(callback, { headers: { Accept: 'application/json' } });
    expect(api.status).to.equal(400);
    expect(((await api.json()) as { error: string }).error).to.equal('sign_in_expired');
  });

  it('a person none of whose groups is mapped is refused with a page saying so (403), not signed in', async () => {
    ensureUp();
    await startSignIn(page, d.url, '/app/results');
    await providerLogin(page, provider.issuer, 'bob');
    await page.waitForURL((u) => u.href.startsWith(`${d.url}/app/oidc/callback`));
    expect(await page.locator('h1').textContent()).to.equal('Sign-in failed');
    expect(await page.getByRole('alert').textContent()).to.match(/Your account \(bob\) has no role here/);
    expect((await whoAmI(page)).status).to.equal(403);
    expect((await context.cookies(d.url)).map((c) => c.name)).not.to.include('farmhand_session');
  });

  it('cancelling at the provider gives a page saying the provider refused (403), with a retry link', async () => {
    ensureUp();
    await startSignIn(page, d.url, '/app/results');
    await page.waitForURL((u) => u.href.startsWith(provider.issuer));
    await page.getByRole('link', { name: '[ Cancel ]' }).click();
    await page.waitForURL((u) => u.href.startsWith(`${d.url}/app/oidc/callback`));
    expect(await page.getByRole('alert').textContent()).to.match(/refused the sign-in: access_denied/);
    expect(await page.getByRole('link', { name: 'Try again with Test SSO' }).getAttribute('href')).to.equal('/app/sign-in/oidc?next=%2Fapp%2Fresults');
    expect((await whoAmI(page)).status).to.equal(403);
  });

  it("a node with the wrong client secret: the provider's refusal of the code exchange is a page (502), never a 500", async () => {
    ensureUp();
    const wrong = await startTestDaemon({
      config: { oidc: { issuer: provider.issuer, name: 'Test SSO', client_id: CLIENT_ID, client_secret: 'not-the-secret', default_role: 'read' } },
    });
    try {
      provider.register([`${d.url}/app/oidc/callback`, `${wrong.url}/app/oidc/callback`]);
      await startSignIn(page, wrong.url, '/app/results');
      const answered = page.waitForResponse((r) => r.url().startsWith(`${wrong.url}/app/oidc/callback`));
      await providerLogin(page, provider.issuer, 'alice');
      expect((await answered).status()).to.equal(502);
      expect(await page.locator('h1').textContent()).to.equal('Sign-in failed');
      expect(await page.getByRole('alert').textContent()).to.match(/could not be verified \(.*invalid_client/);
      expect(await page.getByRole('link', { name: 'Try again with Test SSO' }).getAttribute('href')).to.equal('/app/sign-in/oidc?next=%2Fapp%2Fresults');
      expect((await whoAmI(page)).status).to.equal(403);
    } finally {
      await wrong.stop();
    }
  });

  it('an unreadable client_secret_file stops start-up: exit 78 (a config error) naming the file', async () => {
    const missing = path.join(dir, 'no-such-secret');
    const err = await startTestDaemon({
      config: { oidc: { issuer: provider.issuer, client_id: CLIENT_ID, client_secret_file: missing, default_role: 'read' } },
    }).then(
      async (other) => {
        await other.stop();
        return undefined;
      },
      (e: unknown) => e as { exitCode?: number; message: string },
    );
    expect(err, 'start-up refused').to.not.equal(undefined);
    expect(err!.exitCode).to.equal(78);
    expect(err!.message).to.include(`oidc.client_secret_file: cannot read ${missing} (ENOENT)`);
  });

  for (const evil of ['//evil.example/x', 'https://evil.example/', '/..//evil.example']) {
    it(`next=${evil} does not lead off the node after signing in`, async () => {
      ensureUp();
      await page.goto(`${d.url}/app/sign-in/oidc?next=${encodeURIComponent(evil)}`);
      await providerLogin(page, provider.issuer, 'alice');
      await page.waitForURL(`${d.url}/`);
      expect(await page.title()).not.to.equal('evil');
      expect((await whoAmI(page)).body.login).to.equal('alice');
    });
  }
});
