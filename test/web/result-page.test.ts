/**
 * The result page in a real Chromium, on a real daemon recording the virtual
 * set-top box: the video and the run log on one clock (a line seeks the
 * video, the highlight follows the playhead), the artifact tree, a failed
 * match's template and frame, "run again" and the strip of the test case's runs.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { UI_CASE, UI_TEST } from '../fixtures/resultPagePack.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { asUser } from '../helpers/auth.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';


const CASE = UI_CASE;
const WAIT = { timeout: 30_000 };

/** Seconds of video of a log line: its stamp less the video's first frame (the mapping docs/portal.md gives). */
const offsetOf = (stamp: string, start: string): number => {
  const micros = Number(/\.(\d{6})/.exec(stamp)?.[1]?.slice(3) ?? 0) / 1000;
  return (Date.parse(stamp) + micros - Date.parse(start)) / 1000;
};

describe('portal: the result page', function () {
  this.timeout(300_000);
  let d: TestDaemon;
  let browser: Browser;
  let user: Awaited<ReturnType<typeof asUser>>;
  let ctx: BrowserContext;
  let page: Page;
  const runs: Array<{ result_id: string; test_pack_sha: string }> = [];

  async function runOnce(): Promise<{ result_id: string; test_pack_sha: string }> {
    const res = await user.post('/api/v2/run_tests').send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: [CASE] });
    expect(res.status, res.text).to.equal(200);
    await waitForJob(d, res.body.job_uid, 240_000);
    const [r] = (await user.get(`/api/v1/jobs${res.body.job_uid}/results`)).body as Array<{ result_id: string }>;
    return (await user.get(`/api/v2/results${r!.result_id}`)).body as { result_id: string; test_pack_sha: string };
  }

  before(async () => {
    d = await startTestDaemon({
      files: { ...STANDARD_FILES, 'tests/ui.py': UI_TEST },
      config: { capture: { uri: 'virtual:', width: 640, height: 360, record_video: true }, ir: { uri: 'virtual:' } },
    });
    await waitOnline(d, 30_000);
    user = await asUser(d, 'alice');
    runs.push(await runOnce(), await runOnce());
    browser = await launchBrowser();
    // Until sign-in lands, the browser is a person by the token header (the brief's shared contract).
    ctx = await browser.newContext({ extraHTTPHeaders: { Authorization: `token ${user.token}` }, viewport: { width: 1400, height: 1000 } });
    page = await ctx.newPage();
    await page.goto(`${d.url}/app/results${runs[1]!.result_id}`);
  });
  after(async () => {
    await browser?.close();
    await d?.stop();
  });

  it('the run failed with a video whose clock is recorded (video.json)', async () => {
    const listing = (await user.get(`/api/v2/results${runs[1]!.result_id}/artifacts/`)).body as Record<string, unknown>;
    expect(listing).to.include.keys('video.mp4', 'video.json', 'notes/report.txt', 'shots/start.png', 'match-failures/001-frame.png', 'match-failures/001-template.png');
    expect(await page.locator('#run-video').getAttribute('data-clock')).to.equal('recorded');
    expect(await page.locator('h1 .badge').textContent()).to.equal('fail');
  });

  it('plays the video; a click on a log line seeks the video to that line`s moment', async () => {
    await page.evaluate(async () => {
      const v = document.querySelector('video')!;
      v.muted = true;
      await v.play();
    });
    await page.waitForFunction(() => document.querySelector('video')!.currentTime > 0.2, undefined, WAIT);
    await page.evaluate(() => document.querySelector('video')!.pause());
    const start = (await page.locator('#run-video').getAttribute('data-video-start'))!;
    const line = page.locator('#runlog li', { hasText: /step 3$/ });
    const expected = offsetOf((await line.getAttribute('data-time'))!, start);
    expect(expected).to.be.greaterThan(0);
    await line.locator('a.ts').click();
    // Within a frame or two of the line's offset (25 fps).
    await page.waitForFunction((t) => Math.abs(document.querySelector('video')!.currentTime - t) < 0.08, expected, WAIT);
    expect(new URL(page.url()).hash).to.equal(`#t=${expected.toFixed(3)}`);
    await line.locator('span.text').click(); // the line's text seeks too
    await page.waitForFunction((t) => Math.abs(document.querySelector('video')!.currentTime - t) < 0.08, expected, WAIT);
  });

  it('the highlighted line follows the playhead', async () => {
    const start = (await page.locator('#run-video').getAttribute('data-video-start'))!;
    for (const step of ['step 4', 'step 1']) {
      const t = offsetOf((await page.locator('#runlog li', { hasText: new RegExp(`${step}$`) }).getAttribute('data-time'))!, start);
      await page.evaluate((at) => {
        document.querySelector('video')!.currentTime = at;
      }, t + 0.01);
      await page.locator('#runlog li.current', { hasText: new RegExp(`${step}$`) }).waitFor(WAIT);
      expect(await page.locator('#runlog li.current').count()).to.equal(1);
      expect(await page.locator('#runlog li.current').getAttribute('aria-current')).to.equal('true');
    }
  });

  it('the video carries the log as a WebVTT track on the same clock', async () => {
    const track = await user.get(`/app/results${runs[1]!.result_id}/log.vtt`);
    expect(track.status).to.equal(200);
    expect(track.type).to.equal('text/vtt');
    const start = (await page.locator('#run-video').getAttribute('data-video-start'))!;
    const expected = offsetOf((await page.locator('#runlog li', { hasText: /step 3$/ }).getAttribute('data-time'))!, start);
    await page.evaluate(() => {
      document.querySelector('video')!.textTracks[0]!.mode = 'hidden'; // loads the cues without showing them
    });
    const handle = await page.waitForFunction(
      () => {
        const cues = document.querySelector('video')!.textTracks[0]!.cues;
        const c = cues ? Array.from({ length: cues.length }, (_, i) => cues[i] as VTTCue).find((x) => x.text === 'step 3') : undefined;
        return c ? c.startTime : undefined;
      },
      undefined,
      WAIT,
    );
    const cue = { start: (await handle.jsonValue())! };
    expect(cue.start).to.be.closeTo(expected, 0.002);
  });

  it('the artifact tree shows a text artifact inline (as text) and an image inline', async () => {
    const text = page.locator('li[data-path="notes/report.txt"] pre.inline-text');
    await text.waitFor({ state: 'visible', ...WAIT });
    expect(await text.textContent()).to.equal('menu report: <b>fine</b>\n');
    const img = page.locator('li[data-path="shots/start.png"] img');
    await img.scrollIntoViewIfNeeded();
    await page.waitForFunction(() => (document.querySelector('li[data-path="shots/start.png"] img') as HTMLImageElement).naturalWidth === 640, undefined, WAIT);
    expect(await page.locator('li.folder > details[open] > summary', { hasText: 'notes/' }).count()).to.equal(1);
  });

  it('a failed wait_for_match shows the template it looked for beside the frame it got', async () => {
    const failure = page.locator('.match-failure').first();
    expect(await failure.textContent()).to.include('wait_for_match').and.include('timed out');
    await failure.scrollIntoViewIfNeeded();
    await page.waitForFunction(() => (document.querySelector('.match-failure .template img') as HTMLImageElement).naturalWidth === 40, undefined, WAIT);
    const frame = await failure.locator('.frame image').getAttribute('href');
    expect(frame).to.match(/\/artifacts\/match-failures\/001-frame\.png$/);
    const res = await user.get(frame!);
    expect(res.status).to.equal(200);
    expect(res.type).to.equal('image/png');
    expect(await failure.locator('.frame rect.best').getAttribute('width')).to.equal('40');
  });

  it('the older farmhand.wait_for_match is a check of its own: the closest frame, the template, the score', async () => {
    const check = page.locator('#checks li.check[data-kind="wait_for_match"]').last();
    await check.scrollIntoViewIfNeeded();
    expect(await check.locator('code.kind').textContent()).to.equal('wait_for_match');
    expect(await check.locator('.verdict').textContent()).to.match(/^score -?\d[\d.]* < threshold 0\.9; first pass failed, confirm pass not run$/);
    expect(await check.locator('svg rect.best').getAttribute('width')).to.equal('40');
    await page.waitForFunction(() => Array.from(document.querySelectorAll('#checks li.check figure.template img')).some((img) => (img as HTMLImageElement).naturalWidth === 40), undefined, WAIT);
  });

  it('the strip shows the test case`s other runs with their outcomes, marking this one', async () => {
    const strip = page.locator('ol.strip li');
    expect(await strip.count()).to.equal(2);
    expect(await strip.nth(1).getAttribute('class')).to.equal('run fail this');
    expect(await strip.nth(0).locator('a').getAttribute('href')).to.equal(`/app/results${runs[0]!.result_id}`);
    expect(await page.locator('a[rel="prev"]').getAttribute('href')).to.equal(`/app/results${runs[0]!.result_id}`);
    expect(await page.locator('a[rel="next"]').count()).to.equal(0);
    expect(await page.locator('.run-strip .verdict').textContent()).to.match(/^Not passed in any of the 2 runs/);
    await page.locator('a[rel="prev"]').click();
    await page.locator('a[rel="next"]').waitFor(WAIT);
    expect(await page.locator('a[rel="next"]').getAttribute('href')).to.equal(`/app/results${runs[1]!.result_id}`);
    await page.goBack();
  });

  it('"Run this test case again" starts a job of the same test case at the same revision', async () => {
    await page.goto(`${d.url}/app/results${runs[1]!.result_id}`);
    await page.locator('#rerun').click();
    const link = page.locator('#rerun-status a[data-job-uid]');
    await link.waitFor(WAIT);
    const jobUid = (await link.getAttribute('data-job-uid'))!;
    expect(await link.getAttribute('href'), 'the link goes to the job page').to.equal(`/app/jobs${jobUid}`);
    await waitForJob(d, jobUid, 240_000);
    // The job's runs, read through the API: the same test case at the same revision.
    const results = (await user.get(`/api/v1/jobs${jobUid}/results`)).body as Array<{ result_id: string; test_case: string }>;
    expect(results.map((r) => r.test_case)).to.deep.equal([CASE]);
    const rerun = (await user.get(`/api/v2/results${results[0]!.result_id}`)).body as { test_pack_sha: string };
    expect(rerun.test_pack_sha).to.equal(runs[1]!.test_pack_sha);
  });

  it('signed out, the page is readable and says to sign in to run again', async () => {
    const anon = await browser.newContext();
    try {
      const p = await anon.newPage();
      await p.goto(`${d.url}/app/results${runs[1]!.result_id}`);
      expect(await p.locator('#rerun').count()).to.equal(0);
      expect(await p.locator('.rerun a[href="/app/sign-in"]').textContent()).to.match(/^Sign in to run/);
    } finally {
      await anon.close();
    }
  });
});
