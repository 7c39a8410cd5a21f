/**
 * Screenshots of the farm's pages on the portal (docs/farm.md, "Web pages on
 * the portal"), 1400x1000, headless Chromium, a real portal on a throwaway
 * PostgreSQL with three real nodes (one on the virtual set-top box) and a
 * fourth registered that never connected: docs/images/farm-front.png (the
 * front door signed in, two nodes ticked in the reservation form) and
 * docs/images/farm-result-offline.png (a result page of a node that went
 * offline, from the portal's storage) and docs/images/farm-job-offline.png
 * (that node's job page, from the portal's records). Run from the
 * repository root:
 *
 *   node --import tsx scripts/portal-screenshots/farm.ts
 */
import request from 'supertest';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../../test/fixtures/testPack.js';
import { launchBrowser } from '../../test/helpers/browser.js';
import { startTestFarm } from '../../test/helpers/farm.js';
import { waitFor } from '../../test/helpers/wait.js';

const OUT = 'docs/images';
const files = (node: string, name: string) => ({
  ...STANDARD_FILES,
  'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF,
  [`config/test-farm/${node}.conf`]: `[node]\nfriendly_name = ${name}\n\n[device_under_test]\ndevice_type = virtual-stb\n`,
});

const farm = await startTestFarm();
const browser = await launchBrowser();
try {
  await farm.addNode('stb-1', { files: files('stb-1', 'Living-room box (rack 3, shelf 2)'), config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 1280, height: 720, record_video: true } } });
  await farm.addNode('stb-2', { files: files('stb-2', 'Bedroom box (rack 3, shelf 3)') });
  await farm.addNode('stb-3', { files: files('stb-3', 'Cable box, firmware 7.1') });
  await registerNode(farm.db, 'stb-4');
  const token = await farm.tokenFor('alice');
  const bob = await farm.tokenFor('bob');
  const as = (t: string) => ({ post: (p: string) => request(farm.url).post(p).set('Authorization', `token ${t}`), get: (p: string) => request(farm.url).get(p).set('Authorization', `token ${t}`) });
  const job = await as(token).post('/api/v2/run_tests').send({ node_id: 'stb-1', test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/basic.py::test_error'] });
  await as(token).get(`/api/v2/jobs${job.body.job_uid as string}/await_completion?timeout=120`);
  await as(bob).post('/api/v2/reservations').send({ node_ids: ['stb-2'], message: 'Checking the EPG on build 42: please leave the box on channel 101', duration_secs: 3600 });
  const running = await as(token).post('/api/v2/run_tests').send({ node_id: 'stb-3', test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] });

  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await ctx.newPage();
  await page.goto(`${farm.url}/app/sign-in?next=%2F`);
  await page.getByLabel('Access token').fill(token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${farm.url}/`);
  await page.locator('#farm-front[data-live="on"]').waitFor({ timeout: 30_000 });
  // The running test case shows once its run has started (the page follows the event stream); a busy machine may be slower.
  await page
    .locator('tr[data-node-id="stb-3"] .current-test')
    .waitFor({ timeout: 90_000 })
    .catch(() => console.warn('the running test case did not show in time; taking the screenshot anyway'));
  // The reservation form in use: two nodes ticked, a message typed.
  await page.getByLabel('Select Living-room box (rack 3, shelf 2)').check();
  await page.getByLabel('Select Cable box, firmware 7.1').check();
  await page.locator('#farm-res-message').fill('Soak test of build 43 on both boxes');
  await page.locator('#farm-res-minutes').fill('120');
  await page.screenshot({ path: `${OUT}/farm-front.png` });
  await as(token).post(`/api/v2/jobs${running.body.job_uid as string}/stop`);
  console.log(`wrote ${OUT}/farm-front.png`);

  // stb-1 goes offline: its failed run's page comes from the portal's storage.
  const [fail] = (await as(token).get('/api/v2/results').query({ filter: '/stb-1/ result:fail' })).body as { result_id: string }[];
  await farm.nodes.get('stb-1')!.stop();
  await waitFor(() => farm.portal.hub.link('stb-1')?.online === false, { what: 'stb-1 to be offline', timeoutMs: 30_000 });
  await page.goto(`${farm.url}/app/results${fail!.result_id}`);
  await page.waitForFunction(() => (document.querySelector<HTMLVideoElement>('#run-video')?.readyState ?? 0) >= 1, undefined, { timeout: 30_000 });
  await page.screenshot({ path: `${OUT}/farm-result-offline.png` });
  console.log(`wrote ${OUT}/farm-result-offline.png`);
  // Its job page, from the portal's jobs table and index.
  await page.goto(`${farm.url}/app/jobs${job.body.job_uid as string}`);
  await page.screenshot({ path: `${OUT}/farm-job-offline.png` });
  console.log(`wrote ${OUT}/farm-job-offline.png`);
} finally {
  await browser.close();
  await farm.stop();
}
