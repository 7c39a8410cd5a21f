/** The recording's bookkeeping: segment ring, stream clock, concat script, and the recording output's arguments. */
import { expect } from 'chai';
import { concatScript, keptSeconds, videoClock } from '../../src/hardware/capture/clip-cut.js';
import { recordOutput } from '../../src/hardware/capture/ffmpeg-args.js';
import { SegmentRing, type Segment } from '../../src/hardware/capture/segment-ring.js';
import { StreamClock } from '../../src/hardware/capture/stream-clock.js';

/** Segment i of a run, one second long, ending at (i + 1) s. */
const seg = (i: number, run = 'r1'): Segment => ({
  path: `/rec/seg-${run}-${String(i).padStart(6, '0')}.ts`,
  run,
  duration: 1,
  start: i * 1000,
  end: (i + 1) * 1000,
  closedAt: (i + 1) * 1000 + 50,
});

describe('capture: SegmentRing (the bounded ring of recording segments)', () => {
  it('keeps keepMs of recording and expires the rest, oldest first', () => {
    const ring = new SegmentRing({ keepMs: 5000, maxClipMs: 60_000 });
    for (let i = 0; i < 20; i++) ring.add(seg(i));
    const gone = ring.expire(20_000);
    expect(gone.map((s) => s.end)).to.deep.equal([1000, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000, 10_000, 11_000, 12_000, 13_000, 14_000]);
    expect(ring.list().map((s) => s.end)).to.deep.equal([15_000, 16_000, 17_000, 18_000, 19_000, 20_000]);
  });

  it('"never delete segments an open clip still needs": a pin holds them until released', () => {
    const ring = new SegmentRing({ keepMs: 2000, maxClipMs: 60_000 });
    for (let i = 0; i < 10; i++) ring.add(seg(i));
    const unpin = ring.pin(6500);
    for (let i = 10; i < 30; i++) ring.add(seg(i));
    ring.expire(30_000);
    // The clip began at 6.5 s; its segment (6-7 s) and a slack of 2 s before it stay.
    expect(ring.list()[0]!.end).to.be.at.most(7000);
    expect(ring.covering(6500, 30_000)[0]!.start).to.equal(6000);
    unpin();
    ring.expire(30_000);
    expect(ring.list()[0]!.end).to.equal(28_000);
  });

  it('a clip left open past maxClipMs stops protecting segments (the ring stays bounded)', () => {
    const ring = new SegmentRing({ keepMs: 2000, maxClipMs: 10_000 });
    ring.pin(0);
    for (let i = 0; i < 30; i++) ring.add(seg(i));
    expect(ring.expire(5000)).to.have.length(0);
    ring.expire(30_000);
    expect(ring.list().length).to.be.at.most(3);
  });

  it('covering() gives the segments that show any moment of the span', () => {
    const ring = new SegmentRing({ keepMs: 60_000, maxClipMs: 60_000 });
    for (let i = 0; i < 10; i++) ring.add(seg(i));
    expect(ring.covering(2500, 5250).map((s) => s.start)).to.deep.equal([2000, 3000, 4000, 5000]);
    expect(ring.covering(3000, 4000).map((s) => s.start)).to.deep.equal([3000]);
    expect(ring.latestEnd()).to.equal(10_000);
  });
});

