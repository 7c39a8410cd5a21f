/**
 * The capture pipeline with a real ffmpeg child on testsrc2 (and raw frames
 * on stdin for virtual:): frames, lossless screenshots, thumbnails, and the
 * supervisor's recovery from a killed, stalled or missing ffmpeg.
 */
import { expect } from 'chai';
import { createHook } from 'node:async_hooks';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import sharp from 'sharp';
import { FfmpegFrameSource, type FfmpegFrameSourceOptions } from '../../src/hardware/capture/index.js';
import { isAlive } from '../helpers/processes.js';
import { rejectionCode } from '../helpers/rejections.js';
import { waitFor } from '../helpers/wait.js';

const W = 640;
const H = 360;
const base: FfmpegFrameSourceOptions = { uri: 'testsrc:', width: W, height: H, fps: 25, preview_fps: 10, ffmpeg: 'ffmpeg' };




/**
 * Timers and child processes the capture code created and that are still alive (not fired, cleared or closed).
 * Only its own: the whole suite runs in one process, where other files' timers come and go at any time, so a count of
 * every active handle in the process fails at random (it did in CI).
 */
class CaptureHandles {
  private readonly live = new Map<number, string>();
  private readonly hook = createHook({
    init: (id, type) => {
      if (type !== 'Timeout' && type !== 'PROCESSWRAP') return;
      const limit = Error.stackTraceLimit;
      Error.stackTraceLimit = 50;
      const stack = new Error().stack ?? '';
      Error.stackTraceLimit = limit;
      if (/src[/\\]hardware[/\\]capture[/\\]/.test(stack)) this.live.set(id, type);
    },
    destroy: (id) => {
      this.live.delete(id);
    },
  });

  constructor() {
    this.hook.enable();
  }

  /** The kinds of the live ones, after pending destroys ran (they run in the loop's close phase). */
  async alive(): Promise<string[]> {
    for (let i = 0; i < 2; i++) await new Promise((r) => setImmediate(r));
    return [...this.live.values()].sort();
  }

  dispose(): void {
    this.hook.disable();
  }
}

