/**
 * A hostile node against the portal's web pages (docs/farm.md, "What a node can do to the portal"): a node
 * that answers its forwarded pages with `Set-Cookie` for the portal's session cookie, headers of its own, an
 * inline script and a script it serves itself that try to reserve another node as the reader, on a real
 * portal (PostgreSQL, sessions, reservations) in a real Chromium. The node is the farm's own protocol
 * stand-in (test/helpers/farmNodes.ts): a hostile node runs whatever it likes, so what matters is what it
 * sends over the protocol, and what it is sent.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext } from 'playwright-core';
import request from 'supertest';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import type { RequestHead } from '../../src/farm/protocol.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { SimNode, type SimReply, type SimRequest } from '../helpers/farmNodes.js';
import { waitFor } from '../helpers/wait.js';

const EVIL = 'evil';
const VICTIM = 'victim';
const RESULT = `/${EVIL}/abcd/1/2026-11-26_01.00.00`;
const PAGE = `/app/results${RESULT}`;
const SCRIPT = `/api/v1/result${RESULT}/artifacts/report.js`;
const HTML = 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8';

/** What the hostile script does with the token it was given (or finds in the page): reserve the victim as the reader. */
const attack = (marker: string, token: string) => `
  window.${marker} = true;
  const t = ${JSON.stringify(token)} || document.querySelector('meta[name="csrf-token"]')?.content || '';
  fetch('/api/v2/reservations', { method: 'POST', credentials: 'same-origin', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': t },
    body: JSON.stringify({ node_ids: [${JSON.stringify(VICTIM)}], message: 'as you' }) });`;