describe('capture: StreamClock (stream time to Node time)', () => {
  it('maps stream time through the least-delayed recent preview frame', () => {
    const c = new StreamClock(5);
    expect(c.toMonotonic(0)).to.equal(undefined);
    // Stream time 0 at 1000 ms; frames every 200 ms arrive 5-40 ms late; the clock adds one interval (200 ms)
    // because the constant rate can write a frame up to one slot early.
    [1040, 1205, 1410, 1620, 1830].forEach((t) => c.frame(t));
    expect(c.toMonotonic(2)).to.equal(3205);
  });

  it('adds two intervals when the preview is slower than the input (its frames can come two slots early)', () => {
    const c = new StreamClock(5, 25);
    [1040, 1205, 1410, 1620, 1830].forEach((t) => c.frame(t));
    expect(c.toMonotonic(2)).to.equal(3405);
  });

  it('a preview that reaches Node later and later (its reader too slow) does not make mapped times late; a new process restarts at 0', () => {
    const c = new StreamClock(25);
    // Frame n shows stream time n / 25 (40 ms apart); from frame 10 on each arrives 30 ms later than the one before.
    for (let n = 0; n < 200; n++) c.frame(1000 + n * 40 + 5 + Math.max(0, n - 10) * 30);
    // 5.7 s behind at the end: still mapped through the least late frame (5 ms late, plus one interval's hold).
    // A 2 s window mapped it 5.6 s late, and a run's video was cut that much short (issue 20).
    expect(c.toMonotonic(199 / 25)).to.equal(1000 + 199 * 40 + 45);
    // How far the output has got: frame 199's moment, whenever it arrived.
    expect(c.position()).to.equal(1000 + 199 * 40 + 45);
    c.reset();
    expect(c.position()).to.equal(undefined);
    c.frame(90_000);
    expect(c.toMonotonic(1)).to.equal(91_040);
  });
});

describe('capture: clip cutting helpers', () => {
  it('the concat script lists each segment with its duration, quoting paths', () => {
    const s = { ...seg(0), path: "/rec/it's.ts", duration: 1.08 };
    expect(concatScript([s, seg(1)])).to.equal(
      "file '/rec/it'\\''s.ts'\nduration 1.080000\nfile '/rec/seg-r1-000001.ts'\nduration 1.000000\n",
    );
  });

  it('keeps all joined seconds less what the last segment shows after the end', () => {
    expect(keptSeconds([seg(2), seg(3), seg(4)], 4250)).to.be.closeTo(2.25, 1e-9);
    expect(keptSeconds([seg(2), seg(3), seg(4)], 9000)).to.equal(3);
    // Across a capture restart the gap is not in the video: durations count, not wall time.
    expect(keptSeconds([seg(2, 'a'), { ...seg(7, 'b') }], 7500)).to.be.closeTo(1.5, 1e-9);
  });
});

describe('capture: the recording output', () => {
  it('H.264 with a keyframe every second, repeated headers, 1 s MPEG-TS segments, CSV list', () => {
    const args = recordOutput({ width: 1280, height: 720, fps: 25, pattern: '/rec/seg-x-%06d.ts', list: 'pipe:3' }).args;
    const after = (flag: string) => args[args.indexOf(flag) + 1];
    expect([after('-c:v'), after('-preset'), after('-g'), after('-keyint_min')]).to.deep.equal(['libx264', 'ultrafast', '25', '25']);
    expect([after('-x264-params'), after('-force_key_frames'), after('-sc_threshold')]).to.deep.equal(['repeat-headers=1', 'expr:gte(t,n_forced*1)', '0']);
    expect([after('-f'), after('-segment_time'), after('-segment_format'), after('-segment_list'), after('-segment_list_type')])
      .to.deep.equal(['segment', '1', 'mpegts', 'pipe:3', 'csv']);
    expect(args.at(-1)).to.equal('/rec/seg-x-%06d.ts');
  });

  it('ultrafast up to 720p, veryfast above (DESIGN.md)', () => {
    const preset = (width: number, height: number) => {
      const a = recordOutput({ width, height, fps: 30, pattern: 'p', list: 'l' }).args;
      return a[a.indexOf('-preset') + 1];
    };
    expect([preset(1280, 720), preset(1920, 1080)]).to.deep.equal(['ultrafast', 'veryfast']);
  });
});

describe('recording: video.json', () => {
  it('start_time is the first segment\'s start on the wall clock (monotonic + the wall-minus-monotonic offset)', () => {
    const offset = Date.UTC(2026, 10, 23, 12, 0, 0);
    expect(videoClock([seg(3), seg(4)], offset)).to.deep.equal({ start_time: '2026-11-23T12:00:03.000Z' });
    expect(videoClock([{ ...seg(0), start: 1234.4 }], offset)).to.deep.equal({ start_time: '2026-11-23T12:00:01.234Z' });
  });
});
