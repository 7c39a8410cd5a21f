/**
 * The portal's front door with labels and the queue pages (docs/video-wall.md), in a real Chromium against a
 * real portal (PostgreSQL, hub) with two real `farmhand serve` nodes: each row shows its node's labels, the filter
 * `?labels=` keeps the matching rows (also after a live update), a malformed filter is a 400 with the error
 * beside the box; `/app/queue` lists the label sets with waiting jobs, and one set's page lists its waiting jobs
 * in the order they will start, who queued them and why they wait; a set nothing waits for says so.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import { setNodeLabels } from '../../src/farm/queue/labels.js';
import { PgJobQueue } from '../../src/farm/queue/store.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';

const WAIT = { timeout: 30_000 };
const A = 'stb-a';
const B = 'stb-b';
const PASS = 'tests/basic.py::test_pass';

describe('farm portal: labels on the front door, the queue pages', function () {
  this.timeout(300_000);
  let farm: TestFarm;
  let browser: Browser;
  let token: string;
  const contexts: BrowserContext[] = [];

  async function newPage(): Promise<Page> {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    contexts.push(ctx);
    const page = await ctx.newPage();
    page.on('pageerror', (e) => console.log(`[page ${page.url()}] error: ${e.message}`));
    return page;
  }

  before(async () => {
    farm = await startTestFarm();
    await farm.addNode(A);
    await farm.addNode(B);
    await setNodeLabels(farm.portal.pool, A, { device: 'vbox', room: 'lab1' }, []);
    await setNodeLabels(farm.portal.pool, B, { device: 'roku', room: 'lab2' }, []);
    token = await farm.tokenFor('alice');
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await farm?.stop();
  });

  const rowIds = (page: Page) => page.$$eval('#farm-nodes tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-node-id')));

  it("shows each node's labels in its row, and filters by labels, also after a live update", async () => {
    const page = await newPage();
    await page.goto(`${farm.url}/`);
    expect(await page.locator(`tr[data-node-id="${A}"] ul.labels a`).allTextContents()).to.deep.equal(['device=vbox', 'room=lab1']);
    expect(await page.locator(`tr[data-node-id="${B}"] ul.labels a`).allTextContents()).to.deep.equal(['device=roku', 'room=lab2']);
    expect(await rowIds(page)).to.deep.equal([A, B]);
    // A label is a link to the nodes with it.
    await Promise.all([page.waitForURL(/labels=device%3Droku/, WAIT), page.locator(`tr[data-node-id="${B}"] a.label`, { hasText: 'device=roku' }).click()]);
    expect(await rowIds(page)).to.deep.equal([B]);
    expect(await page.locator('#farm-summary').textContent()).to.contain('1 node with device=roku (of 2)');
    // The form: two labels, all of them must match.
    await page.getByLabel('Filter by labels').fill('room=lab1,device=vbox');
    await Promise.all([page.waitForURL(/labels=room%3Dlab1%2Cdevice%3Dvbox/, WAIT), page.getByRole('button', { name: 'Filter' }).click()]);
    expect(await rowIds(page)).to.deep.equal([A]);
    // A live update (a reservation of B, an event) re-renders the table from the same filtered page.
    await page.waitForSelector('#farm-front[data-live="on"]', WAIT);
    const before = await page.locator('#farm-front').getAttribute('data-updated');
    const made = await request(farm.url).post('/api/v2/reservations').set('Authorization', `token ${token}`).send({ node_ids: [B], message: 'x' });
    expect(made.status, made.text).to.equal(200);
    await page.waitForFunction((b) => document.getElementById('farm-front')?.dataset.updated !== b, before, WAIT);
    expect(await rowIds(page)).to.deep.equal([A]);
    const ended = await request(farm.url).delete(`/api/v2/reservations/${made.body.reservations[0].reservation_id as number}`).set('Authorization', `token ${token}`);
    expect(ended.status, ended.text).to.equal(204);
    // No node with these labels.
    await page.goto(`${farm.url}/?labels=device=firetv`);
    expect(await page.locator('.no-match').textContent()).to.contain('No node has the labels device=firetv');
  });

  it('a malformed label filter: 400, the error beside the box; JSON to a program', async () => {
    const page = await newPage();
    const res = await page.goto(`${farm.url}/?labels=${encodeURIComponent('Device=roku')}`);
    expect(res?.status()).to.equal(400);
    expect(await page.locator('#farm-filter-error').textContent()).to.contain('"Device" is not a label key');
    expect(await page.getByLabel('Filter by labels').inputValue()).to.equal('Device=roku');
    const wall = await request(farm.url).get('/app/wall?labels=device').set('Accept', 'text/html');
    expect(wall.status).to.equal(400);
    expect(wall.text).to.contain('is not key=value');
  });

  it('the queue pages: the sets with waiting jobs, one set in order with who, since when and why; a set nothing waits for', async () => {
    // A reserved by alice: a queued job is never given a reserved node, so the jobs for device=vbox wait.
    const made = await request(farm.url).post('/api/v2/reservations').set('Authorization', `token ${token}`).send({ node_ids: [A], message: 'hold' });
    expect(made.status, made.text).to.equal(200);
    const queue = new PgJobQueue(farm.portal.pool);
    const body = (priority: number) => ({ labels: { device: 'vbox' }, priority, test_pack_revision: 'main', test_cases: [PASS] });
    const j1 = await queue.enqueue(body(50), 'bob');
    const j2 = await queue.enqueue(body(80), 'carol');
    const j3 = await queue.enqueue(body(50), 'dave');
    const j4 = await queue.enqueue({ ...body(10), labels: { room: 'lab1' } }, 'bob');
    try {
      const page = await newPage();
      await page.goto(`${farm.url}/`);
      await Promise.all([page.waitForURL(/\/app\/queue$/, WAIT), page.getByRole('link', { name: 'The queue' }).click()]);
      const sets = await page.$$eval('table.queue-sets tbody tr', (trs) =>
        trs.map((tr) => ({ sel: tr.getAttribute('data-selector'), n: tr.querySelector('.queue-count')?.textContent, why: tr.querySelector('.why')?.textContent ?? '' })),
      );
      expect(sets.map((s) => [s.sel, s.n])).to.deep.equal([
        ['device=vbox', '3'],
        ['room=lab1', '1'],
      ]);
      expect(sets[0]!.why).to.contain('reserved');
      // One set's page: its jobs in the order they will start (priority, then oldest).
      await Promise.all([page.waitForURL(/labels=device%3Dvbox/, WAIT), page.getByRole('link', { name: 'device=vbox' }).first().click()]);
      const rows = await page.$$eval('table.queue-jobs tbody tr', (trs) =>
        trs.map((tr) => ({ id: tr.getAttribute('data-queue-id'), user: tr.querySelector('.queue-user')?.textContent, prio: tr.querySelector('.queue-priority')?.textContent, why: tr.querySelector('.why')?.textContent ?? '', kind: tr.getAttribute('data-wait-kind') })),
      );
      expect(rows.map((r) => [r.id, r.user, r.prio])).to.deep.equal([
        [String(j2.queue_id), 'carol', '80'],
        [String(j1.queue_id), 'bob', '50'],
        [String(j3.queue_id), 'dave', '50'],
      ]);
      for (const r of rows) {
        expect(r.kind).to.equal('busy');
        expect(r.why).to.equal('the one node with device=vbox is busy (1 reserved)');
      }
      expect(await page.locator('#queue-nodes').textContent()).to.contain(`${A} (reserved)`);
      // The API says the same (explain).
      const explained = await queue.explain(await queue.list({ selector: { device: 'vbox' }, states: ['queued'] }), new Map([[A, { kind: 'reserved', detail: 'alice' }]]));
      expect(explained.map((j) => j.queue_id)).to.deep.equal([j2.queue_id, j1.queue_id, j3.queue_id]);
      // A cancelled job moves to the ended ones.
      await queue.cancel(j3.queue_id, { user: 'dave', admin: false });
      await page.reload();
      expect(await page.locator('table.queue-jobs tbody tr').count()).to.equal(2);
      expect(await page.locator(`table.queue-ended tr[data-queue-id="${j3.queue_id}"] .queue-state`).textContent()).to.equal('cancelled by dave');
      // A set nothing waits for.
      await page.goto(`${farm.url}/app/queue?labels=device=roku`);
      expect(await page.locator('#queue-waiting .queue-empty').textContent()).to.equal('No job with these labels is waiting.');
      expect(await page.locator('#queue-nodes').textContent()).to.contain(`${B} (available)`);
    } finally {
      for (const j of [j1, j2, j4]) await queue.cancel(j.queue_id, { user: 'x', admin: true }).catch(() => undefined);
      await request(farm.url).delete(`/api/v2/reservations/${made.body.reservations[0].reservation_id as number}`).set('Authorization', `token ${token}`);
    }
  });
});
