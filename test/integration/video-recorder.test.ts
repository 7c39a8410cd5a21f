/**
 * "A video of every test run": the capture's one ffmpeg also records 1 s
 * H.264 segments, and the Recorder cuts video.mp4 per run without
 * restarting capture. Real ffmpeg and ffprobe on testsrc2, a replayed mp4
 * and raw frames (virtual:), in temporary folders.
 */
import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { promisify } from 'node:util';
import { FfmpegFrameSource, type FfmpegFrameSourceOptions } from '../../src/hardware/capture/index.js';
import { NO_VIDEO_DISK_FULL } from '../../src/hardware/capture/recorder.js';

const run = promisify(execFile);
const W = 320;
const H = 180;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, cond: () => boolean, timeoutMs = 8000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(20);
  }
}

interface Probe {
  codec: string;
  duration: number;
  frames: number;
  firstFrame: { key_frame: number; pict_type: string };
}

/** What ffprobe says of a video: codec, duration, frames decoded, and its first frame. */
async function probe(file: string): Promise<Probe> {
  const { stdout } = await run('ffprobe', ['-v', 'error', '-count_frames', '-select_streams', 'v:0', '-show_entries',
    'stream=codec_name,nb_read_frames:format=duration', '-of', 'json', file]);
  const info = JSON.parse(stdout) as { streams: { codec_name: string; nb_read_frames: string }[]; format: { duration: string } };
  const first = await run('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-read_intervals', '%+#1', '-show_entries',
    'frame=key_frame,pict_type', '-of', 'json', file]);
  const frame = (JSON.parse(first.stdout) as { frames: { key_frame: number; pict_type: string }[] }).frames[0]!;
  return { codec: info.streams[0]!.codec_name, duration: Number(info.format.duration), frames: Number(info.streams[0]!.nb_read_frames), firstFrame: frame };
}

/** Decodes the whole file; rejects with ffmpeg's errors if any frame does not decode. */
async function decodeAll(file: string): Promise<string> {
  const { stderr } = await run('ffmpeg', ['-v', 'error', '-nostdin', '-i', file, '-f', 'null', '-']);
  return stderr;
}

function counterFrame(k: number): Buffer {
  const f = Buffer.alloc(W * H * 3);
  f.fill((k % 16) * 16 + 8, 0, f.length / 2);
  f.fill((Math.floor(k / 16) % 16) * 16 + 8, f.length / 2);
  return f;
}

/** The counter of every frame of a video made of counterFrame()s. */
async function decodeCounters(file: string): Promise<number[]> {
  const { stdout } = await run('ffmpeg', ['-v', 'error', '-nostdin', '-i', file, '-f', 'rawvideo', '-pix_fmt', 'gray', '-'],
    { encoding: 'buffer', maxBuffer: 64 << 20 });
  const level = (v: number) => Math.round((v - 8) / 16) & 15;
  const out: number[] = [];
  for (let at = 0; at + W * H <= stdout.length; at += W * H) {
    const top = stdout[at + (H / 4) * W + W / 2]!;
    const bottom = stdout[at + ((3 * H) / 4) * W + W / 2]!;
    out.push(level(bottom) * 16 + level(top));
  }
  return out;
}

