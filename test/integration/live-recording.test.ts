/**
 * The live view on the shipped configuration (issue 20): recording on, a low
 * `preview_fps` for the picture checks, and `live_fps` frames a second from
 * ffmpeg for the live view. With real ffmpeg: the preview runs at the live
 * rate (counted against the recording's own stream time, never the wall
 * clock), and the recording has no gap and no change of rate while viewers
 * arrive and leave.
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { expect } from 'chai';
import sharp from 'sharp';
import { FfmpegFrameSource } from '../../src/hardware/capture/index.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const W = 320;
const H = 240;

describe('live view on the shipped configuration: recording on', function () {
  this.timeout(120_000);

  it('while recording, ffmpeg hands Node live_fps frames a second, and test scripts get preview_fps (per second of the recording)', async () => {
    const tmp = await mkdtemp(join(tmpdir(), 'farmhand-live-rate-'));
    const source = new FfmpegFrameSource({
      uri: 'testsrc:', width: W, height: H, fps: 25, preview_fps: 5, live_fps: 25, ffmpeg: 'ffmpeg', recording: { dir: join(tmp, 'recording') },
    });
    try {
      let checked = 0;
      source.onPreviewFrames(() => checked++);
      await source.start();
      const rec = source.recorder()!;
      // Each closed segment is one second of the recording's stream time; count preview frames between closes.
      await waitFor(() => rec.segments().length >= 1, 'a first segment closed');
      const [n0, f0, c0, s0] = [rec.segments().length, source.stats().framesReceived, checked, source.latestPreviewFrame()!.seq];
      await waitFor(() => rec.segments().length >= n0 + 3, 'three more segments closed');
      const secs = rec.segments().length - n0;
      const perSecond = (source.stats().framesReceived - f0) / secs;
      // A test script's frames (and the black/frozen check) keep preview_fps: one frame in five.
      expect((checked - c0) / secs).to.be.within(3, 7);
      expect(source.latestPreviewFrame()!.seq - s0).to.equal(checked - c0);
      // 25 a second; 5 (preview_fps) before issue 20. Segment closes and frames are read on different pipes: a
      // few frames of slack either way.
      expect(perSecond).to.be.within(20, 30);
      expect(source.stats().restarts).to.equal(0);
    } finally {
      await source.stop();
      await rm(tmp, { recursive: true, force: true });
    }
  });

  it('with live_width (the default 640): the live view gets JPEGs of that size from ffmpeg at live_fps on a pipe of their own, and the full-size preview keeps preview_fps (per second of the recording)', async () => {
    const tmp = await mkdtemp(join(tmpdir(), 'farmhand-live-width-'));
    const source = new FfmpegFrameSource({
      uri: 'testsrc:', width: W, height: H, fps: 25, preview_fps: 5, live_fps: 25, live_width: W / 2, ffmpeg: 'ffmpeg', recording: { dir: join(tmp, 'recording') },
    });
    try {
      let live = 0;
      const unwatch = source.onFrames(() => live++);
      await source.start();
      const rec = source.recorder()!;
      await waitFor(() => rec.segments().length >= 1, 'a first segment closed');
      const [n0, f0, l0] = [rec.segments().length, source.stats().framesReceived, live];
      await waitFor(() => rec.segments().length >= n0 + 3, 'three more segments closed');
      const secs = rec.segments().length - n0;
      // The preview (screenshots, the checks, the stream clock) at preview_fps; the live view at live_fps.
      expect((source.stats().framesReceived - f0) / secs).to.be.within(3, 7);
      expect((live - l0) / secs).to.be.within(20, 30);
      expect(source.stats().liveFramesReceived).to.be.at.least(live);
      expect(source.commandArgs()).to.include('pipe:4');
      // ffmpeg writes the live view's pictures as JPEGs (MJPEG), one whole picture per frame.
      expect(source.liveIsJpeg).to.equal(true);
      const { jpeg } = source.latestLiveJpeg();
      expect([jpeg[0], jpeg[1], jpeg[jpeg.length - 2], jpeg[jpeg.length - 1]]).to.deep.equal([0xff, 0xd8, 0xff, 0xd9]);
      const meta = await sharp(jpeg).metadata();
      expect([meta.format, meta.width, meta.height]).to.deep.equal(['jpeg', W / 2, H / 2]);
      expect((await source.withLatestFrame(async (f) => [f.width, f.height]))).to.deep.equal([W, H]);
      unwatch();
    } finally {
      await source.stop();
      await rm(tmp, { recursive: true, force: true });
    }
  });

  describe('the recording while viewers come and go', () => {
    let d: TestDaemon;
    before(async () => {
      // live_width below the width, as shipped at 1280x720 (640): the live view has an ffmpeg output of its own.
      d = await startTestDaemon({ config: { capture: { uri: 'testsrc:', width: W, height: H, fps: 25, preview_fps: 5, live_width: W / 2, record_video: true } } });
      await waitOnline(d);
    });
    after(async () => {
      await d?.stop();
    });

    const recordingDir = () => join(d.dataDir, 'recording');
    const segmentFiles = async () => (await readdir(recordingDir())).filter((f) => /^seg-.*\.ts$/.test(f)).sort();

    /** A viewer of the node's live stream; resolves once it has received `n` frames. */
    function watch(n: number): Promise<() => void> {
      return new Promise((resolve, reject) => {
        let frames = 0;
        const req = http.get(`${d.url}/app/live/stream.mjpeg`, (res) => {
          res.on('data', (c: Buffer) => {
            frames += c.toString('latin1').split('--farmhandframe').length - 1;
            if (frames >= n) resolve(() => req.destroy());
          });
        });
        req.on('error', reject);
      });
    }

    it('has every frame at 25 a second, one ffmpeg run, no gap, across one viewer and then ten arriving and leaving', async () => {
      await waitFor(async () => (await segmentFiles()).length >= 2, 'two segments before any viewer');
      // The last segment closed before any viewer (the newest file is still being written).
      const first = (await segmentFiles()).at(-2)!;
      const one = await watch(10);
      one();
      const ten = await Promise.all(Array.from({ length: 10 }, () => watch(10)));
      for (const close of ten) close();
      const afterLeaving = (await segmentFiles()).length;
      await waitFor(async () => (await segmentFiles()).length >= afterLeaving + 2, 'two segments after the viewers left');
      // Every segment from before the first viewer to after the last left, less the one still being written.
      const files = (await segmentFiles()).filter((f) => f >= first).slice(0, -1);
      const runs = new Set(files.map((f) => /^seg-([0-9a-z]+)-/.exec(f)![1]));
      expect([...runs], 'one ffmpeg process recorded it all (no restart)').to.have.length(1);
      const pts: number[] = [];
      for (const f of files) {
        const { stdout } = await promisify(execFile)('ffprobe', ['-v', 'error', '-select_streams', 'v:0', '-show_entries', 'packet=pts_time', '-of', 'csv=p=0', join(recordingDir(), f)]);
        pts.push(...stdout.split('\n').map((l) => parseFloat(l)).filter((x) => Number.isFinite(x)));
      }
      pts.sort((a, b) => a - b);
      const steps = new Set(pts.slice(1).map((t, i) => Math.round((t - pts[i]!) * 1000)));
      expect(files.length, 'segments from before the first viewer to after the last').to.be.at.least(3);
      expect(pts.length).to.equal(files.length * 25);
      expect([...steps], 'every frame 40 ms after the one before: no gap, no change of rate').to.deep.equal([40]);
    });
  });
});
