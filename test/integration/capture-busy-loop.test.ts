/**
 * A busy Node is no stalled capture: when the event loop is blocked longer
 * than the staleness bound, frames queue on ffmpeg's stdout unread, and the
 * stall watchdog must not end a healthy ffmpeg for it (docs/capture.md,
 * "Stalls").
 */
import { expect } from 'chai';
import { FfmpegFrameSource } from '../../src/hardware/capture/index.js';
import { waitFor } from '../helpers/wait.js';

describe('capture: a busy event loop is no stall', function () {
  this.timeout(60_000);
  let source: FfmpegFrameSource | undefined;
  afterEach(async () => {
    await source?.stop();
  });

  it('after the loop was blocked for 3 s (bound 2.2 s), the same ffmpeg serves frames and health stayed online', async () => {
    source = new FfmpegFrameSource({ uri: 'testsrc:', width: 160, height: 120, fps: 25, preview_fps: 10, ffmpeg: 'ffmpeg' });
    await source.start();
    await waitFor(() => source!.health().online, 'capture online');
    const pid = source.pid();
    const seq = source.latestFrame()!.seq;
    // Block the loop (Atomics.wait sleeps this thread without spinning a core).
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3000);
    const healthAfterBlock: boolean[] = [];
    const probe = setInterval(() => healthAfterBlock.push(source!.health().online), 10);
    await waitFor(() => (source!.latestFrame()?.seq ?? 0) > seq + 10, 'frames after the block');
    clearInterval(probe);
    expect(source.pid(), 'ffmpeg was not restarted').to.equal(pid);
    expect(healthAfterBlock.every(Boolean), 'online throughout').to.equal(true);
  });
});
