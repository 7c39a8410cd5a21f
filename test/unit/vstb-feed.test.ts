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

const W = 160;
const H = 90;
const FRAME = W * H * 3;

async function waitFor(what: string, cond: () => boolean, timeoutMs = 3000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

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

  function make(fps: number): VirtualStb {
    clock = Date.UTC(2024, 0, 1, 12, 0, 0);
    return (stb = createVirtualStb({ width: W, height: H, fps, now: () => clock }));
  }

  it('renders once up front, again only when the clock second or the state changes', async () => {
    const box = make(50);
    await waitFor('first render', () => box.currentFrame() !== undefined);
    const { stream, chunks } = sink(true);
    const detach = box.feed(stream);
    await sleep(200); // ~10 ticks with nothing changing
    expect(box.stats().renders).to.equal(1);
    expect(chunks.length).to.be.greaterThan(3);
    clock += 400; // same second
    await sleep(60);
    expect(box.stats().renders).to.equal(1);
    clock += 600; // next second: the clock on screen ticks
    await waitFor('clock re-render', () => box.stats().renders === 2);
    const before = box.currentFrame();
    box.transportListener({ trains: new LircEncoder(vstbRemote()).sendOnce('KEY_DOWN'), at: 0 });
    await waitFor('key re-render', () => box.stats().renders === 3);
    expect(box.currentFrame()!.equals(before!)).to.equal(false);
    expect(chunks.every((c) => c.length === FRAME), 'whole frames only').to.equal(true);
    detach();
  });

  it('writes frames at the configured fps (20 fps for 1 s: 17-22 frames)', async () => {
    const box = make(20);
    await waitFor('first render', () => box.currentFrame() !== undefined);
    const { stream, chunks } = sink(true);
    const detach = box.feed(stream);
    await sleep(1000);
    detach();
    expect(chunks.length).to.be.within(17, 22);
  });

  it('a stdin that does not drain holds one frame: later ticks are dropped, nothing queues', async () => {
    const box = make(50);
    await waitFor('first render', () => box.currentFrame() !== undefined);
    const { stream, chunks } = sink(false);
    const detach = box.feed(stream);
    await sleep(200);
    detach();
    expect(chunks.length).to.equal(1);
    expect(stream.writableLength).to.equal(FRAME);
    expect(box.stats()).to.include({ written: 1 });
    expect(box.stats().dropped).to.be.greaterThan(5);
  });

  it('detach and stop() end the writes; a closed stdin is skipped, not written to', async () => {
    const box = make(50);
    await waitFor('first render', () => box.currentFrame() !== undefined);
    const a = sink(true);
    const b = sink(true);
    const detachA = box.feed(a.stream);
    box.feed(b.stream);
    await sleep(60);
    detachA();
    const countA = a.chunks.length;
    await sleep(60);
    expect(a.chunks.length).to.equal(countA);
    box.stop();
    const countB = b.chunks.length;
    await sleep(60);
    expect(b.chunks.length).to.equal(countB);
    expect(countA).to.be.greaterThan(0);

    const c = sink(true);
    c.stream.destroy();
    const box2 = make(50);
    await waitFor('first render', () => box2.currentFrame() !== undefined);
    const detachC = box2.feed(c.stream);
    await sleep(60);
    detachC();
    expect(c.chunks.length).to.equal(0);
  });
});
