/**
 * Where the live view's press-to-picture time goes (docs/portal.md, "Live
 * view and web remote"): the same presses as bench/live-view-bench.ts, on a
 * daemon with bench/lib/live-probe.ts preloaded, which notes the time of
 * each stage on the daemon's side; the page notes its own (keydown, POST
 * answered, the changed frame drawn, the change seen). All times are
 * `performance.timeOrigin + performance.now()` in both processes. Prints
 * the median and p95 of each stage's time since the keydown.
 *
 *   node --import tsx bench/live-view-stages.ts [--presses 30] [--preview-fps 25] [--refresh-secs 300]
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { VSTB_LIRCD_CONF } from '../src/hardware/virtual/index.js';
import { TokenStore, tokensFile } from '../src/storage/tokens.js';
import { makeTestPack, STANDARD_FILES } from '../test/fixtures/testPack.js';
import { launchBrowser } from '../test/helpers/browser.js';
import { startBenchDaemon, writeDaemonConfig } from './lib/daemon.js';
import { percentile } from './lib/stats.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const PRESSES = arg('presses', 30);
const PREVIEW_FPS = arg('preview-fps', 25);
const REFRESH_SECS = arg('refresh-secs', 300);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const work = mkdtempSync(join(tmpdir(), 'farmhand-live-stages-'));
const pack = await makeTestPack({ ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF });
const probeFile = join(work, 'probe.jsonl');
writeFileSync(probeFile, '');
const dataDir = join(work, 'data');
mkdirSync(dataDir, { recursive: true });
const configFile = await writeDaemonConfig(work, pack.dir, dataDir, {
  capture: { uri: 'virtual:', width: 1280, height: 720, fps: 25, preview_fps: PREVIEW_FPS, record_video: false },
  ir: { uri: 'virtual:' },
});
const cfg = JSON.parse(readFileSync(configFile, 'utf8')) as { test_pack: { refresh_secs: number } };
cfg.test_pack.refresh_secs = REFRESH_SECS;
writeFileSync(configFile, JSON.stringify(cfg, null, 2));
const d = await startBenchDaemon({
  configFile,
  logFile: join(work, 'daemon.log'),
  probePath: '/readyz',
  preload: [fileURLToPath(new URL('./lib/live-probe.ts', import.meta.url))],
  env: { FARMHAND_LIVE_PROBE_FILE: probeFile },
});
const { token } = await new TokenStore(tokensFile(dataDir)).create('bench');

/** The page's own notes, installed before its scripts run. */
function pageProbe(): void {
  const w = window as unknown as { notes: { stage: string; t: number; seq?: number }[] };
  w.notes = [];
  document.addEventListener('keydown', () => w.notes.push({ stage: 'page.keydown', t: performance.timeOrigin + performance.now() }), { capture: true });
  const fetch0 = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = String(input instanceof Request ? input.url : input);
    const isPress = url.endsWith('/press');
    if (isPress) w.notes.push({ stage: 'page.post.sent', t: performance.timeOrigin + performance.now() });
    const res = await fetch0(input, init);
    if (isPress) w.notes.push({ stage: 'page.post.answered', t: performance.timeOrigin + performance.now() });
    return res;
  };
  new MutationObserver((records) => {
    for (const r of records) {
      const el = r.target as HTMLElement;
      if (r.attributeName === 'data-seq') w.notes.push({ stage: 'page.drawn', t: performance.timeOrigin + performance.now(), seq: Number(el.dataset.seq) });
    }
  }).observe(document, { subtree: true, attributes: true, attributeFilter: ['data-seq'] });
}

/** The picture's signature below the box's clock, as in live-view-bench.ts. */
function signature(): string {
  const c = document.getElementById('live-canvas') as HTMLCanvasElement;
  const small = document.createElement('canvas');
  small.width = 32;
  small.height = 18;
  const ctx = small.getContext('2d', { willReadFrequently: true })!;
  const top = Math.round(c.height * 0.15);
  ctx.drawImage(c, 0, top, c.width, c.height - top, 0, 0, 32, 18);
  return Array.from(ctx.getImageData(0, 0, 32, 18).data).join(',');
}
function changedAt(before: string): number | null {
  const c = document.getElementById('live-canvas') as HTMLCanvasElement;
  const small = document.createElement('canvas');
  small.width = 32;
  small.height = 18;
  const ctx = small.getContext('2d', { willReadFrequently: true })!;
  const top = Math.round(c.height * 0.15);
  ctx.drawImage(c, 0, top, c.width, c.height - top, 0, 0, 32, 18);
  const sig = Array.from(ctx.getImageData(0, 0, 32, 18).data).join(',');
  return sig === before ? null : performance.timeOrigin + performance.now();
}

interface Note {
  stage: string;
  t: number;
  seq?: number;
  start?: number;
}

