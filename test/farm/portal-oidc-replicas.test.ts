// Sign-in with OpenID Connect through 3 portal replicas ("many") behind a real HAProxy balancing roundrobin, with no
// stickiness (docs/auth.md, "Sign-in with OpenID Connect", "Many portals"): a flow started on one replica finishes
// on another (its state, nonce and PKCE verifier are in PostgreSQL, `oidc_flows`), it is still used once whichever
// replica the answer is replayed to, and it still expires. Chromium, a real provider (oidc-provider), PostgreSQL.
import { expect } from 'chai';
import pg from 'pg';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { parsePortalConfig, type PortalConfigInput } from '../../src/farm/portal/config.js';
import { startPortal, type Portal } from '../../src/farm/portal/portal.js';
import { launchBrowser } from '../helpers/browser.js';
import { connectionString } from '../helpers/farmPortal.js';
import { capturingLogger } from '../helpers/logger.js';
import { CLIENT_ID, CLIENT_SECRET, startTestProvider, whoAmI, type TestProvider } from '../helpers/oidcProvider.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { SERVED_BY_HEADER, startReplicaSet, type ReplicaSet } from '../helpers/replicaFarm.js';

const START = '/app/sign-in/oidc';
const CALLBACK = '/app/oidc/callback';

interface Seen {
  /** The replica (r1..r3) that answered the start (and made the flow). */
  start: string;
  /** The replica that answered the provider's callback. */
  callback: string;
  status: number;
  /** The callback's path and query, and the Cookie header the browser sent with it (for the replay). */
  callbackPath: string;
  cookie: string;
}

