/**
 * Capture benchmark: `node --import tsx bench/capture-bench.ts`.
 * For 720p and 1080p testsrc2 at 25 fps with a 5 fps preview, prints the CPU
 * used while capturing (ffmpeg from /proc/<pid>/stat, Node from
 * process.cpuUsage, in cores), then the median of 20 screenshotPng() calls
 * against a bare sharp PNG encode (compression level 1) of the same raw frame
 * in the same run, the thumbnail latency, and the cost of latestFrame()'s copy.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import sharp from 'sharp';
import { FfmpegFrameSource } from '../src/hardware/capture/index.js';

const RUNS = 20;
const CPU_SECS = 5;
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

async function measureCpu(source: FfmpegFrameSource): Promise<{ ffmpeg: number; node: number }> {
  const pid = source.pid()!;
  const f0 = procCpuSecs(pid);
  const n0 = process.cpuUsage();
  const t0 = performance.now();
  await sleep(CPU_SECS * 1000);
  const secs = (performance.now() - t0) / 1000;
  const n = process.cpuUsage(n0);
  return { ffmpeg: (procCpuSecs(pid) - f0) / secs, node: (n.user + n.system) / 1e6 / secs };
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

console.log(`node ${process.version}, sharp ${sharp.versions.sharp}, libvips ${sharp.versions.vips}, thread pool ${sharp.concurrency()}`);
await bench(1280, 720);
await bench(1920, 1080);
