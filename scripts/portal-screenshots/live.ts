/**
 * docs/images/portal-live.png: the live view and web remote at 1400x1000 in
 * headless Chromium, on the virtual set-top box at 1280x720, with a reference
 * rectangle dragged on the picture.
 *
 *   node --import tsx scripts/portal-screenshots/live.ts
 */
import { fileURLToPath } from 'node:url';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../../test/fixtures/testPack.js';
import { asUser } from '../../test/helpers/auth.js';
import { launchBrowser } from '../../test/helpers/browser.js';
import { startTestDaemon, waitOnline } from '../../test/helpers/daemon.js';

const OUT = fileURLToPath(new URL('../../docs/images/portal-live.png', import.meta.url));

const d = await startTestDaemon({
  files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF },
  config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 1280, height: 720, preview_fps: 25 } },
});
const browser = await launchBrowser();
try {
  await waitOnline(d, 30_000);
  const { token } = await asUser(d, 'alice');
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 }, extraHTTPHeaders: { Authorization: `token ${token}` } });
  const page = await ctx.newPage();
  await page.goto(`${d.url}/app/live`);
  await page.waitForFunction(() => Number(document.getElementById('live-canvas')?.dataset.frames ?? 0) >= 30, undefined, { timeout: 60_000 });
  const box = (await page.locator('#live-canvas').boundingBox())!;
  const at = (x: number, y: number) => [box.x + (x / 1280) * box.width, box.y + (y / 720) * box.height] as const;
  await page.mouse.move(...at(80, 150));
  await page.mouse.down();
  await page.mouse.move(...at(520, 260), { steps: 5 });
  await page.mouse.up();
  await page.locator('#ref-name').fill('live-tv-focused');
  await page.waitForFunction(() => (document.getElementById('live-status')?.textContent ?? '').startsWith('Live:'), undefined, { timeout: 30_000 });
  await page.screenshot({ path: OUT });
  console.log(`wrote ${OUT}`);
} finally {
  await browser.close();
  await d.stop();
}
