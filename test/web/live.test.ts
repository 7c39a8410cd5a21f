/**
 * The live view and web remote on the virtual set-top box, in a real
 * Chromium: the picture arrives, a press from the page (click and keyboard)
 * changes it, two viewers watch at once, a reservation's refusal is shown,
 * and a reference image holds the exact pixels of a captured frame.
 */
import { readFile } from 'node:fs/promises';
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import sharp from 'sharp';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { framesShown, pictureChangesFrom, signature } from '../helpers/livePicture.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';

const W = 640;
const H = 360;
const WAIT = { timeout: 30_000 };

describe('portal: live view and web remote', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let browser: Browser;
  let alice: Awaited<ReturnType<typeof asUser>>;
  let bob: Awaited<ReturnType<typeof asUser>>;
  const contexts: BrowserContext[] = [];
  const person = async (token?: string): Promise<Page> => {
    const ctx = await browser.newContext({
      viewport: { width: 1400, height: 1000 },
      acceptDownloads: true,
      ...(token && { extraHTTPHeaders: { Authorization: `token ${token}` } }),
    });
    contexts.push(ctx);
    const page = await ctx.newPage();
    await page.goto(`${d.url}/app/live`);
    await framesShown(page, 1);
    return page;
  };

  before(async () => {
    d = await startTestDaemon({
      files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF },
      config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: W, height: H, preview_fps: 10 } },
    });
    alice = await asUser(d, 'alice');
    bob = await asUser(d, 'bob');
    await waitOnline(d);
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
    await d?.stop();
  });

  it('shows the live picture, and a click on the web remote changes it', async () => {
    const page = await person(alice.token);
    await framesShown(page, 3);
    const before = await signature(page);
    await page.getByRole('button', { name: 'Down (KEY_DOWN)' }).click();
    await pictureChangesFrom(page, before);
    expect(await page.locator('#remote-error').textContent()).to.equal('');
  });

  it('the keyboard drives the remote: an arrow key changes the picture', async () => {
    const page = await person(alice.token);
    await page.locator('h1').click(); // focus on the page, on no control
    const before = await signature(page);
    await page.keyboard.press('ArrowDown');
    await pictureChangesFrom(page, before);
    const back = await signature(page);
    await page.keyboard.press('ArrowUp');
    await pictureChangesFrom(page, back);
  });

  it('two viewers watch at once, and both see a press', async () => {
    const one = await person(alice.token);
    const two = await person();
    const [a, b] = [await signature(one), await signature(two)];
    await one.getByRole('button', { name: 'Down (KEY_DOWN)' }).click();
    await Promise.all([pictureChangesFrom(one, a), pictureChangesFrom(two, b)]);
  });

  it('a signed-out person sees the picture and "sign in to use the remote", with the remote disabled', async () => {
    const page = await person();
    await page.getByText('to use the remote').waitFor(WAIT);
    expect(await page.getByRole('button', { name: 'OK (KEY_OK)' }).isDisabled()).to.equal(true);
  });

  it("a press refused by another person's reservation shows the API's error", async () => {
    const page = await person(alice.token);
    const made = await bob.post('/api/v2/reservations').send({ node_ids: ['farmhand-test'], duration_secs: 600, message: 'soak test' });
    expect(made.status).to.equal(200);
    try {
      await page.getByRole('button', { name: 'OK (KEY_OK)' }).click();
      await page.locator('#remote-error').getByText(/reserved|bob/).waitFor(WAIT);
      const text = await page.locator('#remote-error').textContent();
      expect(text).to.include('KEY_OK');
      expect(text).to.include('bob');
    } finally {
      const id = (made.body as { reservations: { reservation_id: string }[] }).reservations[0]!.reservation_id;
      expect((await bob.delete(`/api/v2/reservations/${id}`)).status).to.equal(204);
    }
  });

  it('a dragged rectangle downloads as <name>.png with the exact pixels of the frame, with its Python line', async () => {
    const page = await person(alice.token);
    const box = (await page.locator('#live-canvas').boundingBox())!;
    // From frame pixel (100, 120) to (260, 300): well below the clock.
    const at = (x: number, y: number) => ({ x: box.x + (x / W) * box.width, y: box.y + (y / H) * box.height });
    const from = at(100.2, 120.2);
    const to = at(260.2, 300.2);
    await page.mouse.move(from.x, from.y);
    await page.mouse.down();
    await page.mouse.move(to.x, to.y, { steps: 5 });
    await page.mouse.up();
    const round = (v: number, size: number, frame: number) => Math.round(((v - (size === W ? box.x : box.y)) / (size === W ? box.width : box.height)) * frame);
    const r = { x: round(from.x, W, W), y: round(from.y, H, H), width: round(to.x, W, W) - round(from.x, W, W), height: round(to.y, H, H) - round(from.y, H, H) };
    await page.locator('#ref-name').fill('menu-item');
    const line = `wait_for_match("images/menu-item.png", region=Region(x=${r.x}, y=${r.y}, width=${r.width}, height=${r.height}))`;
    await page.locator('#ref-python').getByText(line).waitFor(WAIT);

    const [download] = await Promise.all([page.waitForEvent('download', WAIT), page.locator('#ref-download').click()]);
    expect(download.suggestedFilename()).to.equal('menu-item.png');
    const saved = await sharp(await readFile((await download.path()))).raw().toBuffer({ resolveWithObject: true });
    expect([saved.info.width, saved.info.height]).to.deep.equal([r.width, r.height]);

    // The same rectangle of a whole captured frame (the picture is still: no key pressed meanwhile).
    const full = await d.http.get('/app/live/frame.png').buffer(true).parse((res, cb) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => cb(null, Buffer.concat(chunks)));
    });
    expect(full.status).to.equal(200);
    const crop = await sharp(full.body as Buffer).extract({ left: r.x, top: r.y, width: r.width, height: r.height }).raw().toBuffer({ resolveWithObject: true });
    expect(saved.info.channels).to.equal(crop.info.channels);
    expect(saved.data.equals(crop.data)).to.equal(true);
  });

  it('the frame endpoint refuses a bad name or a rectangle outside the frame with a 400', async () => {
    expectError(await d.http.get('/app/live/frame.png?name=../x'), 400, 'invalid_request');
    expectError(await d.http.get(`/app/live/frame.png?x=0&y=0&width=${W + 1}&height=10`), 400, 'invalid_request');
    expectError(await d.http.get('/app/live/frame.png?x=1&y=2'), 400, 'invalid_request');
    const res = await d.http.get('/app/live/frame.png?name=screen&x=0&y=0&width=8&height=4');
    expect(res.status).to.equal(200);
    expect(res.headers['content-disposition']).to.equal('attachment; filename="screen.png"');
  });
});
