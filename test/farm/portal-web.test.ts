/**
 * The farm's web pages on the portal, in a real Chromium, against a real
 * portal (PostgreSQL, hub) with two real `farmhand serve` nodes: the front
 * door lists both with their state, the results list searches both nodes'
 * results from PostgreSQL, a person signs in with a farm token, and a node's
 * live view through the portal shows its picture and its remote presses
 * through the portal's API.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { launchBrowser } from '../helpers/browser.js';
import { framesShown, pictureChangesFrom, signature } from '../helpers/livePicture.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { waitFor } from '../helpers/wait.js';

const WAIT = { timeout: 30_000 };
const A = 'stb-a';
const B = 'stb-b';

describe('farm portal: web pages (front door, results, sign-in, live view)', function () {
  this.timeout(300_000);
  let farm: TestFarm;
  let browser: Browser;
  let token: string;
  const contexts: BrowserContext[] = [];
  const api = () => ({
    get: (path: string) => request(farm.url).get(path).set('Authorization', `token ${token}`),
    post: (path: string) => request(farm.url).post(path).set('Authorization', `token ${token}`),
  });

  async function newPage(): Promise<Page> {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    contexts.push(ctx);
    const page = await ctx.newPage();
    // What the page's scripts say goes into the test's output (a failed live update says why there).
    page.on('console', (m) => console.log(`[page ${page.url()}] ${m.type()}: ${m.text()}`));
    page.on('pageerror', (e) => console.log(`[page ${page.url()}] error: ${e.message}`));
    return page;
  }

  /** A browser signed in through the portal's form. */
  async function signedIn(next = '/'): Promise<Page> {
    const page = await newPage();
    await page.goto(`${farm.url}/app/sign-in?next=${encodeURIComponent(next)}`);
    await page.getByLabel('Access token').fill(token);
    await Promise.all([
      page.waitForURL((u) => u.pathname === new URL(next, farm.url).pathname, { ...WAIT, waitUntil: 'commit' }),
      page.getByRole('button', { name: 'Sign in' }).click(),
    ]);
    return page;
  }

  async function runJob(node: string, testCases: string[], category: string): Promise<string> {
    const res = await api().post('/api/v2/run_tests').send({ node_id: node, test_pack_revision: 'main', test_cases: testCases, category });
    expect(res.status, res.text).to.equal(200);
    const done = await api().get(`/api/v2/jobs${res.body.job_uid as string}/await_completion?timeout=50`);
    expect(done.body.status, done.text).to.equal('exited');
    const uid = res.body.job_uid as string;
    // await_completion is the node's own answer; the front door draws from the node's snapshot, which follows
    // 250 ms after the change (debounced). Wait for it, or a fast browser reads "busy".
    await waitFor(() => {
      const job = farm.portal.hub.link(node)?.snapshot?.job as { job_uid?: string; status?: string } | null | undefined;
      return job?.job_uid === uid && job.status === 'exited';
    }, { what: `${node}'s snapshot with ${uid} exited`, timeoutMs: 30_000 });
    return uid;
  }
  /** B's job, and the node's own answers for it (v2 and v1 Job objects, forwarded while B is connected). */
  let jobA: string;
  let jobB: string;
  const nodeAnswers: { v1?: unknown; v2?: unknown } = {};

  before(async () => {
    farm = await startTestFarm();
    await farm.addNode(A, {
      files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF },
      config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 640, height: 360, preview_fps: 10 } },
    });
    // B records its runs' videos: its result page is rendered from the portal's storage once B is offline.
    await farm.addNode(B, { config: { capture: { record_video: true } } });
    token = await farm.tokenFor('alice');
    jobA = await runJob(A, ['tests/basic.py::test_pass', 'tests/basic.py::test_fail'], 'nightly');
    jobB = await runJob(B, ['tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/basic.py::test_error'], 'smoke');
    // The node's answers, compared with the portal's own once B is offline (the last test).
    for (const v of ['v1', 'v2'] as const) {
      const res = await api().get(`/api/${v}/jobs${jobB}`);
      expect(res.status, res.text).to.equal(200);
      nodeAnswers[v] = res.body;
    }
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await farm?.stop();
  });

  it('the front door lists every node with its state, job and links, without JavaScript', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 }, javaScriptEnabled: false });
    contexts.push(ctx);
    const page = await ctx.newPage();
    const res = await page.goto(`${farm.url}/`);
    expect(res?.status()).to.equal(200);
    const rowA = page.locator(`tr[data-node-id="${A}"]`);
    const rowB = page.locator(`tr[data-node-id="${B}"]`);
    expect(await rowA.locator('.node-name').textContent()).to.equal(A);
    expect(await rowB.locator('.node-name').textContent()).to.equal(B);
    for (const row of [rowA, rowB]) {
      expect(await row.getAttribute('data-online')).to.equal('yes');
      expect(await row.locator('.node-state').textContent()).to.match(/^Online, available\./);
      expect(await row.locator('.job-status').textContent()).to.equal('exited');
    }
    expect(await rowB.locator('.job-counts').textContent()).to.contain('1 passed, 1 failed, 1 errors');
    expect(await rowA.locator(`a[href="/app/nodes/${A}/live"]`).count()).to.equal(1);
    expect(await page.locator('a[href="/app/results"]').count()).to.be.greaterThan(0);
    // The page says what GET /api/v2/nodes says.
    const nodes = (await api().get('/api/v2/nodes')).body as { node_id: string; online: boolean }[];
    expect(nodes.map((n) => n.node_id)).to.deep.equal([A, B]);
  });

  it('the front door shows a reservation made and ended, live (from the event stream)', async () => {
    const page = await newPage();
    await page.goto(`${farm.url}/`);
    await page.waitForSelector('#farm-front[data-live="on"]', WAIT);
    const made = await api().post('/api/v2/reservations').send({ node_ids: [B], message: 'flashing firmware' });
    expect(made.status, made.text).to.equal(200);
    const rowB = page.locator(`tr[data-node-id="${B}"]`);
    await rowB.locator('.holder', { hasText: 'alice' }).waitFor(WAIT);
    expect(await rowB.locator('.reservation-message').textContent()).to.equal('flashing firmware');
    const ended = await request(farm.url).delete(`/api/v2/reservations/${made.body.reservations[0].reservation_id as number}`).set('Authorization', `token ${token}`);
    expect(ended.status, ended.text).to.equal(204);
    await page.waitForFunction((b) => !document.querySelector(`tr[data-node-id="${b}"] .holder`), B, WAIT);
  });

  it('the results list searches every node from PostgreSQL, with the node named, as the API does', async () => {
    const page = await newPage();
    await page.goto(`${farm.url}/app/results`);
    await page.getByLabel('Filter').fill('result:fail');
    await Promise.all([page.waitForURL(/filter=result%3Afail/, WAIT), page.getByLabel('Filter').press('Enter')]);
    const rows = await page.$$eval('#results tbody tr', (trs) => trs.map((tr) => ({ id: tr.getAttribute('data-result-id') ?? '', node: tr.querySelector('td.node')?.textContent ?? '' })));
    const fromApi = ((await api().get('/api/v2/results').query({ filter: 'result:fail' })).body as { result_id: string }[]).map((r) => r.result_id);
    expect(rows.map((r) => r.id)).to.deep.equal(fromApi);
    expect(rows.map((r) => r.node).sort()).to.deep.equal([A, B]);
    for (const r of rows) expect(r.id.startsWith(`/${r.node}/`)).to.equal(true);
    // A filter term the grammar refuses: the error next to the box, naming it.
    await page.goto(`${farm.url}/app/results?filter=${encodeURIComponent('result:maybe')}`);
    expect(await page.locator('#filter-error').textContent()).to.contain('result:maybe');
    // A row opens the result page, the node's, through the portal.
    await page.goto(`${farm.url}/app/results?filter=${encodeURIComponent(`category:smoke result:error`)}`);
    const link = page.locator('#results tbody tr td.testcase a');
    expect(await link.count()).to.equal(1);
    const res = await Promise.all([page.waitForNavigation(WAIT), link.click()]);
    expect(res[0]?.status()).to.equal(200);
    expect(page.url()).to.contain(`/app/results/${B}/`);
  });

  it('a new run appears in the farm-wide list without reloading', async () => {
    const page = await newPage();
    await page.goto(`${farm.url}/app/results?filter=${encodeURIComponent('category:late')}`);
    await page.waitForSelector('#results[data-live="on"]', WAIT);
    await runJob(A, ['tests/basic.py::test_pass'], 'late');
    await page.waitForFunction(() => document.querySelectorAll('#results tbody tr').length === 1, undefined, WAIT);
    expect(await page.locator('#results tbody tr td.node').textContent()).to.equal(A);
    await page.close();
  });

  it('a person signs in with a farm token: HttpOnly SameSite=Strict cookie, CSRF on state changes', async () => {
    const page = await signedIn('/');
    expect(await page.locator('.who').textContent()).to.contain('Signed in as alice');
    const cookie = (await page.context().cookies()).find((c) => c.name === 'farmhand_session');
    expect(cookie?.httpOnly).to.equal(true);
    expect(cookie?.sameSite).to.equal('Strict');
    // The portal's API accepts the cookie for reading, and for a change only with the page's CSRF token.
    const results = await page.evaluate(async () => (await fetch('/api/v2/user', { headers: { Accept: 'application/json' } })).json());
    expect(results).to.deep.equal({ login: 'alice' });
    const bare = await page.evaluate(async (b) => {
      const r = await fetch(`/api/v2/nodes/${b}/press`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ key: 'KEY_OK' }) });
      return { status: r.status, body: await r.json() };
    }, B);
    expect(bare.status).to.equal(403);
    expect(bare.body.message).to.contain('X-CSRF-Token');
    // A wrong token: the form again with the error beside the box.
    const other = await newPage();
    await other.goto(`${farm.url}/app/sign-in`);
    await other.getByLabel('Access token').fill('fh_00000000_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA');
    await other.getByRole('button', { name: 'Sign in' }).click();
    expect(await other.locator('#token-error').textContent()).to.contain('not accepted');
    // Sign out ends it.
    await Promise.all([page.waitForURL(`${farm.url}/`, WAIT), page.getByRole('button', { name: 'Sign out' }).click()]);
    expect(await page.locator('.who').textContent()).to.contain('Sign in');
  });

  it('the front door reserves several nodes together (the spec: "Atomic: all or none."), extends, ends and interrupts through the v2 API, errors beside the form', async () => {
    const page = await signedIn('/');
    await page.waitForSelector('#farm-front[data-live="on"]', WAIT);
    const rowA = page.locator(`tr[data-node-id="${A}"]`);
    const rowB = page.locator(`tr[data-node-id="${B}"]`);
    const reservationOf = async (node: string) =>
      ((await api().get(`/api/v2/nodes/${node}`)).body as { reservation: { username: string; expires: string | null } | null }).reservation;
    // Bob holds B: ticking A and B reserves neither ("Atomic: all or none."), and the 409 is shown beside the form.
    const bobToken = await farm.tokenFor('bob');
    const bobs = await request(farm.url).post('/api/v2/reservations').set('Authorization', `token ${bobToken}`).send({ node_ids: [B], message: 'bob here' });
    expect(bobs.status, bobs.text).to.equal(200);
    await rowB.locator('.holder', { hasText: 'bob' }).waitFor(WAIT);
    await page.getByLabel(`Select ${A}`).check();
    await page.getByLabel(`Select ${B}`).check();
    await page.locator('#farm-res-message').fill('firmware on both');
    await page.locator('#farm-res-minutes').fill('10');
    await page.getByRole('button', { name: 'Reserve the selected nodes' }).click();
    await waitFor(async () => ((await page.locator('#farm-res-error').textContent()) ?? '').includes(B), { what: 'the refusal beside the form', timeoutMs: 30_000 });
    expect(await reservationOf(A)).to.equal(null);
    // Interrupt bob's reservation from B's row.
    await rowB.getByLabel('Interrupt with a message to bob').fill('I need B now');
    await rowB.getByRole('button', { name: 'Interrupt' }).click();
    await page.waitForFunction((b) => !document.querySelector(`tr[data-node-id="${b}"] .holder`), B, WAIT);
    // The ticks survived the table's live swaps: reserve both now.
    expect(await page.getByLabel(`Select ${A}`).isChecked()).to.equal(true);
    expect(await page.getByLabel(`Select ${B}`).isChecked()).to.equal(true);
    await page.getByRole('button', { name: 'Reserve the selected nodes' }).click();
    await rowA.locator('.holder', { hasText: 'alice' }).waitFor(WAIT);
    await rowB.locator('.holder', { hasText: 'alice' }).waitFor(WAIT);
    expect(await page.locator('#farm-res-error').textContent()).to.equal('');
    const a0 = await reservationOf(A);
    expect(a0?.username).to.equal('alice');
    expect(a0?.expires).to.be.a('string');
    // Extend A's by 60 minutes from its row.
    await rowA.getByLabel('Extend by minutes').fill('60');
    await rowA.getByRole('button', { name: 'Extend' }).click();
    await waitFor(async () => Date.parse((await reservationOf(A))?.expires ?? '') >= Date.parse(a0!.expires!) + 60 * 60_000, { what: 'the extended expiry', timeoutMs: 30_000 });
    // End both.
    for (const [row, node] of [[rowA, A], [rowB, B]] as const) {
      await row.getByRole('button', { name: 'End this reservation' }).click();
      await page.waitForFunction((n) => !document.querySelector(`tr[data-node-id="${n}"] .holder`), node, WAIT);
      expect(await reservationOf(node)).to.equal(null);
    }
    // The forms' calls carry the page's CSRF token; the cookie alone is refused.
    const bare = await page.evaluate(async (a) => {
      const r = await fetch('/api/v2/reservations', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ node_ids: [a], message: 'x' }) });
      return r.status;
    }, A);
    expect(bare).to.equal(403);
  });

  it('signed in without JavaScript, the front door shows no tick boxes for the reserve form it cannot send', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 }, javaScriptEnabled: false });
    contexts.push(ctx);
    const page = await ctx.newPage();
    await page.goto(`${farm.url}/app/sign-in?next=%2F`);
    await page.getByLabel('Access token').fill(token);
    await Promise.all([page.waitForURL((u) => u.pathname === '/', { ...WAIT, waitUntil: 'commit' }), page.getByRole('button', { name: 'Sign in' }).click()]);
    await page.locator(`tr[data-node-id="${A}"]`).waitFor(WAIT);
    // The boxes are in the page (farm.js shows them), not shown; nor is their column's heading.
    expect(await page.locator('input[name="node_ids"]').count()).to.equal(2);
    for (const box of await page.locator('input[name="node_ids"]').all()) expect(await box.isVisible()).to.equal(false);
    expect(await page.locator('th.node-select').isVisible()).to.equal(false);
    expect(await page.locator('#farm-reserve').isVisible()).to.equal(false);
    expect(await page.locator('.farm-reserve').textContent()).to.contain('needs JavaScript');
    // With JavaScript, the same reader sees them.
    const live = await signedIn('/');
    await live.getByLabel(`Select ${A}`).waitFor({ ...WAIT, state: 'visible' });
  });

  it("a connected node's job page is the node's own, forwarded (live tail, Stop, job.js)", async () => {
    const page = await signedIn('/');
    const res = await page.goto(`${farm.url}/app/jobs${jobA}`);
    expect(res?.status()).to.equal(200);
    expect(await page.locator('.offline-copy').count()).to.equal(0);
    expect(await page.locator('#running-now').count()).to.equal(1);
    expect(await page.locator('#job-actions').count()).to.equal(1);
    expect(await page.locator('script[src="/static/job.js"]').count()).to.equal(1);
  });

  it("a connected node's page names the person from the portal (the node is told nobody), and its sign-out signs out of the portal", async () => {
    const page = await signedIn('/');
    await page.goto(`${farm.url}/app/jobs${jobA}`);
    // No token in the page the node rendered; its "Signed in as" is filled by the portal's script from /app/session.
    expect(await page.locator('meta[name="csrf-token"]').count()).to.equal(0);
    await waitFor(async () => (await page.locator('[data-portal-login]').textContent()) === 'alice', { what: 'the name from the portal', timeoutMs: 30_000 });
    expect(await page.locator('form[data-portal-session] input[name="csrf"]').inputValue(), 'the token is not kept in the page').to.equal('');
    await Promise.all([page.waitForURL((u) => u.pathname !== `/app/jobs${jobA}`, { ...WAIT, waitUntil: 'commit' }), page.getByRole('button', { name: 'Sign out' }).click()]);
    const session = await page.context().request.get(`${farm.url}/app/session`);
    expect(await session.json()).to.deep.equal({ login: null, csrf: null, role: null });
  });

  it('signed out, the front door offers no reservation forms, only a way to sign in', async () => {
    const page = await newPage();
    await page.goto(`${farm.url}/`);
    expect(await page.locator('#farm-reserve').count()).to.equal(0);
    expect(await page.locator('input[name="node_ids"]').count()).to.equal(0);
    expect(await page.locator('#farm-reserve-signin a').getAttribute('href')).to.equal('/app/sign-in?next=%2F');
  });

  it("a node's live view through the portal shows its picture, and its remote presses through the portal", async () => {
    // Signed out: the picture, the remote disabled (the node renders the page for nobody).
    const reader = await newPage();
    await reader.goto(`${farm.url}/app/nodes/${A}/live`);
    await framesShown(reader, 3);
    expect(await reader.locator('.live-signin').count()).to.equal(1);
    const page = await signedIn(`/app/nodes/${A}/live`);
    await framesShown(page, 3);
    expect(await page.locator('.live-signin').count()).to.equal(0);
    const before = await signature(page);
    await page.getByRole('button', { name: 'Down (KEY_DOWN)' }).click();
    await pictureChangesFrom(page, before);
    expect(await page.locator('#remote-error').textContent()).to.equal('');
    // The press went through the portal's API, so a reservation by someone else refuses it there.
    const bobToken = await farm.tokenFor('bob');
    const held = await request(farm.url).post('/api/v2/reservations').set('Authorization', `token ${bobToken}`).send({ node_ids: [A], message: 'mine now' });
    expect(held.status, held.text).to.equal(200);
    await page.getByRole('button', { name: 'Up (KEY_UP)' }).click();
    await waitFor(async () => /reserved by bob/.test((await page.locator('#remote-error').textContent()) ?? ''), { what: 'the refusal under the remote', timeoutMs: 30_000 });
  });

  // It stops node B: the tests after it read B offline.
  it("a result page of an offline node is rendered from the portal's storage: video, log, screenshot and artifacts from storage; run again says the node is offline", async () => {
    const [fail] = (await api().get('/api/v2/results').query({ filter: `/${B}/ result:fail` })).body as { result_id: string }[];
    const id = fail!.result_id;
    const listing = (await api().get(`/api/v2/results${id}/artifacts`)).body as Record<string, unknown>;
    expect(Object.keys(listing)).to.include.members(['farmhand.log', 'screenshot.png', 'video.mp4']);
    // The listing above may be B's own answer: stop B only once its uploads have reached the portal's storage.
    await waitFor(() => farm.nodes.get(B)!.daemon.uploader!.pending.length === 0, { what: `${B}'s uploads delivered`, timeoutMs: 60_000 });
    await farm.nodes.get(B)!.stop();
    await waitFor(() => farm.portal.hub.link(B)?.online === false, { what: `node ${B} to be offline`, timeoutMs: 30_000 });
    const page = await signedIn('/');
    // The front door says why once: "Offline: <reason>", not "Offline: offline: <reason>".
    await page.goto(`${farm.url}/`);
    const state = (await page.locator(`tr[data-node-id="${B}"] .node-state`).textContent()) ?? '';
    expect(state).to.match(/^Offline: /);
    expect(state.toLowerCase()).not.to.contain('offline: offline');
    const res = await page.goto(`${farm.url}/app/results${id}`);
    expect(res?.status()).to.equal(200);
    expect(await page.locator('h1 .badge').textContent()).to.equal('fail');
    expect(await page.locator('.offline-copy').textContent()).to.contain(`Node ${B} is offline`);
    // The farm's navigation, as on the portal's other pages.
    expect(await page.locator('nav a[href="/app/results"]').count()).to.equal(1);
    expect(await page.locator('nav a[href="/app/live"]').count()).to.equal(0);
    expect(await page.locator('.test-case').first().textContent()).to.equal('tests/basic.py::test_fail');
    // The log's lines, from storage; the full log too.
    expect(await page.locator('#runlog li').count()).to.be.greaterThan(0);
    const full = await page.evaluate(async (href) => {
      const r = await fetch(href);
      return { status: r.status, text: await r.text() };
    }, (await page.locator('a.full-log').getAttribute('href'))!);
    expect(full.status).to.equal(200);
    expect(full.text).to.contain('test_fail');
    // The screenshot shows, the video plays its metadata, each artifact downloads: all from the portal's storage.
    await page.waitForFunction(() => (document.querySelector<HTMLImageElement>('img.end-screenshot')?.naturalWidth ?? 0) > 0, undefined, WAIT);
    await page.waitForFunction(() => (document.querySelector<HTMLVideoElement>('#run-video')?.readyState ?? 0) >= 1, undefined, WAIT);
    const hrefs = await page.$$eval('.artifacts li.file > a[download]', (as) => as.map((a) => a.getAttribute('href') ?? ''));
    expect(hrefs.map((h) => decodeURIComponent(h.slice(h.indexOf('/artifacts/') + '/artifacts/'.length))).sort()).to.deep.equal(Object.keys(listing).sort());
    const statuses = await page.evaluate(async (hs) => Promise.all(hs.map(async (h) => (await fetch(h)).status)), hrefs);
    expect(statuses.every((st) => st === 200), JSON.stringify(statuses)).to.equal(true);
    // The runs of the test case on that node (the farm's index); run again needs the node: says it is offline.
    expect(await page.locator('.run-strip li.run.this').count()).to.equal(1);
    expect(await page.locator('#rerun').count()).to.equal(0);
    expect(await page.locator('.rerun.node-offline').textContent()).to.contain(`${B}`).and.to.contain('offline');
    // The caption track of the video, from storage too.
    const vtt = await page.evaluate(async (href) => (await fetch(href)).text(), `/app/results${id}/log.vtt`);
    expect(vtt.startsWith('WEBVTT')).to.equal(true);
    // The page's Job link: the v1 Job object, from the portal's jobs table (the node is not there to ask).
    const jobLink = page.locator(`a[href="/api/v1/jobs${jobB}"]`);
    expect(await jobLink.count()).to.equal(1);
    const job = await page.evaluate(async (href) => {
      const r = await fetch(href);
      return { status: r.status, body: (await r.json()) as unknown };
    }, (await jobLink.getAttribute('href'))!);
    expect(job.status).to.equal(200);
    expect(job.body).to.deep.equal(nodeAnswers.v1);
  });

  // After the result page's test: B is offline.
  it('"GET /api/v2/jobs/{job_uid}: Returns the Job object" and v1\'s "Job object" of an offline node, from PostgreSQL: field by field the node\'s answer', async () => {
    expect(farm.portal.hub.link(B)?.online).to.equal(false);
    for (const v of ['v1', 'v2'] as const) {
      const res = await api().get(`/api/${v}/jobs${jobB}`);
      expect(res.status, res.text).to.equal(200);
      expect(res.body, v).to.deep.equal(nodeAnswers[v]);
      expect(Object.keys(res.body as object), v).to.deep.equal(Object.keys(nodeAnswers[v] as object));
    }
    expect((nodeAnswers.v1 as { job_url: string }).job_url).to.equal(`${farm.url}/api/v1/jobs${jobB}`);
  });

  it("the job page of an offline node is rendered from the portal's jobs table and index: counts, its results linked, no live tail or Stop, says the node is offline", async () => {
    const results = (await api().get('/api/v2/results').query({ filter: `job:${jobB}`, sort: 'date:desc' })).body as { result_id: string; result: string }[];
    expect(results).to.have.length(3);
    const page = await signedIn('/');
    const res = await page.goto(`${farm.url}/app/jobs${jobB}`);
    expect(res?.status()).to.equal(200);
    expect(await page.locator('.offline-copy').textContent()).to.contain(`Node ${B} is offline`);
    expect(await page.locator('h1 .job-uid').textContent()).to.equal(jobB);
    expect(await page.locator('#job-status').textContent()).to.equal('exited');
    const counts: Record<string, string | null> = {};
    for (const k of ['pass', 'fail', 'error', 'total']) counts[k] = await page.locator(`#count-${k}`).textContent();
    expect(counts).to.deep.equal({ pass: '1', fail: '1', error: '1', total: '3' });
    expect(await page.locator('.job-summary').textContent()).to.contain('category smoke').and.to.contain('by alice');
    // No live tail, no Stop, no script following the job: they need the node.
    expect(await page.locator('#log-tail').count()).to.equal(0);
    expect(await page.locator('#running-now').count()).to.equal(0);
    expect(await page.locator('#stop-job, #sign-in-to-stop, #job-actions').count()).to.equal(0);
    expect(await page.locator('script[src="/static/job.js"]').count()).to.equal(0);
    expect(await page.locator('nav a[href="/app/results"]').count()).to.equal(1);
    // Its results, newest first as the API sorts them, each linking to its result page (the portal's copy).
    const rows = page.locator('#job-results tbody tr');
    expect(await rows.evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-result-id')))).to.deep.equal(results.map((r) => r.result_id));
    const fail = results.find((r) => r.result === 'fail')!;
    await Promise.all([page.waitForURL((u) => u.pathname === `/app/results${fail.result_id}`, WAIT), page.locator(`#job-results a[href="/app/results${fail.result_id}"]`).click()]);
    expect(await page.locator('h1 .badge').textContent()).to.equal('fail');
    expect(await page.locator('.offline-copy').count()).to.equal(1);
  });
});

