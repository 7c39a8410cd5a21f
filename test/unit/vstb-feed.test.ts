/**
 * The virtual set-top box's frame feed: the cached frame is re-rendered only
 * when the view or the clock second changes, frames are written at the
 * configured rate, a stdin that does not drain holds at most one frame, and
 * detaching (or stop) ends the writes.
 */
import { expect } from 'chai';
import { Writable } from 'node:stream';
import { LircEncoder } from '../../src/hardware/ir/lirc/index.js';
import { createVirtualStb, vstbRemote, type VirtualStb } from '../../src/hardware/virtual/index.js';
import { waitFor } from '../helpers/wait.js';

const W = 160;
const H = 90;
const FRAME = W * H * 3;


/** A stdin stand-in: `drain` false never completes a write (ffmpeg not reading). */
function sink(drain: boolean) {
  const chunks: Buffer[] = [];
  const stream = new Writable({
    highWaterMark: 16 * 1024,
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk);
      if (drain) done();
    },
  });
  return { stream, chunks };
}

describe('virtual set-top box: frame feed', () => {
  let stb: VirtualStb | undefined;
  let clock = Date.UTC(2024, 0, 1, 12, 0, 0);
  afterEach(() => {
    stb?.stop();
    stb = undefined;
  });

  function make(fps: number, stillFps?: number): VirtualStb {
    clock = Date.UTC(2024, 0, 1, 12, 0, 0);
    return (stb = createVirtualStb({ width: W, height: H, fps, now: () => clock, ...(stillFps !== undefined && { stillFps }) }));
  }

  /**
   * Resolves after `n` ticks of a second box at `fps` (its frames reach a draining stdin): a test that checks
   * that nothing happened waits on these, not on a guessed time.
   */
  async function ticks(n: number, fps = 50): Promise<void> {
    const ref = createVirtualStb({ width: W, height: H, fps, now: () => clock });
    try {
      const { stream, chunks } = sink(true);
      ref.feed(stream);
      await waitFor(() => chunks.length >= n, `${n} ticks`);
    } finally {
      ref.stop();
    }
  }

  it('renders once up front, again only when the clock second or the state changes', async () => {
    const box = make(50);
    await waitFor(() => box.currentFrame() !== undefined, 'first render');
    const { stream, chunks } = sink(true);
    const detach = box.feed(stream);
    await waitFor(() => chunks.length > 5, 'ticks with nothing changing');
    expect(box.stats().renders).to.equal(1);
    clock += 400; // same second
    const seen = chunks.length;
    await waitFor(() => chunks.length >= seen + 3, 'more ticks');
    expect(box.stats().renders).to.equal(1);
    clock += 600; // next second: the clock on screen ticks
    await waitFor(() => box.stats().renders === 2, 'clock re-render');
    const before = box.currentFrame();
    box.transportListener({ trains: new LircEncoder(vstbRemote()).sendOnce('KEY_DOWN'), at: 0 });
    await waitFor(() => box.stats().renders === 3, 'key re-render');
    expect(box.currentFrame()!.equals(before!)).to.equal(false);
    expect(chunks.every((c) => c.length === FRAME), 'whole frames only').to.equal(true);
    detach();
  });

  // The rate itself (20 fps) is a figure of bench/micro-bench.ts, not an assertion here.
  it('writes a whole frame each tick while fed', async () => {
    const box = make(20);
    await waitFor(() => box.currentFrame() !== undefined, 'first render');
    const { stream, chunks } = sink(true);
    const detach = box.feed(stream);
    await waitFor(() => chunks.length >= 5, 'five frames');
    detach();
    expect(chunks.every((c) => c.equals(box.currentFrame()!))).to.equal(true);
    expect(box.stats()).to.include({ dropped: 0 });
  });

  it('a stdin that does not drain holds one frame: later ticks are dropped, nothing queues', async () => {
    const box = make(50);
    await waitFor(() => box.currentFrame() !== undefined, 'first render');
    const { stream, chunks } = sink(false);
    const detach = box.feed(stream);
    await waitFor(() => box.stats().dropped > 5, 'dropped ticks');
    detach();
    expect(chunks.length).to.equal(1);
    expect(stream.writableLength).to.equal(FRAME);
    expect(box.stats()).to.include({ written: 1 });
    expect(box.stats().dropped).to.be.greaterThan(5);
  });

  it('detach and stop() end the writes; a closed stdin is skipped, not written to', async () => {
    const box = make(50);
    await waitFor(() => box.currentFrame() !== undefined, 'first render');
    const a = sink(true);
    const b = sink(true);
    const detachA = box.feed(a.stream);
    box.feed(b.stream);
    await waitFor(() => a.chunks.length > 0 && b.chunks.length > 0, 'frames to both');
    detachA();
    const countA = a.chunks.length;
    const countB0 = b.chunks.length;
    await waitFor(() => b.chunks.length >= countB0 + 3, 'more frames to the other');
    expect(a.chunks.length).to.equal(countA);
    box.stop();
    const countB = b.chunks.length;
    await ticks(4);
    expect(b.chunks.length).to.equal(countB);
    expect(countA).to.be.greaterThan(0);

    const c = sink(true);
    c.stream.destroy();
    const box2 = make(50);
    await waitFor(() => box2.currentFrame() !== undefined, 'first render');
    const detachC = box2.feed(c.stream);
    await ticks(4);
    detachC();
    expect(c.chunks.length).to.equal(0);
  });

  it('a still picture is not written on every tick (ticks are skipped as still); a new picture is written when it comes', async () => {
    const box = make(50, 5);
    await waitFor(() => box.currentFrame() !== undefined, 'first render');
    const { stream, chunks } = sink(true);
    const detach = box.feed(stream);
    // Without the still rate every tick writes and none is counted as still: this wait would not end.
    await waitFor(() => chunks.length >= 3 && box.stats().still > 0, 'still ticks skipped between writes');
    const first = box.currentFrame()!;
    box.transportListener({ trains: new LircEncoder(vstbRemote()).sendOnce('KEY_DOWN'), at: 0 });
    await waitFor(() => chunks.some((c) => !c.equals(first)), 'the new picture written');
    detach();
    expect(chunks.every((c) => c.length === FRAME)).to.equal(true);
  });

  it('with animations every tick is written (each frame carries its number)', async () => {
    clock = Date.UTC(2024, 0, 1, 12, 0, 0);
    const box = (stb = createVirtualStb({ width: 320, height: 180, fps: 50, stillFps: 5, animations: true, now: () => clock }));
    await waitFor(() => box.currentFrame() !== undefined, 'first render');
    const { stream, chunks } = sink(true);
    const detach = box.feed(stream);
    await waitFor(() => chunks.length >= 5, 'five frames');
    detach();
    expect(box.stats().still).to.equal(0);
  });
});
