/**
 * Capture benchmark: `node --import tsx bench/capture-bench.ts`.
 * For 720p and 1080p testsrc2 at 25 fps with a 5 fps preview, prints the CPU
 * used while capturing (ffmpeg from /proc/<pid>/stat, Node from
 * process.cpuUsage, in cores), then the median of 20 screenshotPng() calls
 * against a bare sharp PNG encode (compression level 1) of the same raw frame
 * in the same run, the thumbnail latency, and the cost of latestFrame()'s copy.
 * Then the same capture with recording on (libx264 segments, DESIGN.md's
 * presets): CPU of ffmpeg and Node, and whether recording keeps real time -
 * the frames and stream seconds of a clip cut over the measuring window,
 * against the wall-clock seconds of that window.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { FfmpegFrameSource } from '../src/hardware/capture/index.js';

const RUNS = 20;
const CPU_SECS = 5;
const RECORD_SECS = 10;
const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (x: number) => `${x.toFixed(1)} ms`;

/** utime + stime of a process, in seconds. */
function procCpuSecs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLK_TCK; // fields 14 and 15 of proc(5)
}

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await fn();
  return performance.now() - t0;
}

async function measureCpu(source: FfmpegFrameSource, secs = CPU_SECS): Promise<{ ffmpeg: number; node: number }> {
  const pid = source.pid()!;
  const f0 = procCpuSecs(pid);
  const n0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(secs * 1000);
  const wall = (performance.now() - t0) / 1000;
  const n = process.cpuUsage(n0);
  return { ffmpeg: (procCpuSecs(pid) - f0) / wall, node: (n.user + n.system) / 1e6 / wall };
}

async function bench(width: number, height: number): Promise<void> {
  const source = new FfmpegFrameSource({ uri: 'testsrc:', width, height, fps: 25, preview_fps: 5, ffmpeg: 'ffmpeg' });
  await source.start();
  try {
    while (!source.health().online) await sleep(20);
    const cpu = await measureCpu(source);
    const shot: number[] = [];
    const bare: number[] = [];
    const thumb: number[] = [];
    const copy: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      // Alternate the two PNG paths so load from other processes hits both alike.
      shot.push(await timed(() => source.screenshotPng()));
      const raw = source.latestFrame()!;
      bare.push(await timed(() => sharp(raw.data, { raw: { width, height, channels: 3 } }).png({ compressionLevel: 1 }).toBuffer()));
      thumb.push(await timed(() => source.thumbnailJpeg()));
      copy.push(await timed(async () => source.latestFrame()));
    }
    const [s, b] = [median(shot), median(bare)];
    console.log(`${width}x${height} testsrc2 @25 fps, preview 5 fps`);
    console.log(`  CPU while capturing (${CPU_SECS} s): ffmpeg ${cpu.ffmpeg.toFixed(3)} cores, node ${cpu.node.toFixed(3)} cores`);
    console.log(`  screenshotPng() median of ${RUNS}: ${ms(s)}; bare sharp PNG (level 1): ${ms(b)}; ratio ${(s / b).toFixed(2)}`);
    console.log(`  thumbnailJpeg() median of ${RUNS}: ${ms(median(thumb))}`);
    console.log(`  latestFrame() copy median of ${RUNS}: ${ms(median(copy))}`);
  } finally {
    await source.stop();
  }
}

/** Frames and duration of a video file, from ffprobe. */
function probe(file: string): { frames: number; secs: number } {
  const out = execFileSync('ffprobe', ['-v', 'error', '-count_frames', '-select_streams', 'v:0',
    '-show_entries', 'stream=nb_read_frames:format=duration', '-of', 'default=nw=1:nk=1', file], { encoding: 'utf8' });
  const [frames, secs] = out.trim().split('\n').map(Number);
  return { frames: frames!, secs: secs! };
}

async function benchRecording(width: number, height: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'farmhand-bench-'));
  const source = new FfmpegFrameSource({
    uri: 'testsrc:', width, height, fps: 25, preview_fps: 5, ffmpeg: 'ffmpeg', recording: { dir: join(dir, 'recording') },
  });
  await source.start();
  try {
    while (source.recorder()!.segments().length < 2) await sleep(50);
    const clip = source.recorder()!.begin();
    const t0 = performance.now();
    const cpu = await measureCpu(source, RECORD_SECS);
    const wall = (performance.now() - t0) / 1000;
    await clip.finish(dir);
    const video = probe(join(dir, 'video.mp4'));
    const args = source.commandArgs();
    console.log(`${width}x${height} testsrc2 @25 fps, preview 5 fps, recording (x264 ${args[args.indexOf('-preset') + 1]})`);
    console.log(`  CPU while capturing and recording (${RECORD_SECS} s): ffmpeg ${cpu.ffmpeg.toFixed(3)} cores, node ${cpu.node.toFixed(3)} cores`);
    console.log(`  clip of a ${wall.toFixed(2)} s window: ${video.secs.toFixed(2)} s, ${video.frames} frames = ` +
      `${(video.frames / video.secs).toFixed(2)} frames per video second`);
    const rt = realtime(source);
    console.log(`  recording: ${rt.ratio.toFixed(3)} stream seconds written per wall second over ${rt.segments} segments; ` +
      `a segment close reached Node ${ms(rt.latency)} (median) after its last frame was captured (stream clock)`);
  } finally {
    await source.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Stream seconds of the segments ffmpeg closed, per second of Node's clock
 * between the first and last close (1.000 = real time; below it falls
 * behind), and how long after its end a segment's close reached Node.
 */
function realtime(source: FfmpegFrameSource): { ratio: number; segments: number; latency: number } {
  const segs = source.recorder()!.segments().slice(1); // the first segment includes ffmpeg's start-up
  const streamSecs = segs.slice(1).reduce((sum, s) => sum + s.duration, 0);
  const ratio = streamSecs / ((segs.at(-1)!.closedAt - segs[0]!.closedAt) / 1000);
  return { ratio, segments: segs.length - 1, latency: median(segs.map((s) => s.closedAt - s.end)) };
}

console.log(`node ${process.version}, sharp ${sharp.versions.sharp}, libvips ${sharp.versions.vips}, thread pool ${sharp.concurrency()}`);
await bench(1280, 720);
await bench(1920, 1080);
await benchRecording(1280, 720);
await benchRecording(1920, 1080);