const browser = await launchBrowser();
try {
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 }, extraHTTPHeaders: { Authorization: `token ${token}` } });
  await ctx.addInitScript(pageProbe);
  const page = await ctx.newPage();
  await page.goto(`${d.url}/app/live`);
  await page.waitForFunction(() => Number(document.getElementById('live-canvas')?.dataset.frames ?? 0) >= 10, undefined, { timeout: 60_000 });
  await page.locator('h1').click();
  await sleep(1000);
  // (earlier notes fall before the first keydown and are ignored)
  await page.evaluate(() => ((window as unknown as { notes: unknown[] }).notes.length = 0));

  const visible: number[] = [];
  for (let i = 0; i < PRESSES; i++) {
    const before = await page.evaluate(signature);
    await page.keyboard.press(i % 2 === 0 ? 'ArrowDown' : 'ArrowUp');
    const t = await page.waitForFunction(changedAt, before, { timeout: 30_000, polling: 'raf' }).catch(() => undefined);
    if (t === undefined) console.log(`press ${i + 1}: no change seen within 30 s`);
    else visible.push(Number(await t.jsonValue()));
    await sleep(150 + Math.random() * 150);
  }
  const pageNotes = await page.evaluate(() => (window as unknown as { notes: Note[] }).notes);
  const daemonNotes = readFileSync(probeFile, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Note);
  const all: Note[] = [...pageNotes, ...daemonNotes, ...visible.map((t) => ({ stage: 'page.visible', t }))].sort((a, b) => a.t - b.t);
  if (process.env.DUMP) writeFileSync(process.env.DUMP, JSON.stringify(all));
  const keydowns = pageNotes.filter((n) => n.stage === 'page.keydown').map((n) => n.t);

  // Per press: each stage's first time after the keydown (and before the next keydown).
  const stages = new Map<string, number[]>();
  const add = (stage: string, ms: number | undefined) => {
    if (ms === undefined) return;
    stages.set(stage, [...(stages.get(stage) ?? []), ms]);
  };
  let fetches = 0;
  keydowns.forEach((k, i) => {
    const end = keydowns[i + 1] ?? Infinity;
    const inPress = all.filter((n) => n.t >= k && n.t < end);
    const first = (stage: string, after = k) => inPress.find((n) => n.stage === stage && n.t >= after);
    const since = (n: Note | undefined) => (n === undefined ? undefined : n.t - k);
    if (first('testPack.fetch.start')) fetches++;
    for (const s of ['page.post.sent', 'policy.press.start', 'testPack.resolve.end', 'keys.press.start', 'ir.send.start', 'policy.press.end', 'page.post.answered']) {
      add(s, since(first(s)));
    }
    const ir = first('ir.send.start');
    // The box's new picture: `frame.ready` (FrameCache.publish), or before it existed the end of its SVG render.
    const render = ir && (first('frame.ready', ir.t) ?? first('render.end', ir.t));
    add('picture ready (frame.ready / render.end)', since(render));
    const fin = render && first('ffmpeg.in', render.t);
    add('ffmpeg.in (new picture written)', since(fin));
    const out = fin && first('ffmpeg.out', fin.t);
    add('ffmpeg.out (same picture read back)', since(out));
    const seq = out?.seq ?? Infinity;
    const jpeg = inPress.find((n) => n.stage === 'jpeg' && (n.seq ?? 0) >= seq);
    add('jpeg.start', jpeg?.start === undefined ? undefined : jpeg.start - k);
    add('jpeg.end', since(jpeg));
    add('send', since(inPress.find((n) => n.stage === 'send' && (n.seq ?? 0) >= seq)));
    add('page.drawn', since(inPress.find((n) => n.stage === 'page.drawn' && (n.seq ?? 0) >= seq)));
    add('page.visible', since(first('page.visible')));
  });
  console.log(`virtual box 1280x720, preview_fps ${PREVIEW_FPS}, refresh_secs ${REFRESH_SECS}: ${keydowns.length} presses, ${fetches} with a test-pack fetch`);
  console.log('stage (ms since the keydown)                 median    p95    min    max   n');
  for (const [stage, values] of stages) {
    const s = [...values].sort((a, b) => a - b);
    const f = (x: number) => x.toFixed(0).padStart(6);
    console.log(`${stage.padEnd(42)} ${f(percentile(s, 50))} ${f(percentile(s, 95))} ${f(s[0]!)} ${f(s.at(-1)!)} ${String(s.length).padStart(3)}`);
  }
  await ctx.close();
} catch (e) {
  console.log(`failed; the daemon's log ends:\n${readFileSync(join(work, 'daemon.log'), 'utf8').split('\n').slice(-30).join('\n')}`);
  throw e;
} finally {
  await browser.close();
  await d.stop();
  await pack.cleanup();
  rmSync(work, { recursive: true, force: true });
}
