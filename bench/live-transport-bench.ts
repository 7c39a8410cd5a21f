/**
 * The live view's transport alternatives, measured back to back before one
 * was chosen (docs/portal.md, "Why ..."). Each alternative runs alone in a
 * child process (bench/lib/transport-server.ts: a 1280x720 rgb24 source at
 * 25 fps, one shared encoder while someone watches, an HTTP stream), and
 * for each this prints:
 *
 * - CPU of the child's process group (Node + its ffmpeg processes, from
 *   /proc) over `--window` seconds with 0, 1 and 10 viewers (plain HTTP
 *   clients counting what they receive), and the extra over 0 viewers;
 * - in headless Chromium (where the page can show it): frames shown a
 *   second and the age of each frame when drawn (raw frame read by Node to
 *   the frame drawn in the canvas: the encoder, the transport and the
 *   page's decode), median and p95;
 * - bytes a second per viewer.
 *
 * Sources: `testsrc` (every frame new: every frame encoded) and `still` (a
 * picture with a patch changing once a second: a set-top box menu with a
 * clock). The load average is printed with every row: the machine may be
 * shared, so compare rows of one run, not across runs.
 *
 *   node --import tsx bench/live-transport-bench.ts [--window 8] [--modes sharp80,sharp-fast,...] [--sources testsrc,still]
 */
import { execFileSync, spawn } from 'node:child_process';
import http from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { mkdtempSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import sharp, { type Sharp } from 'sharp';
import { launchBrowser } from '../test/helpers/browser.js';
import { freePort, groupCpuSecs, spawnLogged, tail, type Spawned } from './lib/processes.js';
import { percentile } from './lib/stats.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : dflt;
};
const WINDOW_S = Number(arg('window', '8'));
const MODES = arg('modes', 'sharp80,sharp-fast,sharp-540,ffmpeg-mjpeg,x264,x264-tap').split(',');
const SOURCES = arg('sources', 'testsrc,still').split(',');
const RESEND = arg('resend', 'yes,no').split(',');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const work = mkdtempSync(join(tmpdir(), 'farmhand-transport-bench-'));
const server = fileURLToPath(new URL('./lib/transport-server.ts', import.meta.url));
const load = () => loadavg()[0]!.toFixed(1);

function viewer(url: string): { bytes: () => number; close: () => void } {
  let bytes = 0;
  const req = http.get(url, (res) => res.on('data', (c: Buffer) => (bytes += c.length)));
  req.on('error', () => undefined);
  return { bytes: () => bytes, close: () => req.destroy() };
}

const counts = (base: string) =>
  new Promise<{ raw: number; encoded: number }>((resolve, reject) =>
    http
      .get(`${base}/stats`, (res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => resolve(JSON.parse(body) as { raw: number; encoded: number }));
      })
      .on('error', reject),
  );

interface Window {
  cores: number;
  bps: number;
  /** Raw frames from the source and frames out of the encoder, a second. */
  raw: number;
  encoded: number;
}

async function cpuWith(s: Spawned, base: string, url: string, n: number): Promise<Window> {
  const vs = Array.from({ length: n }, () => viewer(url));
  await sleep(2000);
  const b0 = vs.map((v) => v.bytes());
  const k0 = await counts(base);
  const c0 = groupCpuSecs(s.pid);
  const t0 = performance.now();
  await sleep(WINDOW_S * 1000);
  const c1 = groupCpuSecs(s.pid);
  const k1 = await counts(base);
  const secs = (performance.now() - t0) / 1000;
  const bps = n === 0 ? 0 : Math.min(...vs.map((v, i) => (v.bytes() - b0[i]!) / secs));
  for (const v of vs) v.close();
  await sleep(700);
  return { cores: (c1.user + c1.system - c0.user - c0.system) / secs, bps, raw: (k1.raw - k0.raw) / secs, encoded: (k1.encoded - k0.encoded) / secs };
}

/**
 * The extra CPU scaled to a full 25 new frames a second: on a loaded machine
 * the source makes fewer frames than 25 a second, so the raw figure is low.
 * The source's own cost per raw frame comes from the 0-viewer window; the
 * rest, per frame out of the encoder, times 25. (For `still` the figure is
 * per changed frame: it only says what a moving picture would cost.)
 */
function extraAt25(zero: Window, w: Window): number {
  const sourcePerFrame = zero.raw > 0 ? zero.cores / zero.raw : 0;
  const extra = w.cores - sourcePerFrame * w.raw;
  return w.encoded > 0 ? (extra / w.encoded) * 25 : NaN;
}

