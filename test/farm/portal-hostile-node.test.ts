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
import { ARTIFACT_CSP, DEFAULT_CSP } from '../../src/http/securityHeaders.js';
import type { FarmEvent } from '../../src/core/events.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { SimNode, type SimHead, type SimReply, type SimRequest } from '../helpers/farmNodes.js';
import { SseClient } from '../helpers/sse.js';
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
  const heads: SimHead[] = [];
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
      const names = Object.keys(h.headers).map((k) => k.toLowerCase());
      for (const name of ['x-farmhand-csrf', 'x-csrf-token', 'cookie', 'authorization']) expect(names, `${h.path} passed ${name}`).not.to.include(name);
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
    expect(script.headers['content-security-policy'], 'a file of the node: the artifact sandbox').to.equal(ARTIFACT_CSP);
    const json = await request(farm.url).get(`/api/v1/result${RESULT}/nothing-here`).set('Cookie', s.cookie);
    expect(json.status).to.equal(404);
    expect(json.headers['content-security-policy'], 'JSON of the node: the answers` default').to.equal(DEFAULT_CSP);
    // The portal's own scripts on the page get the token from the portal instead.
    const mine = await request(farm.url).get('/app/session').set('Cookie', s.cookie).set('Accept', 'application/json');
    expect(mine.body).to.deep.equal({ login: 'alice', csrf: s.csrf, role: 'run' });
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

  describe('ids that are not the node`s own', () => {
    const OTHER_JOB = `/${VICTIM}/beef/1`;
    const OTHER_RESULT = `${OTHER_JOB}/2026-11-26_02.00.00`;
    const OWN_JOB = `/${EVIL}/abcd/9`;
    const at = '2026-11-26T02:00:00.000Z';
    let n = 0;
    /** An event as a node's hub makes it (id `<boot>-<n>`). */
    const ev = (type: FarmEvent['type'], data: Record<string, unknown>) => ({ id: `mx0evl-${++n}`, type, time: at, data: { node_id: EVIL, ...data } }) as FarmEvent;
    const finished = (job_uid: string, result_id: string) => ({ job_uid, result_id, test_case: 't', result: 'pass', failure_reason: null, infrastructure_error: null, start_time: at, end_time: at, duration: 0 });

    it('events naming another node`s job or result are neither stored in the outbox nor sent on /api/v2/events; the node`s own are', async () => {
      const sse = await SseClient.open(`${farm.url}/api/v2/events`, { Authorization: `token ${token}` });
      try {
        expect(sse.res.statusCode).to.equal(200);
        const foreign = [
          ev('run.started', { job_uid: OTHER_JOB, result_id: OTHER_RESULT, test_case: 't', start_time: at }),
          ev('run.finished', finished(OTHER_JOB, OTHER_RESULT)),
          ev('job.exited', { job_uid: OTHER_JOB, end_time: at, result_counts: { pass: 1, fail: 0, error: 0, total: 1 } }),
          ev('key.pressed', { key: 'KEY_OK', remote: 'r', hold_ms: 0, source: 'script', username: null, result_id: OTHER_RESULT }),
          // Its own job, another node's result; an id that is no id at all.
          ev('run.finished', finished(OWN_JOB, OTHER_RESULT)),
          ev('run.started', { job_uid: OWN_JOB, result_id: `/${EVIL}/abcd/8/2026-11-26_02.00.00`, test_case: 't', start_time: at }),
          ev('job.exited', { job_uid: 'not an id', end_time: at, result_counts: { pass: 0, fail: 0, error: 0, total: 0 } }),
        ];
        const own = [
          ev('job.started', { job_uid: OWN_JOB, username: 'alice', test_cases: ['t'], test_pack_sha: 'a'.repeat(40), test_pack_branch: null, category: 'c', soak: 'none', remote_control: null, tags: {}, start_time: at }),
          ev('key.pressed', { key: 'KEY_OK', remote: 'r', hold_ms: 0, source: 'api', username: 'alice', result_id: null }),
        ];
        for (const e of [...foreign, ...own]) evil.event(e);
        // The node's events are handled in its order: once its last is on the stream, every earlier one was decided.
        const dataOf = (m: { data: Record<string, unknown> }) => m.data.data as Record<string, unknown>;
        await sse.next((m) => m.event === 'key.pressed' && dataOf(m).node_id === EVIL && dataOf(m).username === 'alice', 'the hostile node`s own last event on the stream');
        const mine = sse.messages.filter((m) => dataOf(m).node_id === EVIL && m.event !== 'node.online').map((m) => m.event);
        expect(mine, 'what the stream carried of the node').to.deep.equal(['job.started', 'key.pressed']);
        expect(JSON.stringify(sse.messages)).not.to.contain(`/${VICTIM}/`);
        const { rows } = await farm.db.query<{ type: string; data: Record<string, unknown> }>(`SELECT type, data FROM events_outbox WHERE node_id = $1 AND node_event_id LIKE 'mx0evl-%' ORDER BY seq`, [EVIL]);
        expect(rows.map((r) => r.type)).to.deep.equal(['job.started', 'key.pressed']);
        expect(JSON.stringify(rows)).not.to.contain(`/${VICTIM}/`);
        expect(farm.portal.hub.stats.foreignEventsRefused).to.equal(foreign.length);
        // Handled all the same: the node's cursor is past them, it is not asked for them again.
        const cursor = await farm.db.query<{ event_id: string }>('SELECT event_id FROM node_event_cursors WHERE node_id = $1', [EVIL]);
        expect(cursor.rows[0]?.event_id).to.equal(own[own.length - 1]!.id);
        // The job of its own is kept; nothing of the other's.
        expect((await farm.portal.jobs.get(OWN_JOB))?.job.result_counts.total).to.equal(0);
        expect(await farm.portal.jobs.get(OTHER_JOB)).to.equal(undefined);
      } finally {
        sse.close();
      }
    });
  });
});
