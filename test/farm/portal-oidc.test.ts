// Sign-in with OpenID Connect on the farm's portal (docs/auth.md, "Sign-in with OpenID Connect"), in
// Chromium, against a real provider (oidc-provider) and a real portal on a throwaway PostgreSQL: the
// person is recorded in `users` with the role from the claims, which the provider keeps deciding.
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ConfigError } from '../../src/config/load.js';
import { launchBrowser } from '../helpers/browser.js';
import { client } from '../helpers/contract.js';
import { connectionString, startTestPortal, type TestPortal } from '../helpers/farmPortal.js';
import { CLIENT_ID, CLIENT_SECRET, startTestProvider, whoAmI, type TestProvider } from '../helpers/oidcProvider.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

async function signIn(page: Page, base: string, issuer: string, login: string, next: string): Promise<void> {
  await page.goto(`${base}/app/sign-in?next=${encodeURIComponent(next)}`);
  await page.getByRole('link', { name: 'Sign in with Farm SSO' }).click();
  await page.waitForURL((u) => u.href.startsWith(issuer));
  await page.locator('input[name=login]').fill(login);
  await page.locator('input[name=password]').fill('any password');
  await page.locator('button[type=submit]').click();
}

describe('OIDC sign-in on the portal (Chromium, a real provider, PostgreSQL)', function () {
  this.timeout(180_000);
  let cluster: TestPostgres;
  let provider: TestProvider;
  let t: TestPortal;
  let db: pg.Pool;
  let browser: Browser;
  let dir: string;
  let context: BrowserContext;
  let page: Page;
  const roleOf = async (user: string) => (await db.query<{ role: string }>('SELECT role FROM users WHERE username = $1', [user])).rows[0]?.role;

  before(async () => {
    cluster = await startPostgres();
    provider = await startTestProvider();
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-oidc-'));
    const secretFile = path.join(dir, 'client-secret');
    await writeFile(secretFile, CLIENT_SECRET, { mode: 0o600 });
    t = await startTestPortal(cluster, {
      oidc: {
        issuer: provider.issuer,
        name: 'Farm SSO',
        client_id: CLIENT_ID,
        client_secret_file: secretFile,
        role_claim: 'roles',
        role_map: { 'farm-admin': 'admin', 'farm-tester': 'run' },
        // The portal's choice in this test: a person with no mapped role may read (the node's test refuses them).
        default_role: 'read',
      },
    });
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 1 });
    provider.claims.set('alice', { preferred_username: 'alice', roles: ['farm-tester'] });
    provider.claims.set('carol', { email: 'carol@lab.example', roles: ['marketing'] });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await db?.end();
    await t?.stop();
    await provider?.stop();
    await cluster?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });
  beforeEach(async () => {
    context = await browser.newContext();
    // The provider's development pages load a web font from the Internet: the tests reach nothing off this host.
    await context.route(/^https:\/\/fonts\./, (route) => route.abort());
    page = await context.newPage();
  });
  afterEach(async () => {
    await context?.close();
  });
  /** The provider answers from the first test on (which starts with it down: discovery is then still to come); a test run alone brings it up. */
  let registered = false;
  const ensureUp = () => {
    if (!registered) provider.register([`${t.portal.url}/app/oidc/callback`]);
    registered = true;
  };

  it('provider down: the portal started and the sign-in says so; once up, alice signs in, lands on the wanted page with her role, and is in users', async () => {
    const url = t.portal.url;
    await page.goto(`${url}/app/sign-in?next=${encodeURIComponent('/app/results')}`);
    await page.getByRole('link', { name: 'Sign in with Farm SSO' }).click();
    expect(await page.getByRole('alert').textContent()).to.match(/cannot be reached/);
    // The operator is told too.
    expect(t.logger.entries.find((e) => e.msg.startsWith('OIDC: the identity provider cannot be reached'))).to.include({ level: 'warn' });
    ensureUp();
    expect(await roleOf('alice')).to.equal(undefined);
    await signIn(page, url, provider.issuer, 'alice', '/app/results');
    await page.waitForURL(`${url}/app/results`);
    expect(await page.locator('.who').textContent()).to.match(/Signed in as alice \(run\)/);
    expect(await whoAmI(page)).to.deep.equal({ status: 200, login: 'alice' });
    expect(await roleOf('alice')).to.equal('run');
  });

  it("the provider's role replaces one the farm's administrator set, at the next sign-in", async () => {
    ensureUp();
    const url = t.portal.url;
    await db.query("INSERT INTO users (username, role) VALUES ('alice', 'admin') ON CONFLICT (username) DO UPDATE SET role = 'admin'");
    expect(await roleOf('alice')).to.equal('admin');
    await signIn(page, url, provider.issuer, 'alice', '/');
    await page.waitForURL(`${url}/`);
    expect(await page.locator('.who').textContent()).to.match(/Signed in as alice \(run\)/);
    expect(await roleOf('alice')).to.equal('run');
  });

  it("a role the provider changes at a sign-in is a user.role entry of the audit trail (who, before, after, the provider); a sign-in that changes nothing writes none", async () => {
    ensureUp();
    const url = t.portal.url;
    const roleEntries = async () =>
      (await db.query<{ who: string; via: string; from_addr: string | null; target: string; detail: Record<string, unknown>; outcome: number }>(
        "SELECT who, via, from_addr, target, detail, outcome FROM audit WHERE action = 'user.role' AND target = 'alice' ORDER BY id",
      )).rows;
    // The farm's administrator gave alice `read` (straight into the table: no entry of its own here).
    await db.query("INSERT INTO users (username, role) VALUES ('alice', 'read') ON CONFLICT (username) DO UPDATE SET role = 'read'");
    const before = (await roleEntries()).length;
    await signIn(page, url, provider.issuer, 'alice', '/');
    await page.waitForURL(`${url}/`);
    expect(await roleOf('alice')).to.equal('run');
    const entries = (await roleEntries()).slice(before);
    expect(entries).to.have.length(1);
    expect(entries[0]).to.deep.include({ who: 'alice', via: 'oidc', target: 'alice', outcome: 200 });
    expect(entries[0]!.detail).to.deep.equal({ before: 'read', after: 'run', by: 'identity provider', issuer: provider.issuer });
    expect(entries[0]!.from_addr).to.match(/127\.0\.0\.1$/);
    // Administrators read it through the API like any other entry (the document knows `via: oidc`).
    const api = await client(url).get('/api/v2/audit?action=user.role&user=alice').set('Authorization', `token ${t.tokenFor('ops')}`);
    expect(api.status, api.text).to.equal(200);
    expect(api.body.entries[0]).to.deep.include({ who: 'alice', via: 'oidc', action: 'user.role', target: 'alice' });
    // Signing in again (a new browser) with the same role changes nothing, and writes nothing.
    const again = await browser.newContext();
    try {
      await again.route(/^https:\/\/fonts\./, (route) => route.abort());
      const p2 = await again.newPage();
      await signIn(p2, url, provider.issuer, 'alice', '/');
      await p2.waitForURL(`${url}/`);
      expect(await whoAmI(p2)).to.deep.equal({ status: 200, login: 'alice' });
    } finally {
      await again.close();
    }
    expect((await roleEntries()).slice(before)).to.have.length(1);
  });

  it('a person with no mapped role gets the default role (this config: read); the user name falls back to email', async () => {
    ensureUp();
    const url = t.portal.url;
    await signIn(page, url, provider.issuer, 'carol', '/app/results');
    await page.waitForURL(`${url}/app/results`);
    expect(await page.locator('.who').textContent()).to.match(/Signed in as carol@lab\.example \(read\)/);
    expect(await roleOf('carol@lab.example')).to.equal('read');
  });

  it('an unreadable client_secret_file: the portal does not start (a ConfigError: `farmhand portal` exits 78)', async () => {
    const missing = path.join(dir, 'no-such-secret');
    const err = await startTestPortal(cluster, { oidc: { issuer: provider.issuer, client_id: CLIENT_ID, client_secret_file: missing, default_role: 'read' } }).then(
      async (other) => {
        await other.stop();
        return undefined;
      },
      (e: unknown) => e as Error,
    );
    expect(err).to.be.instanceOf(ConfigError);
    expect(err!.message).to.include(`oidc.client_secret_file: cannot read ${missing} (ENOENT)`);
  });

  it('a tampered state is refused; next never leads off the portal', async () => {
    ensureUp();
    const url = t.portal.url;
    await page.goto(`${url}/app/sign-in/oidc?next=${encodeURIComponent('/app/results')}`);
    await page.waitForURL((u) => u.href.startsWith(provider.issuer));
    const res = await page.goto(`${url}/app/oidc/callback?code=forged&state=tampered`);
    expect(res!.status()).to.equal(400);
    expect(await page.getByRole('alert').textContent()).to.match(/does not belong to the sign-in this browser started/);
    expect((await whoAmI(page)).status).to.equal(403);
    await page.goto(`${url}/app/sign-in/oidc?next=${encodeURIComponent('//evil.example/x')}`);
    await page.waitForURL((u) => u.href.startsWith(provider.issuer));
    await page.locator('input[name=login]').fill('alice');
    await page.locator('input[name=password]').fill('any password');
    await page.locator('button[type=submit]').click();
    await page.waitForURL(`${url}/`);
    expect(await whoAmI(page)).to.deep.equal({ status: 200, login: 'alice' });
    // Nothing of the flows reached the log: the client secret, a state, a code.
    const logged = t.logger.text();
    expect(logged).not.to.include(CLIENT_SECRET);
    expect(logged).not.to.include('tampered');
    expect(logged).not.to.include('forged');
  });
});