describe('OIDC sign-in through 3 portal replicas behind HAProxy roundrobin (Chromium, a real provider, PostgreSQL)', function () {
  this.timeout(300_000);
  let cluster: TestPostgres;
  let provider: TestProvider;
  let set: ReplicaSet<Portal>;
  let db: pg.Pool;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;

  before(async () => {
    cluster = await startPostgres();
    provider = await startTestProvider();
    const logger = capturingLogger();
    const input = {
      database: connectionString(cluster),
      storage_dir: 'farm-storage',
      log_level: 'silent',
      rate_limit: { requests_per_second: 1000, burst: 10000 },
      oidc: { issuer: provider.issuer, name: 'Farm SSO', client_id: CLIENT_ID, client_secret: CLIENT_SECRET, role_claim: 'roles', role_map: { 'farm-tester': 'run' } },
    } as Partial<PortalConfigInput>;
    set = await startReplicaSet(3, (_name, fields) => startPortal(parsePortalConfig({ ...input, ...fields }), logger));
    // No public_url: the redirect URL is the address the browser used, HAProxy's.
    provider.register([`${set.url}${CALLBACK}`]);
    provider.claims.set('alice', { preferred_username: 'alice', roles: ['farm-tester'] });
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 1 });
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await db?.end();
    await set?.stop();
    await provider?.stop();
    await cluster?.stop();
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

  /** Start a sign-in through HAProxy, sign in at the provider, and report which replicas answered the start and the callback. */
  async function signIn(p: Page, login: string, next: string, beforeProvider?: () => Promise<void>): Promise<Seen> {
    const starts: string[] = [];
    p.on('response', (r) => {
      if (r.url().startsWith(`${set.url}${START}`)) starts.push(r.headers()[SERVED_BY_HEADER] ?? '?');
    });
    const callbackRequest = p.waitForRequest((r) => r.url().startsWith(`${set.url}${CALLBACK}`));
    const callbackResponse = p.waitForResponse((r) => r.url().startsWith(`${set.url}${CALLBACK}`));
    await p.goto(`${set.url}${START}?next=${encodeURIComponent(next)}`);
    await p.waitForURL((u) => u.href.startsWith(provider.issuer));
    await beforeProvider?.();
    await p.locator('input[name=login]').fill(login);
    await p.locator('input[name=password]').fill('any password');
    await p.locator('button[type=submit]').click();
    const req = await callbackRequest;
    const res = await callbackResponse;
    const u = new URL(req.url());
    expect(starts, 'the start answered once, through HAProxy').to.have.length(1);
    return {
      start: starts[0]!,
      callback: res.headers()[SERVED_BY_HEADER] ?? '?',
      status: res.status(),
      callbackPath: `${u.pathname}${u.search}`,
      cookie: (await req.allHeaders()).cookie ?? '',
    };
  }

  it('three sign-ins in a row all succeed, the provider\'s callback landing on another replica than the start at least once', async () => {
    const seen: Seen[] = [];
    for (let i = 0; i < 3; i++) {
      const ctx = i === 0 ? context : await browser.newContext();
      try {
        if (i > 0) await ctx.route(/^https:\/\/fonts\./, (route) => route.abort());
        const p = i === 0 ? page : await ctx.newPage();
        const s = await signIn(p, 'alice', '/app/results');
        seen.push(s);
        expect(s.status, `sign-in ${i + 1}: started on ${s.start}, callback on ${s.callback}`).to.equal(200);
        await p.waitForURL(`${set.url}/app/results`);
        expect(await whoAmI(p)).to.deep.equal({ status: 200, login: 'alice' });
      } finally {
        if (i > 0) await ctx.close();
      }
    }
    console.log(`      start -> callback: ${seen.map((s) => `${s.start} -> ${s.callback}`).join(', ')}`);
    for (const s of seen) expect(['r1', 'r2', 'r3']).to.include.members([s.start, s.callback]);
    expect(seen.some((s) => s.start !== s.callback), 'a callback answered by another replica than its start').to.equal(true);
    // Every flow was taken: nothing waits in the table.
    expect((await db.query('SELECT count(*)::int AS n FROM oidc_flows')).rows[0].n).to.equal(0);
  });

  it('a callback replayed after a successful sign-in is refused by every replica, also the ones that neither started nor answered it (used once)', async () => {
    const s = await signIn(page, 'alice', '/');
    expect(s.status).to.equal(200);
    await page.waitForURL(`${set.url}/`);
    expect(s.cookie, 'the browser sent the flow cookie with the callback').to.match(/farmhand_oidc=/);
    // An attacker who copied the whole callback request (its code, its state, the browser's flow cookie) sends it again, to each replica.
    const others = set.replicas.filter((_, k) => `r${k + 1}` !== s.callback);
    expect(others).to.have.length(2);
    for (const [k, r] of set.replicas.entries()) {
      const res = await fetch(`${r.url}${s.callbackPath}`, { headers: { cookie: s.cookie, accept: 'application/json' } });
      const body = (await res.json()) as { error?: string };
      expect([res.status, body.error], `replay at r${k + 1}`).to.deep.equal([400, 'sign_in_expired']);
      expect(res.headers.get('set-cookie') ?? '', `replay at r${k + 1}: no session`).not.to.match(/farmhand_session=[^;]/);
    }
  });

  it('the same callback sent to two replicas at once signs in once: one answer makes a session, the other finds no flow', async () => {
    // The provider's redirect to the callback is held back: Playwright routes no redirect hop, so the test follows the
    // provider's redirects itself (the context's request client shares the browser's cookies) and keeps the one that
    // would send the browser to the callback; then it sends that callback, with the browser's flow cookie, to r1 and
    // r2 together.
    let held: { path: string; cookie: string } | undefined;
    await context.route((u) => u.href.startsWith(provider.issuer), async (route) => {
      let res = await route.fetch({ maxRedirects: 0 });
      let at = route.request().url();
      for (let hops = 0; hops < 10; hops++) {
        const location = res.headers().location;
        if (location === undefined) break;
        const target = new URL(location, at);
        if (target.href.startsWith(`${set.url}${CALLBACK}`)) {
          const cookies = await context.cookies(target.href); // the flow cookie is sent to the callback path only
          held = { path: `${target.pathname}${target.search}`, cookie: cookies.map((c) => `${c.name}=${c.value}`).join('; ') };
          await route.fulfill({ status: 200, contentType: 'text/plain', body: 'held back by the test' });
          return;
        }
        if (!target.href.startsWith(provider.issuer)) break;
        at = target.href;
        res = await context.request.get(at, { maxRedirects: 0 });
      }
      await route.fulfill({ response: res });
    });
    await page.goto(`${set.url}${START}?next=%2F`);
    await page.waitForURL((u) => u.href.startsWith(provider.issuer));
    await page.locator('input[name=login]').fill('alice');
    await page.locator('input[name=password]').fill('any password');
    await page.locator('button[type=submit]').click();
    await page.getByText('held back by the test').waitFor();
    expect(held?.cookie).to.match(/farmhand_oidc=/);
    const answers = await Promise.all(
      [set.replicas[0]!, set.replicas[1]!].map(async (r) => {
        const res = await fetch(`${r.url}${held!.path}`, { headers: { cookie: held!.cookie, accept: 'application/json' } });
        const text = await res.text();
        return { status: res.status, session: /farmhand_session=[^;]/.test(res.headers.get('set-cookie') ?? ''), error: res.status === 200 ? undefined : (JSON.parse(text) as { error: string }).error };
      }),
    );
    answers.sort((a, b) => a.status - b.status);
    expect(answers).to.deep.equal([
      { status: 200, session: true, error: undefined },
      { status: 400, session: false, error: 'sign_in_expired' },
    ]);
  });

  it('a flow past its expiry is refused at the callback, whichever replica takes it; the row is gone', async () => {
    const s = await signIn(page, 'alice', '/', async () => {
      // The flow is in the table: make it older than its 10 minutes (the database's clock decides).
      const { rowCount } = await db.query("UPDATE oidc_flows SET expires_at = now() - interval '1 second'");
      expect(rowCount).to.equal(1);
    });
    expect(s.status).to.equal(400);
    expect(await page.getByRole('alert').textContent()).to.match(/took longer than 10 minutes/);
    expect((await whoAmI(page)).status).to.equal(403);
    expect((await db.query('SELECT count(*)::int AS n FROM oidc_flows')).rows[0].n).to.equal(0);
  });
});
