/**
 * Screenshots of the front door and the sign-in page (docs/portal.md):
 * docs/images/portal-front.png and docs/images/portal-sign-in.png, 1400x1000,
 * headless Chromium on the virtual set-top box. Run from the repository root:
 *
 *   node --import tsx scripts/portal-screenshots/front.ts
 */
import { VSTB_LIRCD_CONF, VSTB_REMOTE_NAME } from '../../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../../test/fixtures/testPack.js';
import { asUser } from '../../test/helpers/auth.js';
import { launchBrowser } from '../../test/helpers/browser.js';
import { startTestDaemon, waitOnline } from '../../test/helpers/daemon.js';
import { waitFor } from '../../test/helpers/wait.js';

const NODE = 'farmhand-test';
const OUT = 'docs/images';

const d = await startTestDaemon({
  files: {
    ...STANDARD_FILES,
    'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF,
    'config/test-farm/farmhand-test.conf': '[node]\nfriendly_name = Living-room box (rack 3, shelf 2)\n\n[device_under_test]\ndevice_type = virtual-stb\n',
  },
  config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 1280, height: 720 } },
});
const browser = await launchBrowser();
try {
  await waitOnline(d, 60_000);
  const alice = await asUser(d, 'alice');
  // A few results for the list: a pass, a fail, an error.
  const done = await alice.post('/api/v2/run_tests').send({
    node_id: NODE,
    test_pack_revision: 'main',
    test_cases: ['tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/basic.py::test_error'],
    remote_control: VSTB_REMOTE_NAME,
  });
  await waitFor(async () => (await alice.get(`/api/v2/jobs${done.body.job_uid as string}`)).body.status === 'exited', { what: 'the first job', timeoutMs: 120_000 });
  await alice.post('/api/v2/reservations').send({ node_ids: [NODE], message: 'Checking the EPG on build 42: please leave the box on channel 101', duration_secs: 3600 });
  const running = await alice.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'], remote_control: VSTB_REMOTE_NAME });

  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page = await ctx.newPage();
  await page.goto(`${d.url}/app/sign-in?next=%2F`);
  await page.screenshot({ path: `${OUT}/portal-sign-in.png` });
  await page.getByLabel('Access token').fill(alice.token);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.waitForURL(`${d.url}/`);
  await page.locator('#job .current-test').waitFor({ timeout: 60_000 });
  await page.locator('#front[data-live="yes"]').waitFor({ timeout: 30_000 });
  await page.screenshot({ path: `${OUT}/portal-front.png` });
  await alice.post(`/api/v2/jobs${running.body.job_uid as string}/stop`);
  console.log(`wrote ${OUT}/portal-sign-in.png and ${OUT}/portal-front.png`);
} finally {
  await browser.close();
  await d.stop();
}
