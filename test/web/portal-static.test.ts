import { expect } from 'chai';
import type { Browser } from 'playwright-core';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';

describe('portal: static files and the page frame', function () {
  this.timeout(60_000);
  let d: TestDaemon;
  let browser: Browser;
  before(async () => {
    d = await startTestDaemon();
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  it('serves the client scripts as JavaScript modules and refuses names outside its set with a JSON 404', async () => {
    const js = await d.http.get('/static/api.js');
    expect(js.status).to.equal(200);
    expect(js.headers['content-type']).to.match(/^text\/javascript/);
    for (const bad of ['/static/..%2Fpackage.json', '/static/nope.js', '/static/%2e%2e%2fsession.ts']) {
      const res = await d.http.get(bad);
      expect(res.status, bad).to.equal(404);
      expect(res.body.error).to.equal('not_found');
    }
  });

  it('a real Chromium loads the api module from the static route', async () => {
    const page = await browser.newPage();
    // From a page of the site (its CSP allows scripts of /static/); a static file opened as a document is
    // sandboxed with nothing allowed (src/http/securityHeaders.ts), so no import works from there.
    await page.goto(`${d.url}/app/sign-in`);
    // A string the compiler cannot follow: the module is the browser's, fetched from the daemon.
    const ok = await page.evaluate(async (src) => {
      const m = (await import(src)) as { api: unknown };
      return typeof m.api;
    }, '/static/api.js');
    expect(ok).to.equal('function');
  });
});
