/**
 * draw_text's overlay with real ffmpeg (src/hardware/capture/overlay.ts): the live view's JPEGs show a text
 * while the preview (test scripts' frames) does not, the text goes when its time is up, and a respawned ffmpeg
 * (killed here) draws the texts on.
 */
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharp from 'sharp';
import { FfmpegFrameSource } from '../../src/hardware/capture/index.js';
import { waitFor } from '../helpers/wait.js';

const W = 640;
const H = 480;

/** Pixels brighter than mid-grey in the top left quarter of a JPEG (the picture is black but for the texts). */
async function brightTopLeft(jpeg: Buffer): Promise<number> {
  const { data, info } = await sharp(jpeg).greyscale().raw().toBuffer({ resolveWithObject: true });
  let n = 0;
  for (let y = 0; y < info.height / 4; y++) for (let x = 0; x < info.width / 2; x++) if (data[y * info.width + x]! > 128) n++;
  return n;
}

describe('capture: draw_text overlay through ffmpeg', function () {
  this.timeout(60_000);
  let tmp: string;
  let source: FfmpegFrameSource | undefined;
  beforeEach(async () => {
    tmp = await mkdtemp(join(tmpdir(), 'farmhand-overlay-ffmpeg-'));
  });
  afterEach(async () => {
    await source?.stop();
    source = undefined;
    await rm(tmp, { recursive: true, force: true });
  });

  it('the live view shows the text and the preview does not; it goes when its time is up; a respawned ffmpeg draws it on', async () => {
    source = new FfmpegFrameSource({
      uri: 'testsrc:', width: W, height: H, fps: 25, preview_fps: 5, live_fps: 25, live_width: W / 2, ffmpeg: 'ffmpeg',
      input: { args: ['-re', '-f', 'lavfi', '-i', `color=c=black:size=${W}x${H}:rate=25`], stdin: 'none' },
      overlay: { file: join(tmp, 'capture', 'draw-text.txt') },
    });
    const s = source;
    let jpegs = 0;
    s.onFrames(() => jpegs++);
    await s.start();
    await s.online();
    await waitFor(() => jpegs > 0, 'a live JPEG');
    expect(await brightTopLeft(s.latestLiveJpeg().jpeg)).to.equal(0);

    expect(await s.drawText('FARMHAND 42', 3600)).to.equal(true);
    await waitFor(async () => (await brightTopLeft(s.latestLiveJpeg().jpeg)) > 20, 'the text on the live view');
    // The preview (what a test script gets) stays black.
    const preview = s.latestPreviewFrame()!;
    expect(preview.data.every((v) => v < 20)).to.equal(true);

    // ffmpeg killed: the new one draws the same text.
    const pid = s.pid()!;
    process.kill(pid, 'SIGKILL');
    await waitFor(() => s.pid() !== undefined && s.pid() !== pid && s.health().online, { what: 'ffmpeg respawned and online', timeoutMs: 30_000 });
    expect(s.commandArgs().filter((a) => a.includes('drawtext'))).to.have.length(1); // the live output (no recording here)
    const seq = s.latestLiveJpeg().seq;
    await waitFor(() => s.latestLiveJpeg().seq > seq, 'a live JPEG from the new ffmpeg');
    expect(await brightTopLeft(s.latestLiveJpeg().jpeg)).to.be.above(20);

    // A short text comes and goes; the long one stays.
    await s.clearText(undefined);
    await waitFor(async () => (await brightTopLeft(s.latestLiveJpeg().jpeg)) === 0, 'the text taken away');
    await s.drawText('brief', 0.2);
    await waitFor(() => s.overlayLines().length === 0, 'the brief text to end');
    await waitFor(async () => (await brightTopLeft(s.latestLiveJpeg().jpeg)) === 0, 'the live view without text');
  });
});