describe('capture: FfmpegFrameSource on testsrc2', function () {
  let source: FfmpegFrameSource | undefined;
  afterEach(async () => {
    await source?.stop();
    source = undefined;
  });

  const online = () => source!.health().online;

  it('starts offline ("starting"), then frames arrive and health is online', async () => {
    source = new FfmpegFrameSource(base);
    expect(source.health()).to.deep.equal({ online: false, reason: 'capture not started' });
    await source.start();
    expect(source.health().reason).to.match(/^starting/);
    await waitFor(online, 'online');
    const first = source.latestFrame()!;
    await waitFor(() => source!.latestFrame()!.seq >= first.seq + 3, 'more frames');
    const f = source.latestFrame()!;
    expect([f.width, f.height, f.data.length]).to.deep.equal([W, H, W * H * 3]);
  });

  it('"Screenshot from the device under test, image/png": the PNG decodes losslessly to the raw frame', async () => {
    source = new FfmpegFrameSource(base);
    await source.start();
    await waitFor(online, 'online');
    for (let i = 0; i < 3; i++) {
      // Both calls read the ring in the same tick, so they see the same frame.
      const pending = source.screenshotPng();
      const raw = source.latestFrame()!;
      const png = await pending;
      const meta = await sharp(png).metadata();
      expect([meta.format, meta.width, meta.height]).to.deep.equal(['png', W, H]);
      const decoded = await sharp(png).raw().toBuffer({ resolveWithObject: true });
      expect(decoded.info.channels).to.equal(3);
      expect(decoded.data.equals(raw.data), 'decoded PNG equals the raw frame').to.equal(true);
      await waitFor(() => source!.latestFrame()!.seq > raw.seq, 'the next frame');
    }
  });

  it('"Small thumbnail, image/jpeg": a JPEG 320 pixels wide', async () => {
    source = new FfmpegFrameSource(base);
    await source.start();
    await waitFor(online, 'online');
    const meta = await sharp(await source.thumbnailJpeg()).metadata();
    expect([meta.format, meta.width, meta.height]).to.deep.equal(['jpeg', 320, 180]);
  });

  it('saveScreenshot writes screenshot.png and thumbnail.jpg and nothing else', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'farmhand-capture-'));
    try {
      source = new FfmpegFrameSource(base);
      await source.start();
      await waitFor(online, 'online');
      expect(await source.saveScreenshot(dir)).to.equal(true);
      expect((await readdir(dir)).sort()).to.deep.equal(['screenshot.png', 'thumbnail.jpg']);
      const png = await sharp(await readFile(join(dir, 'screenshot.png'))).metadata();
      const jpg = await sharp(await readFile(join(dir, 'thumbnail.jpg'))).metadata();
      expect([png.format, png.width, jpg.format, jpg.width]).to.deep.equal(['png', W, 'jpeg', 320]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('ffmpeg killed with SIGKILL: offline with the reason, then back online by itself', async () => {
    source = new FfmpegFrameSource(base);
    await source.start();
    await waitFor(online, 'online');
    const pid = source.pid()!;
    process.kill(pid, 'SIGKILL');
    await waitFor(() => !online(), 'offline');
    expect(source.health().reason).to.match(/ffmpeg was killed by SIGKILL; restarting/);
    expect(await rejectionCode(source.screenshotPng())).to.equal('device_unavailable');
    await waitFor(online, 'back online');
    expect(source.pid()).to.be.a('number').and.not.equal(pid);
    expect(isAlive(pid)).to.equal(false);
  });

  it('ffmpeg that stops producing frames is marked stalled, replaced, and comes back', async () => {
    source = new FfmpegFrameSource(base);
    await source.start();
    await waitFor(online, 'online');
    const pid = source.pid()!;
    process.kill(pid, 'SIGSTOP'); // alive but silent, like a hung card
    await waitFor(() => !online(), 'stalled');
    expect(source.health().reason).to.match(/no frames for \d/);
    // "A frame older than the staleness bound is not served as live."
    expect(source.latestFrame()).to.equal(undefined);
    expect(await rejectionCode(source.screenshotPng())).to.equal('device_unavailable');
    // Ending the stopped ffmpeg sends it SIGCONT too, so it may deliver a last frame before it dies:
    // "back" means a new ffmpeg is delivering frames.
    await waitFor(() => online() && source!.pid() !== undefined && source!.pid() !== pid, { what: 'back online with a new ffmpeg', timeoutMs: 15_000 });
    expect(isAlive(pid), 'the stalled ffmpeg was ended').to.equal(false);
  });

  it('a V4L2 device that does not exist: offline with ffmpeg\'s own error as the reason', async () => {
    source = new FfmpegFrameSource({ ...base, uri: 'v4l2:/dev/video-farmhand-missing' });
    await source.start();
    await waitFor(() => /exited/.test(source!.health().reason ?? ''), 'failure');
    expect(source.health().reason).to.match(/exited with code \d+: .*video-farmhand-missing/);
  });

  it('a bogus ffmpeg binary: offline with a reason; screenshots answer device_unavailable', async () => {
    source = new FfmpegFrameSource({ ...base, ffmpeg: '/nonexistent/farmhand/ffmpeg' });
    await source.start();
    await waitFor(() => /not found/.test(source!.health().reason ?? ''), 'failure');
    expect(source.health()).to.include({ online: false });
    expect(source.health().reason).to.match(/^ffmpeg not found: \/nonexistent\/farmhand\/ffmpeg; restarting in/);
    expect(source.pid()).to.equal(undefined);
    expect(await rejectionCode(source.screenshotPng())).to.equal('device_unavailable');
    expect(await rejectionCode(source.thumbnailJpeg())).to.equal('device_unavailable');
    const dir = await mkdtemp(join(tmpdir(), 'farmhand-capture-'));
    expect(await source.saveScreenshot(dir)).to.equal(false);
    await rm(dir, { recursive: true, force: true });
  });

  it('stop() ends ffmpeg and leaves no child, timer or process handle behind', async () => {
    const handles = new CaptureHandles();
    try {
      source = new FfmpegFrameSource(base);
      await source.start();
      await waitFor(online, 'online');
      const pid = source.pid()!;
      expect(isAlive(pid)).to.equal(true);
      expect(await handles.alive(), 'the running ffmpeg and its watchdog').to.include.members(['PROCESSWRAP', 'Timeout']);
      await source.stop();
      expect(isAlive(pid)).to.equal(false);
      expect(source.health()).to.deep.equal({ online: false, reason: 'capture stopped' });
      expect(await handles.alive()).to.deep.equal([]);
    } finally {
      handles.dispose();
    }
  });

  it('stop() while a restart is pending cancels it', async () => {
    const handles = new CaptureHandles();
    try {
      source = new FfmpegFrameSource({ ...base, ffmpeg: '/nonexistent/farmhand/ffmpeg' });
      await source.start();
      await waitFor(() => /restarting in/.test(source!.health().reason ?? ''), 'restart pending');
      expect(await handles.alive(), 'the restart timer').to.deep.equal(['Timeout']);
      await source.stop();
      expect(await handles.alive(), 'no restart timer left').to.deep.equal([]);
      expect(source.health().reason).to.equal('capture stopped');
    } finally {
      handles.dispose();
    }
  });
});

describe('capture: FfmpegFrameSource on virtual: (raw frames on stdin)', () => {
  it('frames written to ffmpeg\'s stdin come out as screenshots', async () => {
    const colour = [200, 30, 90];
    const still = Buffer.alloc(W * H * 3);
    for (let i = 0; i < still.length; i += 3) still.set(colour, i);
    const feed = (stdin: Writable) => {
      const timer = setInterval(() => stdin.write(still), 40);
      return () => clearInterval(timer);
    };
    expect(() => new FfmpegFrameSource({ ...base, uri: 'virtual:' })).to.throw(/feed/);
    const source = new FfmpegFrameSource({ ...base, uri: 'virtual:', feed });
    try {
      await source.start();
      await waitFor(() => source.health().online, 'online');
      const { data, info } = await sharp(await source.screenshotPng()).raw().toBuffer({ resolveWithObject: true });
      expect([info.width, info.height]).to.deep.equal([W, H]);
      expect(data.equals(still)).to.equal(true);
    } finally {
      await source.stop();
    }
  });
});

describe('capture: the preview without recording holds no frame (the live view)', () => {
  it('a frame written into ffmpeg comes out of the preview before any further frame goes in', async () => {
    // ffmpeg's rawvideo encoder runs frame threads by default and then keeps each frame until the next one
    // arrives: a picture that changed after a key press would show only with the next frame (40 ms at 25 fps).
    const plain = (v: number) => Buffer.alloc(W * H * 3, v);
    let stdin: Writable | undefined;
    const feed = (s: Writable) => {
      stdin = s;
      s.write(plain(10));
      return () => undefined;
    };
    // The preview keeps to its rate by dropping a frame stamped within one output interval of the last
    // (`-fps_mode vfr -r`, stamps from the wall clock). At a million a second that interval is the stamps'
    // own resolution (1 us), so no frame written after the last came out is dropped, and the test waits on
    // frames, not on time. The encoder's threads, which this test is about, are the same at any rate.
    const source = new FfmpegFrameSource({ ...base, uri: 'virtual:', feed, preview_fps: 1_000_000 });
    const shows = (v: number) => source.latestFrame()?.data.every((b) => b === v) === true;
    try {
      await source.start();
      await waitFor(() => shows(10), 'the first frame, alone in the pipe, comes out');
      const pid = source.pid();
      // One frame more at a time and none after it: each must come out by itself. Several times, because
      // whether the encoder's thread keeps a frame depends on which thread gets there first.
      for (const v of [60, 110, 160, 210]) {
        stdin!.write(plain(v));
        await waitFor(() => shows(v), `frame ${v} comes out without another behind it`);
      }
      // Not flushed out by the watchdog ending a "stalled" ffmpeg (a restart would also feed the first frame again).
      expect([source.pid(), source.stats().restarts]).to.deep.equal([pid, 0]);
    } finally {
      await source.stop();
    }
  });
});

describe('capture: the preview while recording holds no frame either (issue 20: the live view as shipped)', () => {
  let tmp: string;
  beforeEach(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'farmhand-preview-rec-'));
  });
  afterEach(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  it('with recording on, a frame written into ffmpeg comes out of the preview before any further frame goes in', async () => {
    // The preview keeps a constant rate while recording (the recorder's stream clock counts its frames). The fps
    // filter did that by holding each output slot until an input frame past the slot's middle arrived, so the
    // picture after a key press waited for later frames (100-150 ms at 5 a second). Fed one frame at a time, a
    // frame that no later frame follows never came out. The constant rate must not hold it.
    const plain = (v: number) => Buffer.alloc(W * H * 3, v);
    let stdin: Writable | undefined;
    const feed = (s: Writable) => {
      stdin = s;
      s.write(plain(10));
      return () => undefined;
    };
    const source = new FfmpegFrameSource({ ...base, uri: 'virtual:', feed, preview_fps: 5, live_fps: 25, recording: { dir: join(tmp, 'recording') } });
    const shows = (v: number) => source.latestFrame()?.data.every((b) => b === v) === true;
    // Someone watches the live view: every preview frame is kept (with nobody, one in live_fps / preview_fps).
    const unwatch = source.onFrames(() => undefined);
    try {
      expect(source.previewRate()).to.equal(25);
      await source.start();
      await waitFor(() => shows(10), 'the first frame, alone in the pipe, comes out');
      const pid = source.pid();
      for (const v of [60, 110, 160, 210]) {
        stdin!.write(plain(v));
        await waitFor(() => shows(v), `frame ${v} comes out without another behind it`);
      }
      expect([source.pid(), source.stats().restarts]).to.deep.equal([pid, 0]);
    } finally {
      unwatch();
      await source.stop();
    }
  });
});
