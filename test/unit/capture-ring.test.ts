/** The latest-frame ring: framing of the byte stream, publishing, leases. */
import { expect } from 'chai';
import { FrameRing } from '../../src/hardware/capture/frame-ring.js';

const W = 4;
const H = 2;
const BYTES = W * H * 3;

/** A frame whose every byte is `fill`, so frames are told apart by content. */
const frame = (fill: number) => Buffer.alloc(BYTES, fill);

/** Feed frames as one byte stream cut into chunks of `chunk` bytes. */
function feed(ring: FrameRing, fills: number[], chunk: number): number {
  const stream = Buffer.concat(fills.map(frame));
  let completed = 0;
  for (let o = 0; o < stream.length; o += chunk) completed += ring.push(stream.subarray(o, o + chunk));
  return completed;
}

describe('capture: FrameRing', () => {
  it('cuts the byte stream into frames whatever the chunk size', () => {
    for (const chunk of [1, 5, BYTES - 1, BYTES, BYTES + 7, 3 * BYTES]) {
      const ring = new FrameRing(W, H);
      expect(feed(ring, [1, 2, 3, 4, 5], chunk), `chunk ${chunk}`).to.equal(5);
      const f = ring.latestCopy()!;
      expect(f.data.equals(frame(5)), `chunk ${chunk}`).to.equal(true);
      expect(f.seq).to.equal(5);
      expect([f.width, f.height]).to.deep.equal([W, H]);
    }
  });

  it('keepOneIn n: counts every frame but copies and publishes only one in n, from the start of a run', () => {
    for (const chunk of [1, BYTES, 3 * BYTES]) {
      const ring = new FrameRing(W, H);
      ring.keepOneIn = 3;
      expect(feed(ring, [1, 2, 3], chunk), `chunk ${chunk}`).to.equal(3);
      expect(ring.latestCopy()!.data.equals(frame(1)), `chunk ${chunk}: frame 0 kept, 1 and 2 not`).to.equal(true);
      expect(feed(ring, [4, 5], chunk)).to.equal(2);
      expect(ring.latestCopy()!.data.equals(frame(4)), `chunk ${chunk}: frame 3 kept`).to.equal(true);
      expect([ring.latestCopy()!.seq, ring.droppedFrames()]).to.deep.equal([2, 0]);
      ring.keepOneIn = 1;
      feed(ring, [6], chunk);
      expect(ring.latestCopy()!.data.equals(frame(6))).to.equal(true);
      ring.keepOneIn = 3;
      ring.resetPartial();
      feed(ring, [7, 8], chunk);
      expect(ring.latestCopy()!.data.equals(frame(7)), 'a new run starts at index 0').to.equal(true);
    }
  });

  it('publishes nothing until a frame is complete', () => {
    const ring = new FrameRing(W, H);
    expect(ring.push(frame(9).subarray(0, BYTES - 1))).to.equal(0);
    expect(ring.latestCopy()).to.equal(undefined);
    expect(ring.push(Buffer.from([9]))).to.equal(1);
    expect(ring.latestCopy()!.data.equals(frame(9))).to.equal(true);
  });

  it('resetPartial drops a half frame so the next process starts on a boundary', () => {
    const ring = new FrameRing(W, H);
    ring.push(frame(7).subarray(0, 10));
    ring.resetPartial();
    expect(feed(ring, [8], 4)).to.equal(1);
    expect(ring.latestCopy()!.data.equals(frame(8))).to.equal(true);
  });

  it('latestCopy returns bytes the caller owns', () => {
    const ring = new FrameRing(W, H);
    feed(ring, [1], BYTES);
    const copy = ring.latestCopy()!;
    feed(ring, [2, 3, 4, 5, 6], BYTES);
    expect(copy.data.equals(frame(1))).to.equal(true);
    expect(copy.seq).to.equal(1);
  });

  it('a leased frame is not overwritten while the lease lasts, however many frames arrive', async () => {
    const ring = new FrameRing(W, H);
    feed(ring, [1], BYTES);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const seen = ring.withLatest(async (f) => {
      await held;
      return Buffer.from(f.data);
    });
    feed(ring, [2, 3, 4, 5, 6, 7], 5);
    expect(ring.latestCopy()!.data.equals(frame(7)), 'newest frame still published').to.equal(true);
    release();
    expect((await seen)!.equals(frame(1))).to.equal(true);
  });

  it('without leases a published slot is reused after two more frames (why reads lease)', async () => {
    const ring = new FrameRing(W, H);
    feed(ring, [1], BYTES);
    let view: Buffer | undefined;
    await ring.withLatest(async (f) => {
      view = f.data;
    });
    // The lease has ended; a view kept past it is unprotected.
    feed(ring, [2, 3, 4], BYTES);
    expect(view!.equals(frame(1))).to.equal(false);
  });

  it('drops frames while two readers hold two older frames, then resumes', async () => {
    const ring = new FrameRing(W, H);
    const gates: Array<() => void> = [];
    const hold = () =>
      ring.withLatest(async (f) => {
        await new Promise<void>((r) => gates.push(r));
        return f.data[0];
      });
    feed(ring, [1], BYTES);
    const a = hold();
    feed(ring, [2], BYTES);
    const b = hold();
    feed(ring, [3], BYTES); // published: 3; leased: 1 and 2; no free slot left
    expect(feed(ring, [4, 5], BYTES)).to.equal(2);
    expect(ring.droppedFrames()).to.equal(2);
    expect(ring.latestCopy()!.data.equals(frame(3))).to.equal(true);
    gates.forEach((g) => g());
    expect([await a, await b]).to.deep.equal([1, 2]);
    feed(ring, [6], BYTES);
    expect(ring.latestCopy()!.data.equals(frame(6))).to.equal(true);
    expect(ring.latestCopy()!.seq).to.equal(4);
  });
});
