/**
 * The video wall (`/app/wall`, docs/video-wall.md) in a real Chromium against a real portal with three real
 * `farmhand serve` nodes on virtual boxes: a tile per node, each tile's picture arrives over the wall's event
 * stream and changes when the box's screen does (a key pressed through the API), the label filter keeps the
 * matching tiles, a tile opens the node's live view; a bad request for pictures is a 400.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import request from 'supertest';
import { setNodeLabels } from '../../src/farm/queue/labels.js';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';

const WAIT = { timeout: 60_000 };
const NODES = ['wall-1', 'wall-2', 'wall-3'];

describe('farm portal: the video wall', function () {
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
    for (const id of NODES) {
      await farm.addNode(id, {
        files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF },
        config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 640, height: 360 } },
      });
    }
    await setNodeLabels(farm.portal.pool, 'wall-1', { device: 'roku' }, []);
    await setNodeLabels(farm.portal.pool, 'wall-2', { device: 'roku' }, []);
    await setNodeLabels(farm.portal.pool, 'wall-3', { device: 'appletv' }, []);
    token = await farm.tokenFor('alice');
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close().catch(() => undefined);
    await browser?.close();
    await farm?.stop();
  });

  const tileIds = (page: Page) => page.$$eval('.wall-tile', (els) => els.map((el) => el.getAttribute('data-node-id')));
  const pictureOf = (page: Page, id: string) => page.locator(`.wall-tile[data-node-id="${id}"] img.wall-picture`).getAttribute('src');

  it("shows a tile per node, each with its live picture, state and labels; a picture changes with the box's screen", async () => {
    const page = await newPage();
    await page.goto(`${farm.url}/`);
    await Promise.all([page.waitForURL(/\/app\/wall$/, WAIT), page.getByRole('link', { name: 'The video wall' }).click()]);
    expect(await tileIds(page)).to.deep.equal(NODES);
    // Every tile is on screen: one stream watches all three.
    await page.waitForFunction((n) => document.getElementById('wall')?.dataset.watching === n.join(','), NODES, WAIT);
    for (const id of NODES) {
      await page.waitForFunction((i) => Number(document.querySelector(`.wall-tile[data-node-id="${i}"]`)?.getAttribute('data-frames') ?? 0) >= 1, id, WAIT);
      expect(await pictureOf(page, id)).to.match(/^data:image\/jpeg;base64,\/9j\//);
      expect(await page.locator(`.wall-tile[data-node-id="${id}"] img.wall-picture`).isVisible()).to.equal(true);
      expect(await page.locator(`#tile-info-${id} .wall-state`).textContent()).to.equal('Available');
    }
    // The picture decodes in the browser at the thumbnail's size.
    const width = await page.locator('.wall-tile[data-node-id="wall-1"] img.wall-picture').evaluate((img) => (img as HTMLImageElement).naturalWidth);
    expect(width).to.equal(320);
    expect(await page.locator('#tile-info-wall-3 ul.labels a').allTextContents()).to.deep.equal(['device=appletv']);
    // A key pressed on wall-2 changes its screen: its tile gets a new picture (the box's clock changes it too).
    const before = await pictureOf(page, 'wall-2');
    const pressed = await request(farm.url).post('/api/v2/nodes/wall-2/press').set('Authorization', `token ${token}`).send({ key: 'KEY_DOWN' });
    expect(pressed.status, pressed.text).to.equal(204);
    await page.waitForFunction(
      ([b]) => {
        const src = document.querySelector('.wall-tile[data-node-id="wall-2"] img.wall-picture')?.getAttribute('src');
        return src !== b;
      },
      [before],
      WAIT,
    );
    expect(Number(await page.locator('.wall-tile[data-node-id="wall-2"]').getAttribute('data-frames'))).to.be.greaterThan(1);
  });

  it('filters by label, and a tile opens the node', async () => {
    const page = await newPage();
    await page.goto(`${farm.url}/app/wall`);
    await page.getByLabel('Filter by labels').fill('device=roku');
    await Promise.all([page.waitForURL(/labels=device%3Droku/, WAIT), page.getByRole('button', { name: 'Filter' }).click()]);
    expect(await tileIds(page)).to.deep.equal(['wall-1', 'wall-2']);
    expect(await page.locator('#wall-summary').textContent()).to.contain('2 nodes with device=roku (of 3)');
    await page.waitForFunction(() => document.getElementById('wall')?.dataset.watching === 'wall-1,wall-2', undefined, WAIT);
    await page.waitForFunction(() => Number(document.querySelector('.wall-tile[data-node-id="wall-2"]')?.getAttribute('data-frames') ?? 0) >= 1, undefined, WAIT);
    const res = await Promise.all([page.waitForURL(/\/app\/nodes\/wall-2\/live$/, WAIT), page.locator('.wall-tile[data-node-id="wall-2"] a.wall-open').click()]);
    expect(res).to.have.length(2);
    expect(new URL(page.url()).pathname).to.equal('/app/nodes/wall-2/live');
    await page.goto(`${farm.url}/app/wall?labels=device=firetv`);
    expect(await page.locator('.no-match').textContent()).to.equal('No node has the labels device=firetv.');
  });

  it('the pictures stream refuses a request without nodes or naming an unknown node (400, JSON)', async () => {
    const none = await request(farm.url).get('/app/wall/frames').set('Authorization', `token ${token}`);
    expect(none.status).to.equal(400);
    expect(none.body.error).to.equal('invalid_request');
    const unknown = await request(farm.url).get('/app/wall/frames?nodes=wall-1,nope').set('Authorization', `token ${token}`);
    expect(unknown.status).to.equal(400);
    expect(unknown.body.message).to.contain('no node "nope" is registered');
  });
});
