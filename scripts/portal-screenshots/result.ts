/**
 * docs/images/portal-result.png: the result page of a failed run on the
 * virtual set-top box (720p, recorded video), 1400x1000 in headless Chromium.
 * Run: node --import tsx scripts/portal-screenshots/result.ts
 */
import { mkdir } from 'node:fs/promises';
import { UI_CASE, UI_TEST } from '../../test/fixtures/resultPagePack.js';
import { STANDARD_FILES } from '../../test/fixtures/testPack.js';
import { asUser } from '../../test/helpers/auth.js';
import { launchBrowser } from '../../test/helpers/browser.js';
import { startTestDaemon, waitForJob, waitOnline } from '../../test/helpers/daemon.js';

const OUT = 'docs/images/portal-result.png';

const d = await startTestDaemon({
  files: { ...STANDARD_FILES, 'tests/ui.py': UI_TEST },
  config: { capture: { uri: 'virtual:', width: 1280, height: 720, record_video: true }, ir: { uri: 'virtual:' } },
});
const browser = await launchBrowser();
try {
  await waitOnline(d, 30_000);
  const user = await asUser(d, 'alice');
  let last = '';
  // Two runs of the test case, so the strip shows another run.
  for (const cases of [[UI_CASE], [UI_CASE]]) {
    const res = await user.post('/api/v2/run_tests').send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: cases });
    if (res.status !== 200) throw new Error(res.text);
    await waitForJob(d, res.body.job_uid, 240_000);
    last = ((await user.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<{ result_id: string }>)[0]!.result_id;
  }
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 }, extraHTTPHeaders: { Authorization: `token ${user.token}` } });
  const page = await ctx.newPage();
  await page.goto(`${d.url}/app/results${last}`);
  // Show a moment of the run: the video at a log line, that line highlighted.
  const line = page.locator('#runlog li', { hasText: /step 3$/ });
  await line.locator('a.ts').click();
  await page.locator('#runlog li.current').waitFor({ timeout: 30_000 });
  await page.waitForFunction(() => document.querySelector('video')!.readyState >= 2, undefined, { timeout: 30_000 });
  await mkdir('docs/images', { recursive: true });
  await page.screenshot({ path: OUT });
  console.log(`wrote ${OUT}`);
} finally {
  await browser.close();
  await d.stop();
}
