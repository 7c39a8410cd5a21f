/**
 * Screenshots of the results list and the job page (docs/portal.md), 1400x1000,
 * headless Chromium on the virtual set-top box with the example test pack:
 *
 *   node --import tsx scripts/portal-screenshots/results.ts
 *
 * writes docs/images/portal-results.png and docs/images/portal-job.png.
 */
import { execFile } from 'node:child_process';
import { cp, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startDaemon } from '../../src/daemon.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { launchBrowser } from '../../test/helpers/browser.js';
import { testConfig } from '../../test/helpers/daemon.js';
import { capturingLogger } from '../../test/helpers/logger.js';

const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const OUT = path.join(ROOT, 'docs/images');

// A test that keeps writing to its log, so the job page has a running test with a live tail.
const WATCH = `import time

def test_watch_channel_banner():
    for i in range(10000):
        print("checking the channel banner, step %d: banner visible, no frozen frames" % i)
        time.sleep(0.4)
`;

const tmp = await mkdtemp(path.join(os.tmpdir(), 'farmhand-shots-'));
const pack = path.join(tmp, 'pack');
await cp(path.join(ROOT, 'examples/test-pack'), pack, { recursive: true });
await writeFile(path.join(pack, 'tests/watch.py'), WATCH);
const git = (...args: string[]) => exec('git', ['-C', pack, '-c', 'user.name=farmhand', '-c', 'user.email=farmhand@localhost', ...args]);
await git('init', '-q', '-b', 'main');
await git('add', '-A');
await git('commit', '-qm', 'Example test pack');

const cfg = testConfig(pack, path.join(tmp, 'data'), {
  node_id: 'farmhand-demo',
  capture: { uri: 'virtual:', width: 1280, height: 720 },
  ir: { uri: 'virtual:' },
});
const daemon = await startDaemon(cfg, capturingLogger());
const s = daemon.services;
const { token } = await new TokenStore(tokensFile(cfg.data_dir)).create('alice');
const post = async (p: string, body: unknown) => {
  const res = await fetch(`${daemon.url}${p}`, { method: 'POST', headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (!res.ok) throw new Error(`${p}: ${res.status} ${await res.text()}`);
  return (await res.json()) as { job_uid: string };
};
const run = (test_cases: string[], category: string) => post('/api/v2/run_tests', { node_id: 'farmhand-demo', test_pack_revision: 'main', test_cases, category });

const browser = await launchBrowser();
try {
  for (const [cases, category] of [
    [['tests/menus.py::test_open_settings', 'tests/menus.py::test_menu_wraps_around', 'tests/menus.py::test_channel_up'], 'nightly'],
    [['tests/example.py::test_passes', 'tests/menus.py::test_open_guide_and_go_back', 'tests/menus.py::test_tune_channel_with_digits'], 'smoke'],
  ] as const) {
    const job = await run([...cases], category);
    await s.jobs.whenEnded(job.job_uid);
  }
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  await page.goto(`${daemon.url}/app/results`);
  await page.waitForFunction(() => [...document.querySelectorAll<HTMLImageElement>('img.thumb')].every((i) => i.complete));
  await page.screenshot({ path: path.join(OUT, 'portal-results.png') });

  const job = await run(['tests/menus.py::test_channel_up', 'tests/watch.py::test_watch_channel_banner'], 'nightly');
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 }, extraHTTPHeaders: { Authorization: `token ${token}` } });
  const jp = await ctx.newPage();
  await jp.goto(`${daemon.url}/app/jobs${job.job_uid}`);
  await jp.waitForFunction(() => (document.getElementById('log-tail')?.textContent ?? '').split('step').length > 8, undefined, { timeout: 60_000 });
  await jp.screenshot({ path: path.join(OUT, 'portal-job.png') });
  await post(`/api/v2/jobs${job.job_uid}/stop`, {});
  await s.jobs.whenEnded(job.job_uid);
} finally {
  await browser.close();
  await daemon.stop();
  await rm(tmp, { recursive: true, force: true });
}
console.log('wrote docs/images/portal-results.png and docs/images/portal-job.png');
