/**
 * stbt frames: `node --import tsx bench/stbt-frames-bench.ts [--secs 60] [--fps 25]`.
 *
 * The real capture path: ffmpeg reading raw 1280x720 frames from a feed at
 * `fps` (the `virtual:` input, like the virtual set-top box), the daemon's
 * FfmpegFrameSource with `preview_fps = fps`, the run's ControlServer with its
 * `next_frame` op, and a python3 child looping over `stbt.frames(timeout_secs=secs)`
 * that runs `stbt.match` (a 200x100 template in a 400x200 region) on every
 * frame. Each fed frame carries its number in 16 black/white blocks on its
 * top row, and the feed notes the wall-clock moment it wrote it: the moment
 * the "set-top box showed that picture". Prints, against the limits:
 *
 *   - frames skipped by frames(): frames the capture published (its seq) that
 *     the loop never saw; limit 0;
 *   - capture -> answer: from the picture's moment to the match's answer;
 *     limit median <= 1 frame interval;
 *   - Frame.time error: Frame.time minus the picture's moment; limit within
 *     one frame interval and never negative (early).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { FfmpegFrameSource } from '../src/hardware/capture/ffmpeg-frame-source.js';
import { ControlServer } from '../src/runner/control.js';
import { projectRoot } from '../src/version.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const SECS = arg('secs', 60);
const FPS = arg('fps', 25);
const W = 1280;
const H = 720;
const BITS = 16;
const wallNow = () => performance.timeOrigin + performance.now();

/** A picture with detail to match against (a gradient with squares), same for every frame. */
function basePicture(): Buffer {
  const b = Buffer.alloc(W * H * 3);
  for (let y = 0; y < H; y++) {
    for (let x = 0; x < W; x++) {
      const o = (y * W + x) * 3;
      const sq = ((x >> 5) + (y >> 5)) & 1;
      b[o] = (x * 255) / W;
      b[o + 1] = sq ? 200 : 40;
      b[o + 2] = (y * 255) / H;
    }
  }
  return b;
}

/** Frame `n`: the base with n's bits as 8x8 blocks on the top rows (white 1, black 0). */
function frameOf(base: Buffer, n: number): Buffer {
  const f = Buffer.from(base);
  for (let bit = 0; bit < BITS; bit++) {
    const v = (n >> bit) & 1 ? 255 : 0;
    for (let y = 0; y < 8; y++) f.fill(v, (y * W + bit * 8) * 3, (y * W + bit * 8 + 8) * 3);
  }
  return f;
}

const SCRIPT = `
import json, sys, time
import numpy
import stbt
secs = float(sys.argv[1])
first = stbt.get_frame()
template = numpy.ascontiguousarray(first[300:400, 500:700])
region = stbt.Region(400, 250, width=400, height=200)
out = []
for f in stbt.frames(timeout_secs=secs):
    n = 0
    for bit in range(${BITS}):
        if f[4, bit * 8 + 4, 1] > 128:
            n |= 1 << bit
    r = stbt.match(template, frame=f, region=region)
    out.append([f._seq, n, f.time * 1000, time.time() * 1000, bool(r)])
json.dump(out, sys.stdout)
`;

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
const pct = (xs: number[], p: number): number => sorted(xs)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const describe = (xs: number[]): string =>
  `min ${Math.min(...xs).toFixed(1)}  median ${pct(xs, 0.5).toFixed(1)}  p90 ${pct(xs, 0.9).toFixed(1)}  max ${Math.max(...xs).toFixed(1)} ms`;

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'farmhand-stbt-frames-bench-'));
  const base = basePicture();
  const shownAt = new Map<number, number>();
  let written = 0;
  const feed = (stdin: Writable) => {
    let n = 0;
    let due = performance.now();
    let timer: NodeJS.Timeout | undefined;
    const tick = () => {
      if (!stdin.writableNeedDrain) {
        n = (n + 1) % (1 << BITS);
        stdin.write(frameOf(base, n));
        shownAt.set(n, wallNow());
        written++;
      }
      due += 1000 / FPS;
      timer = setTimeout(tick, Math.max(0, due - performance.now()));
    };
    tick();
    return () => clearTimeout(timer);
  };
  const frames = new FfmpegFrameSource({ uri: 'virtual:', width: W, height: H, fps: FPS, preview_fps: FPS, ffmpeg: 'ffmpeg', feed });
  const control = new ControlServer({
    keys: { press: () => Promise.resolve() },
    latestFrame: () => frames.latestFrame(),
    onFrames: (l) => frames.onFrames(l),
    tmpDir: dir,
  });
  try {
    await frames.start();
    while (!frames.latestFrame()) await new Promise((r) => setTimeout(r, 50));
    const channel = await control.open({ resultDir: dir, testPackSha: 'a'.repeat(40), remote: null });
    const child = spawn('/usr/bin/python3', ['-c', SCRIPT, String(SECS)], {
      env: { ...process.env, ...channel.env, PYTHONPATH: join(projectRoot, 'python') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    await channel.close();
    if (code !== 0) throw new Error(`the Python script exited with ${String(code)}`);
    const rows = JSON.parse(out) as [number, number, number, number, boolean][];
    const seqs = rows.map((r) => r[0]);
    const skipped = seqs.slice(1).reduce((acc, s, i) => acc + Math.max(0, s - seqs[i]! - 1), 0);
    const repeated = seqs.slice(1).filter((s, i) => s <= seqs[i]!).length;
    const known = rows.filter((r) => shownAt.has(r[1]));
    const toAnswer = known.map((r) => r[3] - shownAt.get(r[1])!);
    const timeErr = known.map((r) => r[2] - shownAt.get(r[1])!);
    const interval = 1000 / FPS;
    const early = timeErr.filter((e) => e < 0).length;
    const late = timeErr.filter((e) => e > interval).length;
    console.log(`${SECS} s at ${FPS} fps, 1280x720: ${written} frames fed, ${seqs.length ? seqs[seqs.length - 1]! - seqs[0]! + 1 : 0} published by capture while the loop ran, ${rows.length} yielded by stbt.frames(), ${rows.filter((r) => r[4]).length} matched`);
    console.log(`frames skipped by frames(): ${skipped} (limit 0) -> ${skipped === 0 ? 'met' : 'NOT met'}; repeated: ${repeated}`);
    console.log(`picture shown -> match answered: ${describe(toAnswer)}; limit median <= ${interval} ms: ${(pct(toAnswer, 0.5) / interval).toFixed(2)} x -> ${pct(toAnswer, 0.5) <= interval ? 'met' : 'NOT met'}`);
    console.log(`Frame.time - picture shown:      ${describe(timeErr)}; limit 0..${interval} ms: ${early} early, ${late} later than one interval -> ${early === 0 && late === 0 ? 'met' : 'NOT met'}`);
  } finally {
    await control.close();
    await frames.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
