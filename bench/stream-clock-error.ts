/**
 * How far the recorder's stream clock (src/hardware/capture/stream-clock.ts)
 * is off on a real ffmpeg: the preview while recording (the fps filter,
 * ffmpeg-args.ts) fed raw frames at `--fps` from Node, the first frame
 * written while ffmpeg already waits on its stdin (so stream time 0 is the
 * moment of that write). For each preview rate it prints the range, over the
 * run, of the clock's error (its offset, the smallest
 * `arrival - hold - n / preview_fps` since the start, minus the true one):
 * positive means mapped times are late, negative early (docs/portal.md,
 * "Fourth round").
 *
 *   node --import tsx bench/stream-clock-error.ts [--secs 10] [--fps 25] [--preview 2,5,10,25]
 */
import { spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { ffmpegArgs, inputArgs, previewOutput } from '../src/hardware/capture/ffmpeg-args.js';
import { StreamClock } from '../src/hardware/capture/stream-clock.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : dflt;
};
const SECS = Number(arg('secs', '10'));
const FPS = Number(arg('fps', '25'));
const W = 640;
const H = 360;
const FRAME = W * H * 3;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

for (const previewFps of arg('preview', '2,5,10,25').split(',').map(Number)) {
  const args = ffmpegArgs(inputArgs('virtual:', { width: W, height: H, fps: FPS }), [previewOutput({ width: W, height: H, previewFps, constantRate: true })]);
  const child = spawn('ffmpeg', args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const clock = new StreamClock(previewFps, FPS);
  let have = 0;
  let first = 0;
  const errors: number[] = [];
  child.stdout.on('data', (chunk: Buffer) => {
    have += chunk.length;
    while (have >= FRAME) {
      have -= FRAME;
      clock.frame(performance.now());
      // The clock's idea of when stream time 0 was, against the true one.
      errors.push(clock.toMonotonic(0)! - first);
    }
  });
  await sleep(1500); // ffmpeg is up and blocked reading stdin: frame 0 is stamped as it is written
  const start = performance.now();
  first = start;
  let n = 0;
  while (performance.now() - start < SECS * 1000) {
    if (!child.stdin.writableNeedDrain) child.stdin.write(Buffer.alloc(FRAME, n % 250));
    n++;
    await sleep(Math.max(0, start + (n * 1000) / FPS - performance.now()));
  }
  child.stdin.end();
  await new Promise((r) => child.once('exit', r));
  const e = errors.slice(Math.round(previewFps * 2)); // once the window is full
  const f = (x: number) => x.toFixed(0);
  console.log(`preview ${previewFps} fps (input ${FPS}): clock error ${f(Math.min(...e))} to ${f(Math.max(...e))} ms (negative: early) over ${e.length} frames, load average ${loadavg()[0]!.toFixed(1)}`);
}
