/**
 * ffmpeg's own delay on the preview output of a `virtual:` capture: Node
 * feeds raw rgb24 frames at `--fps` (each one different: a counter in its
 * first bytes), reads the preview back from ffmpeg's stdout, and times each
 * frame from the start of its write to the end of its read. Variants add
 * flags to the daemon's own command line (ffmpeg-args.ts), so a flag is kept
 * only if it shortens this time. docs/portal.md, "Where the time went".
 *
 *   node --import tsx bench/ffmpeg-preview-delay.ts [--secs 10] [--fps 25] [--width 1280 --height 720] [--variants base,threads1,...]
 */
import { spawn } from 'node:child_process';
import { ffmpegArgs, inputArgs, previewOutput, type OutputSpec } from '../src/hardware/capture/ffmpeg-args.js';
import { percentile } from './lib/stats.js';

const arg = (name: string, dflt: string): string => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1]! : dflt;
};
const SECS = Number(arg('secs', '10'));
const FPS = Number(arg('fps', '25'));
const W = Number(arg('width', '1280'));
const H = Number(arg('height', '720'));
const FRAME = W * H * 3;

/** Each variant: extra global/input arguments and the preview output. */
const VARIANTS: Record<string, { before?: string[]; output: (o: OutputSpec) => OutputSpec }> = {
  base: { output: (o) => o },
  // The preview as it was before `-threads 1` (ffmpeg's default thread count: the frame-threaded copy kept a frame back).
  autothreads: { output: (o) => ({ args: o.args.filter((a, i, all) => !(a === '-threads' || all[i - 1] === '-threads')) }) },
  threads1: { before: ['-filter_threads', '1'], output: (o) => ({ args: ['-threads', '1', ...o.args] }) },
  filterthreads1: { before: ['-filter_threads', '1'], output: (o) => o },
  encthreads1: { output: (o) => ({ args: ['-threads', '1', ...o.args] }) },
  fpsencthreads1: { output: () => { const o = previewOutput({ width: W, height: H, previewFps: FPS, constantRate: true }); return { args: ['-threads', '1', ...o.args] }; } },
  nobuffer: { before: ['-fflags', 'nobuffer', '-flags', 'low_delay'], output: (o) => o },
  fpsfilter: { output: () => previewOutput({ width: W, height: H, previewFps: FPS, constantRate: true }) },
};

async function run(name: string): Promise<number[]> {
  const v = VARIANTS[name];
  if (!v) throw new Error(`unknown variant ${name}`);
  const input = inputArgs('virtual:', { width: W, height: H, fps: FPS });
  const args = ffmpegArgs({ ...input, args: [...(v.before ?? []), ...input.args] }, [v.output(previewOutput({ width: W, height: H, previewFps: FPS, constantRate: false }))]);
  const child = spawn('ffmpeg', args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const sent = new Map<number, number>();
  const delays: number[] = [];
  let pending: Buffer[] = [];
  let have = 0;
  child.stdout.on('data', (chunk: Buffer) => {
    pending.push(chunk);
    have += chunk.length;
    while (have >= FRAME) {
      const all = Buffer.concat(pending);
      const frame = all.subarray(0, FRAME);
      pending = [all.subarray(FRAME)];
      have -= FRAME;
      const t0 = sent.get(frame.readUInt32BE(0));
      if (t0 !== undefined) delays.push(performance.now() - t0);
    }
  });
  let n = 0;
  const start = performance.now();
  await new Promise<void>((resolve) => {
    const tick = (): void => {
      if (performance.now() - start > SECS * 1000) return resolve();
      if (!child.stdin.writableNeedDrain) {
        const f = Buffer.alloc(FRAME, n % 200);
        f.writeUInt32BE(++n, 0);
        sent.set(n, performance.now());
        child.stdin.write(f);
      }
      setTimeout(tick, Math.max(0, start + ((n + 1) * 1000) / FPS - performance.now()));
    };
    tick();
  });
  child.stdin.end();
  await new Promise((r) => child.once('exit', r));
  return delays.slice(FPS); // the first second warms up
}

for (const name of arg('variants', Object.keys(VARIANTS).join(',')).split(',')) {
  const d = (await run(name)).sort((a, b) => a - b);
  const f = (x: number) => x.toFixed(0).padStart(5);
  console.log(`${name.padEnd(10)} ${W}x${H} ${FPS} fps, write start to read end, ms: median ${f(percentile(d, 50))} p95 ${f(percentile(d, 95))} min ${f(d[0] ?? NaN)} max ${f(d.at(-1) ?? NaN)} n ${d.length}`);
}