describe("farm portal: the portal's own auth.v1_requires_token for reading", function () {
  this.timeout(300_000);
  const HTML = 'text/html,application/xhtml+xml';
  let farm: TestFarm;
  let browser: Browser;
  let token: string;
  let resultId: string;

  before(async () => {
    farm = await startTestFarm({ portal: { auth: { v1_requires_token: true } } });
    await farm.addNode(A);
    token = await farm.tokenFor('alice');
    const run = await request(farm.url).post('/api/v2/run_tests').set('Authorization', `token ${token}`).send({ node_id: A, test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass'] });
    expect(run.status, run.text).to.equal(200);
    const done = await request(farm.url).get(`/api/v2/jobs${run.body.job_uid as string}/await_completion?timeout=50`).set('Authorization', `token ${token}`);
    expect(done.body.status, done.text).to.equal('exited');
    resultId = ((await request(farm.url).get('/api/v2/results').set('Authorization', `token ${token}`)).body as { result_id: string }[])[0]!.result_id;
    browser = await launchBrowser();
  });
  after(async () => {
    await browser?.close();
    await farm?.stop();
  });

  it('without a token or session: pages send a browser to sign in, API reads and /app/events are a JSON 403; sign-in, /static and /healthz stay open', async () => {
    const front = await request(farm.url).get('/').set('Accept', HTML);
    expect(front.status).to.equal(303);
    expect(front.headers.location).to.equal('/app/sign-in?next=%2F');
    // The node's pages forwarded through the portal are the portal's to guard, before they reach the node.
    const page = await request(farm.url).get(`/app/results${resultId}`).set('Accept', HTML);
    expect(page.status).to.equal(303);
    expect(page.headers.location).to.equal(`/app/sign-in?next=${encodeURIComponent(`/app/results${resultId}`)}`);
    for (const path of ['/', '/app/results', '/app/events', `/api/v1/result${resultId}`, `/api/v1/result${resultId}/screenshot.png`, `/api/v1/result${resultId}/farmhand.log`]) {
      const res = await request(farm.url).get(path).set('Accept', 'application/json');
      expect(res.status, path).to.equal(403);
      expect(res.body.error, path).to.equal('forbidden');
    }
    expect((await request(farm.url).get('/app/sign-in').set('Accept', HTML)).status).to.equal(200);
    expect((await request(farm.url).get('/static/farm.js')).status).to.equal(200);
    expect((await request(farm.url).get('/healthz')).status).to.equal(200);
  });

  it('v1: with a token, a v1 read answers (the spec: "The v1 samples send no credentials", so this is opt-in)', async () => {
    const res = await request(farm.url).get(`/api/v1/result${resultId}`).set('Authorization', `token ${token}`);
    expect(res.status, res.text).to.equal(200);
    expect(res.body.result).to.equal('pass');
    expect(res.body.test_case).to.equal('tests/basic.py::test_pass');
    expect((await request(farm.url).get(`/api/v1/result${resultId}/farmhand.log`).set('Authorization', `token ${token}`)).status).to.equal(200);
  });

  it('a person signs in and reads the front door, the results list and a result page, live', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    try {
      const page = await ctx.newPage();
      await page.goto(`${farm.url}/app/results`);
      expect(new URL(page.url()).pathname).to.equal('/app/sign-in');
      await page.getByLabel('Access token').fill(token);
      await Promise.all([page.waitForURL((u) => u.pathname === '/app/results', { ...WAIT, waitUntil: 'commit' }), page.getByRole('button', { name: 'Sign in' }).click()]);
      await page.waitForSelector('#results[data-live="on"]', WAIT);
      expect(await page.locator('#results tbody tr').count()).to.equal(1);
      const res = await page.goto(`${farm.url}/app/results${resultId}`);
      expect(res?.status()).to.equal(200);
      expect(await page.locator('h1 .badge').textContent()).to.equal('pass');
      await page.goto(`${farm.url}/`);
      await page.waitForSelector('#farm-front[data-live="on"]', WAIT);
      expect(await page.locator(`tr[data-node-id="${A}"]`).count()).to.equal(1);
    } finally {
      await ctx.close();
    }
  });
});