describe('farm portal: a hostile node`s pages and headers', function () {
  this.timeout(180_000);
  let farm: TestFarm;
  let browser: Browser;
  let token: string;
  let evil: SimNode;
  /** Every request the portal forwarded to the hostile node. */
  const heads: RequestHead[] = [];
  const contexts: BrowserContext[] = [];

  const hostile = (req: SimRequest, reply: SimReply): void => {
    heads.push(req.head);
    const given = req.head.headers['x-farmhand-csrf'] ?? '';
    const path = req.head.path.split('?')[0];
    if (path === PAGE) {
      reply.head(200, {
        'content-type': 'text/html; charset=utf-8',
        'set-cookie': 'farmhand_session=planted-by-the-node; Path=/; HttpOnly',
        'content-security-policy': "script-src 'unsafe-inline' *",
        'access-control-allow-origin': '*',
        'x-evil': 'yes',
      });
      reply.chunk(
        Buffer.from(
          `<!doctype html><html><head><title>a result</title></head><body><h1>a result</h1>` +
            `<script>${attack('__inline', given)}</script><script src="${SCRIPT}"></script></body></html>`,
        ),
      );
      reply.end();
      return;
    }
    if (path === SCRIPT) {
      reply.head(200, { 'content-type': 'text/javascript', 'set-cookie': 'farmhand_session=planted-by-the-node; Path=/' });
      reply.chunk(Buffer.from(attack('__served', given)));
      reply.end();
      return;
    }
    reply.head(404, { 'content-type': 'application/json' });
    reply.chunk(Buffer.from(JSON.stringify({ error: 'not_found', message: 'hostile node' })));
    reply.end();
  };

  const reservations = async () => Number((await farm.db.query<{ n: string }>('SELECT count(*) AS n FROM reservations')).rows[0]!.n);

  /** A session through the sign-in form: its cookie (`name=value`) and CSRF token. */
  async function signIn(): Promise<{ cookie: string; csrf: string }> {
    const res = await request(farm.url).post('/app/sign-in').type('form').send({ token, next: '/' });
    expect(res.status, res.text).to.equal(303);
    const line = ([] as string[]).concat(res.headers['set-cookie'] ?? []).find((c) => c.startsWith('farmhand_session='));
    const cookie = line!.split(';')[0]!;
    const page = await request(farm.url).get('/').set('Cookie', cookie).set('Accept', HTML);
    const csrf = /<meta name="csrf-token" content="([^"]+)"/.exec(page.text)?.[1];
    expect(csrf, 'the portal page`s csrf meta').to.be.a('string');
    return { cookie, csrf: csrf! };
  }

  before(async () => {
    farm = await startTestFarm();
    token = await farm.tokenFor('alice');
    await registerNode(farm.db, VICTIM);
    evil = new SimNode({ portalUrl: farm.url, nodeId: EVIL, credential: await registerNode(farm.db, EVIL), onRequest: hostile });
    await evil.connect();
    await waitFor(() => evil.welcome, { what: 'the hostile node`s welcome', timeoutMs: 30_000 });
    evil.startHeartbeats();
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    evil?.kill();
    await farm?.stop();
  });

  it('over HTTP: the node is told neither the reader`s name nor her CSRF token, and its answer carries only content headers and the portal`s CSP', async () => {
    const s = await signIn();
    heads.length = 0;
    const page = await request(farm.url).get(PAGE).set('Cookie', s.cookie).set('Accept', HTML);
    expect(page.status, page.text).to.equal(200);
    const script = await request(farm.url).get(SCRIPT).set('Cookie', s.cookie);
    expect(script.status, script.text).to.equal(200);
    expect(heads.map((h) => h.path.split('?')[0])).to.deep.equal([PAGE, SCRIPT]);
    for (const h of heads) {
      const seen = JSON.stringify(h);
      expect(seen, `what ${h.path} sent the node`).not.to.contain(s.csrf);
      expect(seen, `what ${h.path} sent the node`).not.to.contain(s.cookie.split('=')[1]);
      expect(h.user, `the user named to the node for ${h.path}`).to.equal('');
      expect(Object.keys(h.headers).map((k) => k.toLowerCase())).not.to.include.members(['x-farmhand-csrf', 'x-csrf-token', 'cookie', 'authorization']);
      // Only whether she is signed in, so the page shows its controls.
      expect(h.headers['x-farmhand-signed-in']).to.equal('1');
    }
    for (const res of [page, script]) {
      expect(res.headers['set-cookie'], 'Set-Cookie of the node').to.equal(undefined);
      expect(res.headers['x-evil']).to.equal(undefined);
      expect(res.headers['access-control-allow-origin']).to.equal(undefined);
      expect(res.headers['x-content-type-options']).to.equal('nosniff');
    }
    const csp = String(page.headers['content-security-policy']);
    expect(csp).not.to.contain('unsafe-inline');
    expect(csp).to.match(/(^|; )script-src http:\/\/127\.0\.0\.1:\d+\/static\/result\.js /);
    expect(csp).not.to.match(/script-src[^;]*'self'/);
    expect(String(script.headers['content-security-policy'])).to.match(/^sandbox; default-src 'none'/);
    // The portal's own scripts on the page get the token from the portal instead.
    const mine = await request(farm.url).get('/app/session').set('Cookie', s.cookie).set('Accept', 'application/json');
    expect(mine.body).to.deep.equal({ login: 'alice', csrf: s.csrf });
    expect(mine.headers['cache-control']).to.equal('no-store');
  });

  it('in Chromium: the node`s Set-Cookie does not replace the reader`s session, and neither its inline script nor a script it serves runs', async () => {
    const ctx = await browser.newContext();
    contexts.push(ctx);
    const page = await ctx.newPage();
    const violations: string[] = [];
    page.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) violations.push(m.text());
    });
    await page.goto(`${farm.url}/app/sign-in?next=${encodeURIComponent('/')}`);
    await page.getByLabel('Access token').fill(token);
    await Promise.all([page.waitForURL((u) => u.pathname === '/', { timeout: 30_000, waitUntil: 'commit' }), page.getByRole('button', { name: 'Sign in' }).click()]);
    const session = async () => (await ctx.cookies(farm.url)).find((c) => c.name === 'farmhand_session')?.value;
    const before = await session();
    expect(before, 'signed in').to.be.a('string');

    const res = await page.goto(`${farm.url}${PAGE}`);
    expect(res?.status()).to.equal(200);
    expect(await page.locator('h1').textContent()).to.equal('a result');
    expect(await session(), 'the session cookie after the node`s page').to.equal(before);
    // Both scripts are parsed before the load event: had either run, its marker would be set by now.
    expect(await page.evaluate(() => ({ inline: (window as { __inline?: boolean }).__inline ?? null, served: (window as { __served?: boolean }).__served ?? null }))).to.deep.equal({
      inline: null,
      served: null,
    });
    await waitFor(() => violations.length >= 2, { what: 'the browser to refuse both scripts (CSP)', timeoutMs: 30_000 });
    expect(await reservations(), 'no reservation made as the reader').to.equal(0);
    // The session is still hers.
    const who = await ctx.request.get(`${farm.url}/app/session`);
    expect(((await who.json()) as { login: string }).login).to.equal('alice');
  });
});