describe('video: per-run clips from the continuous recording', function () {
  let tmp: string;
  let source: FfmpegFrameSource | undefined;
  const options = (extra: Partial<FfmpegFrameSourceOptions> = {}): FfmpegFrameSourceOptions => ({
    uri: 'testsrc:', width: W, height: H, fps: 25, preview_fps: 10, ffmpeg: 'ffmpeg',
    recording: { dir: join(tmp, 'recording') }, ...extra,
  });
  const resultDir = async (name: string) => {
    const dir = join(tmp, name);
    await mkdir(dir);
    return dir;
  };
  /** Start capture and wait until it is online and has closed a segment. */
  const startRecording = async (o: FfmpegFrameSourceOptions) => {
    source = new FfmpegFrameSource(o);
    await source.start();
    await waitFor('a closed segment', () => source!.recorder()!.segments().length > 0);
    // Runs begin at any moment; right after a segment closed the start margin would always reach into the previous one.
    await sleep(400);
  };

  beforeEach(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'farmhand-video-'));
  });
  afterEach(async () => {
    await source?.stop();
    source = undefined;
    await rm(tmp, { recursive: true, force: true });
  });

  it('a ~3 s run gives video.mp4: h264, as long as the run (within ~1 s), decodable from frame 0, a keyframe', async () => {
    await startRecording(options());
    const dir = await resultDir('run');
    const clip = source!.recorder()!.begin();
    const t0 = performance.now();
    await sleep(3000);
    const runSecs = (performance.now() - t0) / 1000;
    expect(await clip.finish(dir)).to.equal(true);
    expect(await readdir(dir)).to.deep.equal(['video.mp4']);
    const p = await probe(join(dir, 'video.mp4'));
    expect(p.codec).to.equal('h264');
    expect(p.duration).to.be.at.least(runSecs - 0.1).and.at.most(runSecs + 1.3);
    expect(p.frames).to.be.closeTo(p.duration * 25, 3);
    expect(p.firstFrame).to.deep.equal({ key_frame: 1, pict_type: 'I' });
    expect(await decodeAll(join(dir, 'video.mp4'))).to.equal('');
    expect(await clip.finish(dir), 'a clip is cut once').to.equal(false);
  });

  it('two consecutive clips: each covers its own run', async () => {
    await startRecording(options());
    const [a, b] = [await resultDir('a'), await resultDir('b')];
    const first = source!.recorder()!.begin();
    await sleep(1500);
    const second = source!.recorder()!.begin();
    const finishing = first.finish(a);
    await sleep(2000);
    await Promise.all([finishing, second.finish(b)]);
    const [pa, pb] = [await probe(join(a, 'video.mp4')), await probe(join(b, 'video.mp4'))];
    expect(pa.duration).to.be.within(1.4, 2.9);
    expect(pb.duration).to.be.within(1.9, 3.4);
    expect([pa.firstFrame.key_frame, pb.firstFrame.key_frame]).to.deep.equal([1, 1]);
  });

  it('SIGKILL of ffmpeg while recording: capture comes back; a clip spanning the restart skips the gap and plays', async () => {
    await startRecording(options());
    const dir = await resultDir('restart');
    const clip = source!.recorder()!.begin();
    const t0 = performance.now();
    await sleep(1500);
    const pid = source!.pid()!;
    process.kill(pid, 'SIGKILL');
    await waitFor('offline', () => !source!.health().online);
    await waitFor('back online', () => source!.health().online);
    const restarted = source!.pid()!;
    const oldRun = source!.recorder()!.segments()[0]!.run;
    await waitFor('a segment of the new ffmpeg', () => source!.recorder()!.segments().some((s) => s.run !== oldRun));
    await sleep(300);
    const runSecs = (performance.now() - t0) / 1000;
    expect(await clip.finish(dir)).to.equal(true);
    const p = await probe(join(dir, 'video.mp4'));
    expect(p.firstFrame.key_frame).to.equal(1);
    expect(p.duration, 'the time capture was down is not in the video').to.be.below(runSecs);
    expect(p.duration).to.be.above(1.5);
    expect(await decodeAll(join(dir, 'video.mp4'))).to.equal('');
    expect(restarted).to.not.equal(pid);
    // The killed ffmpeg's unfinished segment is deleted; every file left is a tracked segment.
    const tracked = new Set(source!.recorder()!.segments().map((s) => s.path.split('/').pop()));
    const files = await readdir(join(tmp, 'recording'));
    const current = files.filter((f) => !tracked.has(f));
    expect(current.length, `untracked: ${current.join(', ')}`).to.be.at.most(1); // the new ffmpeg's open segment
  });

  it('a replayed file as input (only the input arguments differ) records and cuts the same way', async () => {
    const file = join(tmp, 'replay.mp4');
    await run('ffmpeg', ['-v', 'error', '-f', 'lavfi', '-i', `smptebars=size=${W}x${H}:rate=25:duration=2`, '-pix_fmt', 'yuv420p', file]);
    await startRecording(options({ input: { args: ['-re', '-stream_loop', '-1', '-i', file], stdin: 'none' } }));
    const dir = await resultDir('replay');
    const clip = source!.recorder()!.begin();
    await sleep(2500);
    expect(await clip.finish(dir)).to.equal(true);
    const p = await probe(join(dir, 'video.mp4'));
    expect([p.codec, p.firstFrame.key_frame]).to.deep.equal(['h264', 1]);
    expect(p.duration).to.be.within(2.4, 3.9);
    expect((await source!.screenshotPng()).length).to.be.above(0);
  });

  it('virtual: (raw frames on stdin) records the same way, and the clip shows every frame of the run', async () => {
    // Frame k shows k in two grey levels (top: k % 16, bottom: k / 16), so a decoded frame says which it was.
    let k = 0;
    const feed = (stdin: Writable) => {
      const timer = setInterval(() => stdin.write(counterFrame(k++)), 40);
      return () => clearInterval(timer);
    };
    await startRecording(options({ uri: 'virtual:', feed }));
    const dir = await resultDir('virtual');
    const clip = source!.recorder()!.begin();
    const first = k - 1; // on screen when the run began
    await sleep(2000);
    const last = k - 1; // on screen when it ended
    expect(await clip.finish(dir)).to.equal(true);
    const p = await probe(join(dir, 'video.mp4'));
    expect([p.codec, p.firstFrame.key_frame]).to.deep.equal(['h264', 1]);
    const shown = await decodeCounters(join(dir, 'video.mp4'));
    expect(shown[0], 'the video starts at or before the run').to.be.at.most(first).and.at.least(first - 30);
    expect(shown.at(-1), 'the video ends at or after the run').to.be.at.least(last).and.at.most(last + 30);
    expect(shown.every((v, i) => i === 0 || v === shown[i - 1]! + 1), 'no frame lost or repeated').to.equal(true);
  });

  it('"never delete segments an open clip needs", yet the ring stays bounded (keepSecs)', async () => {
    await startRecording(options({ recording: { dir: join(tmp, 'recording'), keepSecs: 1 } }));
    const recDir = join(tmp, 'recording');
    const clip = source!.recorder()!.begin();
    await sleep(3200);
    const pinned = (await readdir(recDir)).length;
    expect(pinned, 'all segments since begin() are kept').to.be.at.least(3);
    const dir = await resultDir('long');
    expect(await clip.finish(dir)).to.equal(true);
    expect((await probe(join(dir, 'video.mp4'))).duration).to.be.at.least(3.1);
    await sleep(1100); // the next segment close expires what the clip held
    let most = 0;
    for (let i = 0; i < 8; i++) {
      await sleep(250);
      most = Math.max(most, (await readdir(recDir)).length);
    }
    // 1 s kept + the 2 s pin slack is gone + the open segment: a handful, not one per second forever.
    expect(most).to.be.at.most(4);
  });

  it('no recording to cut (capture never started): finish() resolves false after its bounded wait', async () => {
    source = new FfmpegFrameSource(options({ recording: { dir: join(tmp, 'recording'), finishWaitMs: 300 } }));
    const clip = source.recorder()!.begin();
    const t0 = performance.now();
    expect(await clip.finish(await resultDir('none'))).to.equal(false);
    expect(performance.now() - t0).to.be.below(1500);
    const discarded = source.recorder()!.begin();
    discarded.discard();
    expect(await discarded.finish(tmp)).to.equal(false);
  });

  it('recording on a full disk: capture goes on without it (screenshots served, online), runs log "no video: disk full", health says so; recording resumes once space is freed', async function () {
    this.timeout(90_000);
    const small = join(tmp, 'small');
    await mkdir(small);
    await run('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', small]);
    try {
      await startRecording(options({ recording: { dir: join(small, 'recording'), resumeFreeMb: 2, resumeCheckMs: 200 } }));
      const runDir = await resultDir('full');
      await writeFile(join(runDir, 'farmhand.log'), 'Running tests/t.py::test_a\n');
      const clip = source!.recorder()!.begin();
      // Fill the recording's disk: ffmpeg's segment output fails with ENOSPC.
      const filler = join(small, 'filler.bin');
      await writeFile(filler, Buffer.alloc(4 << 20)).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOSPC') throw e;
      });
      await waitFor('recording stopped on the full disk', () => source!.health().video === NO_VIDEO_DISK_FULL, 30_000);
      await waitFor('capture online without recording', () => source!.health().online, 30_000);
      expect(source!.commandArgs()).to.not.include('libx264');
      expect((await source!.screenshotPng()).subarray(1, 4).toString()).to.equal('PNG');
      expect(await clip.finish(runDir)).to.equal(false);
      expect(await readFile(join(runDir, 'farmhand.log'), 'utf8')).to.include(NO_VIDEO_DISK_FULL);
      // Space again: recording resumes and segments close again.
      await rm(filler);
      await waitFor('recording resumed', () => source!.health().video === undefined && source!.commandArgs().includes('libx264'), 30_000);
      const before = source!.recorder()!.segments().length;
      await waitFor('a new segment', () => source!.recorder()!.segments().length > before, 30_000);
    } finally {
      await source?.stop();
      source = undefined;
      await run('umount', ['-l', small]).catch(() => undefined);
    }
  });

  it('without a recording option there is no recorder and no second output', () => {
    const s = new FfmpegFrameSource({ ...options(), recording: undefined });
    expect(s.recorder()).to.equal(undefined);
    expect(s.commandArgs()).to.not.include('libx264');
  });
});
