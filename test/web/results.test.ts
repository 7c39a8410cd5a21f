import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const WAIT = { timeout: 30_000 };

describe('portal: the results list', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let browser: Browser;
  let alice: Awaited<ReturnType<typeof asUser>>;

  async function runJob(testCases: string[], category = 'portal'): Promise<string> {
    const res = await alice.post('/api/v2/run_tests').send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: testCases, category });
    expect(res.status, res.text).to.equal(200);
    return res.body.job_uid as string;
  }

  async function apiIds(query: Record<string, string>): Promise<string[]> {
    const res = await alice.get('/api/v2/results').query(query);
    expect(res.status, res.text).to.equal(200);
    return (res.body as { result_id: string }[]).map((r) => r.result_id);
  }

  const rowIds = (page: Page) => page.$$eval('#results tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-result-id') ?? ''));

  before(async () => {
    d = await startTestDaemon();
    browser = await launchBrowser();
    alice = await asUser(d, 'alice');
    await waitForJob(d, await runJob(['tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/basic.py::test_error'], 'nightly'));
    await waitForJob(d, await runJob(['tests/basic.py::test_ui_failure', 'tests/basic.py::test_pass'], 'smoke'));
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  it('a filter typed in the box gives exactly the matching rows, and the URL holds it', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/app/results`);
    expect(await rowIds(page)).to.have.length(5);
    await page.getByLabel('Filter').fill('result:fail category:nightly');
    await Promise.all([page.waitForURL(/filter=/, WAIT), page.getByLabel('Filter').press('Enter')]);
    expect(new URL(page.url()).searchParams.get('filter')).to.equal('result:fail category:nightly');
    const ids = await rowIds(page);
    expect(ids).to.deep.equal(await apiIds({ filter: 'result:fail category:nightly' }));
    expect(ids).to.have.length(1);
    expect(await page.locator('#results tbody tr td.testcase').allTextContents()).to.deep.equal(['tests/basic.py::test_fail']);
    // The row's outcome is written, not only coloured, and links to the result page.
    expect(await page.locator('#results tbody tr .outcome').innerText()).to.contain('fail');
    expect(await page.locator('#results tbody tr td.testcase a').getAttribute('href')).to.equal(`/app/results${ids[0]}`);
    // Shared URL: a new page on it shows the same rows.
    const other = await browser.newPage();
    await other.goto(page.url());
    expect(await rowIds(other)).to.deep.equal(ids);
    await page.close();
    await other.close();
  });

  it('free text and negation behave as the API', async () => {
    const page = await browser.newPage();
    for (const filter of ['-result:pass', 'arithmetic', 'testcase:*::test_pass category:smoke']) {
      await page.goto(`${d.url}/app/results?filter=${encodeURIComponent(filter)}`);
      expect(await rowIds(page), filter).to.deep.equal(await apiIds({ filter }));
    }
    await page.close();
  });

  it('a bad filter is a 400 page with the error and the bad term next to the box', async () => {
    const page = await browser.newPage();
    const res = await page.goto(`${d.url}/app/results?filter=${encodeURIComponent('result:pass colour:red')}`);
    expect(res?.status()).to.equal(400);
    const err = page.locator('#filter-error');
    await err.waitFor(WAIT);
    expect(await err.locator('.bad-term').innerText()).to.equal('colour:red');
    expect(await err.innerText()).to.contain('unknown key');
    expect(await page.getByLabel('Filter').inputValue()).to.equal('result:pass colour:red');
    expect(await page.getByLabel('Filter').getAttribute('aria-describedby')).to.equal('filter-error');
    // The same answers for the contract check: a page to a client asking for HTML, the JSON error to others.
    const html = await d.http.get('/app/results').set('Accept', 'text/html').query({ filter: 'date:2026-02-30' });
    expect(html.status).to.equal(400);
    expect(html.type).to.equal('text/html');
    expect(html.text).to.contain('date:2026-02-30');
    const raw = await d.http.get('/app/results').query({ filter: 'date:2026-02-30' });
    expect(raw.status).to.equal(400);
    expect(raw.body.error).to.equal('invalid_filter');
    expect(raw.body.message).to.contain('date:2026-02-30');
    await page.close();
  });

  it('sorting by each column orders the rows as the API does, both ways, with aria-sort on the header', async () => {
    const page = await browser.newPage();
    await page.goto(`${d.url}/app/results`);
    for (const field of ['result', 'testcase', 'job', 'category', 'date', 'duration']) {
      const th = page.locator(`#results th[data-sort="${field}"]`);
      for (let click = 0; click < 2; click++) {
        await Promise.all([page.waitForURL(new RegExp(`sort=${field}%3A`), WAIT), th.locator('a').click()]);
        const sort = new URL(page.url()).searchParams.get('sort') ?? '';
        const dir = sort.endsWith(':asc') ? 'asc' : 'desc';
        expect(await page.locator(`#results th[data-sort="${field}"]`).getAttribute('aria-sort'), sort).to.equal(dir === 'asc' ? 'ascending' : 'descending');
        expect(await rowIds(page), sort).to.deep.equal(await apiIds({ sort }));
      }
    }
    // Result order is visible: errors first when descending.
    await page.goto(`${d.url}/app/results?sort=result:desc`);
    expect((await page.locator('#results tbody tr .outcome').first().innerText()).trim()).to.match(/error$/);
    await page.close();
  });

  it('a new run that matches the filter appears at the top without reloading; one that does not, does not', async () => {
    const page = await browser.newPage();
    const rowAnswers: number[] = [];
    page.on('response', (r) => {
      if (r.url().includes('/app/results/row')) rowAnswers.push(r.status());
    });
    await page.goto(`${d.url}/app/results?filter=${encodeURIComponent('category:live')}`);
    await page.waitForSelector('#results[data-live="on"]', WAIT);
    await page.waitForSelector('#no-results', WAIT);
    const uid = await runJob(['tests/basic.py::test_pass', 'tests/basic.py::test_fail'], 'live');
    await page.waitForFunction(() => document.querySelectorAll('#results tbody tr').length === 2, undefined, WAIT);
    await waitForJob(d, uid);
    expect(await rowIds(page)).to.deep.equal(await apiIds({ filter: 'category:live' }));
    expect(await page.locator('#no-results').count()).to.equal(0);

    // A run outside the filter: the page asks, hears 204, adds nothing.
    const before = rowAnswers.length;
    const other = await runJob(['tests/basic.py::test_pass'], 'elsewhere');
    await waitForJob(d, other);
    await waitFor(() => rowAnswers.length > before, { what: 'the page to ask for the new row', timeoutMs: 30_000 });
    expect(rowAnswers.slice(before)).to.deep.equal([204]);
    expect(await rowIds(page)).to.have.length(2);
    await page.close();
  });

  it('without JavaScript the list still searches and sorts', async () => {
    const ctx = await browser.newContext({ javaScriptEnabled: false });
    const page = await ctx.newPage();
    await page.goto(`${d.url}/app/results`);
    await page.getByLabel('Filter').fill('result:pass');
    await Promise.all([page.waitForURL(/filter=result%3Apass/, WAIT), page.getByRole('button', { name: 'Search' }).click()]);
    expect(await rowIds(page)).to.deep.equal(await apiIds({ filter: 'result:pass' }));
    await Promise.all([page.waitForURL(/sort=testcase%3Aasc/, WAIT), page.locator('#results th[data-sort="testcase"] a').click()]);
    expect(new URL(page.url()).searchParams.get('filter')).to.equal('result:pass');
    expect(await rowIds(page)).to.deep.equal(await apiIds({ filter: 'result:pass', sort: 'testcase:asc' }));
    await ctx.close();
  });

  it('the row fragment answers 204 for a result outside the filter and a JSON 400 for a bad one', async () => {
    const [id] = await apiIds({ filter: 'result:pass' });
    const hit = await d.http.get('/app/results/row').query({ result_id: id, filter: 'result:pass' });
    expect(hit.status).to.equal(200);
    expect(hit.text).to.contain(`data-result-id="${id}"`);
    const miss = await d.http.get('/app/results/row').query({ result_id: id, filter: 'result:fail' });
    expect(miss.status).to.equal(204);
    const bad = await d.http.get('/app/results/row').query({ result_id: id, filter: 'colour:red' });
    expect(bad.status).to.equal(400);
    expect(bad.body.error).to.equal('invalid_filter');
    const unknown = await d.http.get('/app/results/row').query({ result_id: '/farmhand-test/ab/99/2026-01-01_00.00.00' });
    expect(unknown.status).to.equal(404);
  });
});