/**
 * CPU time per 720p frame of each encoder, on `--frames` (100) frames of testsrc2 (every
 * frame new), encoded one after another: CPU time, not wall time, so the
 * figure holds on a loaded machine (cache and SMT contention aside).
 */
async function encoderCosts(): Promise<void> {
  const N = Number(arg('frames', '100'));
  const raw = execFileSync('ffmpeg', ['-hide_banner', '-loglevel', 'error', '-f', 'lavfi', '-i', `testsrc2=size=1280x720:rate=25`, '-frames:v', String(N), '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-'], { maxBuffer: 1 << 30 });
  const FRAME = 1280 * 720 * 3;
  const frames = Array.from({ length: N }, (_, i) => raw.subarray(i * FRAME, (i + 1) * FRAME));
  const line = (name: string, cpuMs: number, bytes: number, note = '') =>
    console.log(`| ${name} | ${(cpuMs / N).toFixed(1)} ms | ${((cpuMs / N) * 25 / 1000).toFixed(3)} | ${(bytes / N / 1000).toFixed(0)} kB | ${load()} | ${note}`);
  console.log(`\nEncoder CPU per 1280x720 frame (${N} testsrc2 frames, CPU time)`);
  console.log('| encoder | CPU a frame | cores at 25 fps | size a frame | load avg | |');
  console.log('|---|---|---|---|---|---|');
  const sharpVariants: [string, (img: Sharp) => Sharp][] = [
    ['sharp q80 (today)', (i) => i.jpeg({ quality: 80 })],
    ['sharp q80, optimiseCoding off', (i) => i.jpeg({ quality: 80, optimiseCoding: false })],
    ['sharp q75, optimiseCoding off, 4:2:0', (i) => i.jpeg({ quality: 75, optimiseCoding: false, chromaSubsampling: '4:2:0' })],
    ['sharp q60, optimiseCoding off, 4:2:0', (i) => i.jpeg({ quality: 60, optimiseCoding: false, chromaSubsampling: '4:2:0' })],
    ['sharp 960x540 q75, optimiseCoding off', (i) => i.resize(960, 540, { kernel: 'linear' }).jpeg({ quality: 75, optimiseCoding: false })],
    ['sharp 640x360 q75, optimiseCoding off', (i) => i.resize(640, 360, { kernel: 'linear' }).jpeg({ quality: 75, optimiseCoding: false })],
  ];
  for (const [name, f] of sharpVariants) {
    for (const fr of frames.slice(0, 3)) await f(sharp(fr, { raw: { width: 1280, height: 720, channels: 3 } })).toBuffer(); // warm up
    const c0 = process.cpuUsage();
    let bytes = 0;
    for (const fr of frames) bytes += (await f(sharp(fr, { raw: { width: 1280, height: 720, channels: 3 } })).toBuffer()).length;
    const c = process.cpuUsage(c0);
    line(name, (c.user + c.system) / 1000, bytes);
  }
  const ffmpegVariants: [string, string[]][] = [
    ['ffmpeg mjpeg -q:v 5 (fed by Node)', ['-c:v', 'mjpeg', '-q:v', '5', '-pix_fmt', 'yuvj420p', '-f', 'mpjpeg']],
    ['ffmpeg mjpeg -q:v 8 (fed by Node)', ['-c:v', 'mjpeg', '-q:v', '8', '-pix_fmt', 'yuvj420p', '-f', 'mpjpeg']],
    ['libx264 ultrafast zerolatency (fed by Node)', ['-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-pix_fmt', 'yuv420p', '-g', '50', '-f', 'h264']],
    ['libx264 ultrafast zerolatency, 1 thread', ['-c:v', 'libx264', '-preset', 'ultrafast', '-tune', 'zerolatency', '-threads', '1', '-pix_fmt', 'yuv420p', '-g', '50', '-f', 'h264']],
    ['ffmpeg reading the frames only (baseline of the two above)', ['-f', 'null']],
  ];
  for (const [name, args] of ffmpegVariants) {
    const cmd = `TIMEFORMAT='%U %S'; time ffmpeg -hide_banner -loglevel error -f rawvideo -pix_fmt rgb24 -s 1280x720 -framerate 25 -i pipe:0 ${args.join(' ')} pipe:1 | wc -c`;
    const child = spawn('bash', ['-c', cmd], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const c0 = process.cpuUsage();
    for (const fr of frames) if (!child.stdin.write(fr)) await new Promise((r) => child.stdin.once('drain', r));
    child.stdin.end();
    const node = process.cpuUsage(c0);
    await new Promise((r) => child.once('exit', r));
    const [u, sy] = err.trim().split('\n').at(-1)!.split(' ').map(Number);
    const ffmpegMs = (u! + sy!) * 1000;
    const nodeMs = (node.user + node.system) / 1000;
    line(name, ffmpegMs + nodeMs, Number(out.trim()), `ffmpeg ${(ffmpegMs / N).toFixed(1)} ms + Node's pipe ${(nodeMs / N).toFixed(1)} ms a frame`);
  }
}

if (!process.argv.includes('--no-encoders')) await encoderCosts();
if (process.argv.includes('--encoders-only')) process.exit(0);

const browser = await launchBrowser();
const rows: string[] = [];
try {
  for (const source of SOURCES) {
    for (const mode of MODES) {
      if (mode === 'x264-tap' && source !== 'testsrc') continue;
      for (const resend of mode.startsWith('sharp') && source === 'still' ? RESEND : ['no']) {
        const port = await freePort();
        const log = join(work, `${source}-${mode}.log`);
        const s = spawnLogged(process.execPath, ['--import', 'tsx', server, '--port', String(port), '--source', source, '--mode', mode, '--resend', resend], log);
        try {
          const base = `http://127.0.0.1:${port}`;
          for (let i = 0; ; i++) {
            const up = await new Promise<boolean>((r) => http.get(`${base}/page`, (res) => r(res.resume() && res.statusCode === 200)).on('error', () => r(false)));
            if (up) break;
            if (i > 100) throw new Error(`server did not start: ${tail(log)}`);
            await sleep(200);
          }
          const url = `${base}/${mode.startsWith('x264') ? 'h264' : 'stream'}`;
          const l0 = load();
          const zero = await cpuWith(s, base, url, 0);
          const one = await cpuWith(s, base, url, 1);
          const ten = await cpuWith(s, base, url, 10);
          // The page: frames shown and their age.
          const page = await browser.newPage();
          await page.goto(`${base}/page`);
          await page.waitForFunction(() => (window as unknown as { stats: { shown: number } }).stats?.shown >= 1, undefined, { timeout: 30_000 }).catch(() => undefined);
          await page.evaluate(() => {
            const st = (window as unknown as { stats: { shown: number; ages: number[] } }).stats;
            st.shown = 0;
            st.ages = [];
          });
          const t0 = performance.now();
          await sleep(WINDOW_S * 1000);
          const st = await page.evaluate(() => (window as unknown as { stats: { shown: number; ages: number[] } }).stats);
          const secs = (performance.now() - t0) / 1000;
          await page.close();
          const ages = [...st.ages].sort((a, b) => a - b);
          const age = ages.length ? `${percentile(ages, 50).toFixed(0)} / ${percentile(ages, 95).toFixed(0)} ms` : 'none shown';
          const row = `| ${source} | ${mode}${mode.startsWith('sharp') && source === 'still' ? ` (resend ${resend})` : ''} | ${zero.cores.toFixed(3)} | ${one.cores.toFixed(3)} | ${ten.cores.toFixed(3)} | **${(one.cores - zero.cores).toFixed(3)}** | **${(ten.cores - zero.cores).toFixed(3)}** | ${one.raw.toFixed(1)} / ${one.encoded.toFixed(1)} | ${source === 'testsrc' ? `${extraAt25(zero, one).toFixed(3)} / ${extraAt25(zero, ten).toFixed(3)}` : '-'} | ${(st.shown / secs).toFixed(1)} | ${age} | ${(one.bps / 1e6).toFixed(2)} MB/s | ${l0}-${load()} |`;
          rows.push(row);
          console.log(row);
        } finally {
          await s.stop();
        }
      }
    }
  }
} finally {
  await browser.close();
  rmSync(work, { recursive: true, force: true });
}
console.log(`\nWindows of ${WINDOW_S} s; extra = over 0 viewers; frame age = raw frame read in Node to drawn in Chromium.`);
console.log('| source | mode | 0 viewers | 1 viewer | 10 viewers | extra, 1 | extra, 10 | frames/s in / out (1 viewer) | extra at 25 new frames/s, 1 / 10 | fps shown | frame age median / p95 | bytes/s a viewer | load avg |');
console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|');
for (const r of rows) console.log(r);
