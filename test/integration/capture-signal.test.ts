/**
 * No-signal detection through a real ffmpeg: black and frozen pictures keep
 * the node online with a warning in signal(); no frames at all is offline.
 */
import { expect } from 'chai';
import type { Writable } from 'node:stream';
import { FfmpegFrameSource, type FfmpegFrameSourceOptions } from '../../src/hardware/capture/index.js';
import { waitFor } from '../helpers/wait.js';

const W = 320;
const H = 180;
const base: FfmpegFrameSourceOptions = { uri: 'testsrc:', width: W, height: H, fps: 25, preview_fps: 10, ffmpeg: 'ffmpeg' };
const lavfi = (graph: string) => ({ args: ['-re', '-f', 'lavfi', '-i', `${graph}:size=${W}x${H}:rate=25`], stdin: 'none' as const });

describe('capture: no signal (black, frozen, nothing) through ffmpeg', function () {
  let source: FfmpegFrameSource | undefined;
  afterEach(async () => {
    await source?.stop();
    source = undefined;
  });

  it('black input (lavfi color=black): signal "no signal: the picture is black"; still online, screenshots served', async () => {
    source = new FfmpegFrameSource({ ...base, input: lavfi('color=black'), signal: { blackSecs: 0.5, frozenSecs: 60 } });
    expect(source.signal().signal).to.equal('none');
    await source.start();
    await waitFor(() => source!.health().online, 'online');
    await waitFor(() => source!.signal().signal === 'black', { what: 'black', timeoutMs: 8000 });
    expect(source.signal().reason).to.equal('no signal: the picture is black');
    expect(source.health()).to.deep.equal({ online: true, reason: null });
    expect((await source.screenshotPng()).subarray(1, 4).toString()).to.equal('PNG');
  });

  it('frozen input (lavfi color=red): "frozen for N s" after frozenSecs, not before; still online', async () => {
    source = new FfmpegFrameSource({ ...base, input: lavfi('color=red'), signal: { frozenSecs: 1.5 } });
    await source.start();
    await waitFor(() => source!.health().online, 'online');
    expect(source.signal().signal).to.equal('ok');
    await waitFor(() => source!.signal().signal === 'frozen', { what: 'frozen', timeoutMs: 8000 });
    // "Not before" by the source's own clock: the seconds it counted (the timing itself is a unit test's).
    expect(source.signal().reason).to.match(/^no signal: the picture has been frozen for [12] s$/);
    expect(source.health().online).to.equal(true);
  });

  it('a moving picture (testsrc2) is ok', async () => {
    source = new FfmpegFrameSource({ ...base, signal: { frozenSecs: 0.5, blackSecs: 0.5 } });
    await source.start();
    await waitFor(() => source!.health().online, 'online');
    // Well past frozenSecs and blackSecs by the frames' own time stamps, not by a sleep.
    const first = await waitFor(() => source!.latestFrame(), 'a frame');
    await waitFor(() => (source!.latestFrame()?.at ?? first.at) - first.at >= 1200, 'frames spanning 1.2 s');
    expect(source.signal()).to.deep.equal({ signal: 'ok', reason: null });
  });

  it('"no frames for N s": a feed that stops is offline, and signal() says none with that reason', async () => {
    const frame = Buffer.alloc(W * H * 3, 90);
    let sent = 0;
    const feed = (stdin: Writable) => {
      const timer = setInterval(() => sent++ < 25 && stdin.write(frame), 40); // one second, then nothing
      return () => clearInterval(timer);
    };
    source = new FfmpegFrameSource({ ...base, uri: 'virtual:', feed });
    await source.start();
    await waitFor(() => source!.health().online, 'online');
    await waitFor(() => !source!.health().online, { what: 'offline', timeoutMs: 10000 });
    expect(source.health().reason).to.match(/no frames for \d/);
    const signal = source.signal();
    expect(signal.signal).to.equal('none');
    expect(signal.reason).to.match(/no frames for \d/);
  });
});
