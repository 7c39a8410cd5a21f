// What another web site can make a person's browser do (docs/auth.md, "Requests from other sites";
// issue 22): sign-in's `next` never leads off the node, and a page of another site cannot make the
// browser start a job (a text/plain form, a no-cors fetch), while programs without Origin are unchanged.
// In a real Chromium, with the other site served by a second local http server on another host name.
import Router from '@koa/router';
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext } from 'playwright-core';
import request from 'supertest';
import type { FarmEvent } from '../../src/core/events.js';
import { createPortalApp } from '../../src/farm/portal/app.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { capturingLogger } from '../helpers/logger.js';

const WAIT = { timeout: 30_000 };
const PASS = 'tests/basic.py::test_pass';
const PUBLIC = 'https://farm.example';
/** Every `next` a browser could read as another site, or as script. */
const TRICKY_NEXT = [
  '/..//evil.example',
  '//evil.example',
  '/\\evil.example',
  'https://evil.example',
  '/%2e%2e//evil.example',
  '/.%2e//evil.example/x',
  '/a/../..//evil.example',
  'javascript:alert(document.domain)',
  '\t//evil.example',
];

describe('web: requests from other sites, and where sign-in leads', function () {
  this.timeout(300_000);
  let d: TestDaemon;
  let browser: Browser;
  let evil: http.Server;
  let evilUrl: string;
  let attackPage = '';
  const events: FarmEvent[] = [];
  const contexts: BrowserContext[] = [];

  before(async () => {
    d = await startTestDaemon({ config: { public_url: PUBLIC } });
    await waitOnline(d);
    d.daemon.services.events!.hub.subscribe((e) => events.push(e));
    evil = http.createServer((_req, res) => {
      res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
      res.end(attackPage);
    });
    await new Promise<void>((resolve) => evil.listen(0, resolve));
    // Another host name than the daemon's 127.0.0.1: a different site, as the browser sees it.
    evilUrl = `http://localhost:${(evil.address() as AddressInfo).port}`;
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await new Promise((resolve) => evil?.close(resolve));
    await d?.stop();
  });

  async function newContext(): Promise<BrowserContext> {
    const ctx = await browser.newContext();
    contexts.push(ctx);
    // evil.example answers (instead of failing to resolve), so a redirect there would visibly land there.
    await ctx.route(/^https?:\/\/evil\.example\//, (route) => route.fulfill({ status: 200, contentType: 'text/html', body: '<title>evil</title>' }));
    return ctx;
  }

  it('sign-in answers a Location of this node for every tricky next (HTTP)', async () => {
    const alice = await asUser(d, 'alice');
    for (const next of TRICKY_NEXT) {
      const res = await request(d.url).post('/app/sign-in').type('form').send({ token: alice.token, next });
      expect(res.status, next).to.equal(303);
      expect(res.headers.location, next).to.equal('/');
      const form = await request(d.url).get('/app/sign-in').query({ next }).set('Accept', 'text/html');
      expect(form.text, next).to.contain('name="next" value="/"');
    }
    const fine = await request(d.url).post('/app/sign-in').type('form').send({ token: alice.token, next: '/app/results?q=a//b' });
    expect(fine.headers.location).to.equal('/app/results?q=a//b');
  });

  it('in Chromium, signing in with each tricky next ends on the node, never on another site', async () => {
    const alice = await asUser(d, 'alice');
    const ctx = await newContext();
    const page = await ctx.newPage();
    const own = new URL(d.url).origin;
    for (const next of TRICKY_NEXT) {
      await page.goto(`${d.url}/app/sign-in?next=${encodeURIComponent(next)}`);
      // The form as anything else could post it (a bookmark, an old page, a proxy that keeps the query): the raw next.
      await page.locator('input[name="next"]').evaluate((el, v) => ((el as HTMLInputElement).value = v), next);
      await page.getByLabel('Access token').fill(alice.token);
      // Before the fix Chromium did not land on evil.example only because the page's CSP (form-action 'self')
      // refuses a form's redirect to another site: the sign-in was aborted and the person left stranded.
      const [landed] = await Promise.all([
        page.waitForURL((u) => !u.pathname.startsWith('/app/sign-in'), WAIT).then(
          () => 'landed',
          (e: Error) => e.message.split('\n')[0],
        ),
        page.getByRole('button', { name: 'Sign in' }).click(),
      ]);
      expect(landed, `${next}: signing in comes back to a page`).to.equal('landed');
      await page.waitForLoadState('load');
      expect(new URL(page.url()).origin, `${next} led to ${page.url()}`).to.equal(own);
      expect(new URL(page.url()).pathname, next).to.equal('/');
    }
  });

  it('unsafe methods with a foreign Origin or Sec-Fetch-Site are refused on every path; programs without them are unchanged (HTTP)', async () => {
    const body = { test_pack_revision: 'main' }; // no test_cases: a 400 when it gets through
    const refused: Array<[string, string]> = [
      ['Origin', 'http://evil.example'],
      ['Origin', 'null'],
      ['Origin', 'http://127.0.0.1:1'],
      ['Sec-Fetch-Site', 'cross-site'],
      ['Sec-Fetch-Site', 'same-site'],
    ];
    for (const [h, v] of refused) {
      for (const [method, path] of [
        ['post', '/api/v1/run_tests'],
        ['post', '/api/v2/reservations'],
        ['delete', '/api/v2/reservations/1'],
        ['post', '/app/sign-out'],
      ] as const) {
        const res = await request(d.url)[method](path).set(h, v).set('Content-Type', 'text/plain').send(JSON.stringify(body));
        expectError(res, 403, 'cross_site_request', `${method} ${path} with ${h}: ${v}`);
      }
    }
    // Reads stay open to anyone: nothing changes.
    expect((await request(d.url).get('/api/v1/results').set('Origin', 'http://evil.example').set('Sec-Fetch-Site', 'cross-site')).status).to.equal(200);
    // Our own origin (the Host asked for, or public_url), a typed address, and programs that send neither header get through.
    const through: Array<Record<string, string>> = [{}, { Origin: new URL(d.url).origin }, { Origin: PUBLIC }, { 'Sec-Fetch-Site': 'same-origin' }, { 'Sec-Fetch-Site': 'none' }];
    for (const headers of through) {
      const res = await request(d.url).post('/api/v1/run_tests').set(headers).send(body);
      expectError(res, 400, 'invalid_request', JSON.stringify(headers));
    }
    // COMPAT.md: JSON without a Content-Type, or as text/plain, from a program: still parsed.
    const plain = await request(d.url).post('/api/v1/run_tests').set('Content-Type', 'text/plain').send(JSON.stringify(body));
    expectError(plain, 400, 'invalid_request');
    expect(plain.body.message).to.match(/test_cases/);
  });

  it("the portal's app refuses them too", async () => {
    const r = new Router();
    r.post('/api/v1/anything', (ctx) => {
      ctx.body = { ok: true };
    });
    const app = createPortalApp({
      logger: capturingLogger(),
      tokens: { verify: () => undefined },
      rateLimit: { requests_per_second: 1e6, burst: 1e6, artifact_burst: 1e6 },
      maxBodyBytes: 1024,
      publicUrl: PUBLIC,
      routers: [r],
    });
    const server = http.createServer(app.callback());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      expectError(await request(url).post('/api/v1/anything').set('Origin', 'http://evil.example').send('{}'), 403, 'cross_site_request');
      expectError(await request(url).post('/api/v1/anything').set('Sec-Fetch-Site', 'cross-site').send('{}'), 403, 'cross_site_request');
      expect((await request(url).post('/api/v1/anything').set('Origin', PUBLIC).send('{}')).body).to.deep.equal({ ok: true });
      expect((await request(url).post('/api/v1/anything').send('{}')).body).to.deep.equal({ ok: true });
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('in Chromium, a page of another site that posts a text/plain form and a no-cors fetch to run_tests starts no job', async () => {
    const json = JSON.stringify({ test_pack_revision: 'main', test_cases: [PASS] });
    // The classic trick: the field's name is the JSON up to a string, its value closes it ("name=value").
    const name = json.slice(0, -1) + ',"x":"';
    attackPage = `<!doctype html><title>cat pictures</title>
<form id="f" method="POST" enctype="text/plain" action="${d.url}/api/v1/run_tests"><input type="hidden" name='${name}' value='"}'></form>
<script>
  fetch(${JSON.stringify(`${d.url}/api/v1/run_tests`)}, { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body: ${JSON.stringify(json)} })
    .then(() => (document.title = 'fetched'), (e) => (document.title = 'fetch failed: ' + e))
    .finally(() => document.getElementById('f').submit());
</script>`;
    const ctx = await newContext();
    const page = await ctx.newPage();
    const answered = page.waitForResponse((r) => r.url() === `${d.url}/api/v1/run_tests` && r.request().resourceType() === 'document', WAIT);
    await page.goto(`${evilUrl}/`);
    const res = await answered;
    expect(res.status()).to.equal(403);
    expect(((await res.json()) as { error: string }).error).to.equal('cross_site_request');
    // The check that nothing started: a program's run (no Origin) now is the node's first job event.
    const before = events.length;
    const ok = await request(d.url).post('/api/v1/run_tests').send(json);
    expect(ok.status, ok.text).to.equal(200);
    const job = await waitForJob(d, ok.body.job_uid as string);
    const started = events.filter((e) => e.type === 'job.started');
    expect(started.map((e) => (e.data as { job_uid: string }).job_uid)).to.deep.equal([job.job_uid]);
    expect(events.slice(0, before).some((e) => e.type.startsWith('job.')), 'no job event from the other site').to.equal(false);
  });
});
