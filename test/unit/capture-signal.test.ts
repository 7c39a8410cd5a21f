/** Black and frozen picture detection on sampled pixels (SignalMonitor), with synthetic frames. */
import { expect } from 'chai';
import { DEFAULT_FROZEN_SECS, SignalMonitor, signalOptionsFor } from '../../src/hardware/capture/signal-monitor.js';
import { initialState, renderFrame, viewOf } from '../../src/hardware/virtual/index.js';

const W = 320;
const H = 180;

function solid(r: number, g: number, b: number): Buffer {
  const f = Buffer.alloc(W * H * 3);
  for (let i = 0; i < f.length; i += 3) f.set([r, g, b], i);
  return f;
}

/** A picture that differs everywhere from frame to frame (seeded noise). */
function noise(seed: number): Buffer {
  const f = Buffer.alloc(W * H * 3);
  let x = seed * 2654435761 + 1;
  for (let i = 0; i < f.length; i++) {
    x = (x * 1103515245 + 12345) >>> 0;
    f[i] = x >>> 24;
  }
  return f;
}

describe('capture: SignalMonitor (no-signal detection)', () => {
  it('"no signal: the picture is black" once black frames lasted blackSecs, not before', () => {
    const m = new SignalMonitor({ blackSecs: 2, frozenSecs: 10 });
    const black = solid(0, 0, 0);
    for (let t = 0; t <= 1900; t += 100) m.observe(black, t);
    expect(m.report(1900).signal).to.equal('ok');
    m.observe(black, 2000);
    expect(m.report(2000)).to.deep.equal({ signal: 'black', reason: 'no signal: the picture is black' });
  });

  it('a dark but not black picture (luma above the threshold) is not black', () => {
    const m = new SignalMonitor({ blackSecs: 0.1, frozenSecs: 100 });
    const grey = solid(60, 60, 60);
    for (let t = 0; t <= 1000; t += 100) m.observe(grey, t);
    expect(m.report(1000).signal).to.equal('ok');
  });

  it('a short black flash (a channel change) ends the black state and restarts its timer', () => {
    const m = new SignalMonitor({ blackSecs: 1, frozenSecs: 100 });
    m.observe(solid(0, 0, 0), 0);
    m.observe(noise(1), 500);
    m.observe(solid(0, 0, 0), 600);
    m.observe(solid(0, 0, 0), 1500);
    expect(m.report(1500).signal).to.equal('ok');
    expect(m.report(1600).signal).to.equal('black');
  });

  it('"frozen for N s": identical frames for frozenSecs are frozen, with the elapsed seconds', () => {
    const m = new SignalMonitor({ frozenSecs: 3 });
    const red = solid(200, 20, 20);
    for (let t = 0; t <= 2900; t += 100) m.observe(red, t);
    expect(m.report(2900).signal).to.equal('ok');
    m.observe(red, 4200);
    expect(m.report(4200)).to.deep.equal({ signal: 'frozen', reason: 'no signal: the picture has been frozen for 4 s' });
  });

  it('a moving picture is never frozen; a change ends the frozen state', () => {
    const m = new SignalMonitor({ frozenSecs: 1 });
    for (let t = 0; t <= 3000; t += 100) m.observe(noise(t), t);
    expect(m.report(3000).signal).to.equal('ok');
    const still = noise(7);
    for (let t = 3100; t <= 4500; t += 100) m.observe(still, t);
    expect(m.report(4500).signal).to.equal('frozen');
    m.observe(noise(8), 4600);
    expect(m.report(4600).signal).to.equal('ok');
  });

  it('a still picture with a little noise (a capture card) still counts as frozen', () => {
    const m = new SignalMonitor({ frozenSecs: 1 });
    const base = solid(100, 150, 200);
    for (let t = 0; t <= 1500; t += 100) {
      const f = Buffer.from(base);
      for (let i = (t / 100) % 3; i < f.length; i += 7) f[i] = f[i]! + 1; // one level more on a seventh of the bytes
      m.observe(f, t);
    }
    expect(m.report(1500).signal).to.equal('frozen');
  });

  it('black wins over frozen (a black picture is also still)', () => {
    const m = new SignalMonitor({ frozenSecs: 1, blackSecs: 1 });
    for (let t = 0; t <= 2000; t += 100) m.observe(solid(0, 0, 0), t);
    expect(m.report(2000).signal).to.equal('black');
  });

  it('reset() forgets the history (a new ffmpeg process)', () => {
    const m = new SignalMonitor({ frozenSecs: 1 });
    for (let t = 0; t <= 1500; t += 100) m.observe(solid(9, 99, 199), t);
    expect(m.report(1500).signal).to.equal('frozen');
    m.reset();
    m.observe(solid(9, 99, 199), 1600);
    expect(m.report(1700).signal).to.equal('ok');
  });

  it('a still menu of the virtual box is a normal picture: never "frozen", however long it stays', async () => {
    const menu = await renderFrame(viewOf(initialState()), '12:00:00', W, H);
    const m = new SignalMonitor(signalOptionsFor('virtual:'));
    for (let t = 0; t <= 3_600_000; t += 1000) m.observe(menu, t); // an hour of one picture, one frame a second
    expect(m.report(3_600_000)).to.deep.equal({ signal: 'ok', reason: null });
  });

  it('the virtual box still reports black (standby), and frozen when a test asks for it explicitly', () => {
    const m = new SignalMonitor(signalOptionsFor('virtual:', { blackSecs: 1 }));
    for (let t = 0; t <= 1000; t += 100) m.observe(solid(0, 0, 0), t);
    expect(m.report(1000).signal).to.equal('black');
    expect(signalOptionsFor('virtual:', { frozenSecs: 5 }).frozenSecs).to.equal(5);
  });

  it('a real card reports frozen only after DEFAULT_FROZEN_SECS (long: a test may sit on a menu for a while)', () => {
    expect(signalOptionsFor('v4l2:/dev/video0')).to.deep.equal({});
    const m = new SignalMonitor(signalOptionsFor('v4l2:/dev/video0'));
    const still = solid(30, 90, 160);
    const limit = DEFAULT_FROZEN_SECS * 1000;
    for (let t = 0; t < limit; t += 1000) m.observe(still, t);
    expect(m.report(limit - 1000).signal).to.equal('ok');
    expect(DEFAULT_FROZEN_SECS).to.be.at.least(60);
    m.observe(still, limit);
    expect(m.report(limit).signal).to.equal('frozen');
  });

  // Its cost per 1080p frame is a figure of bench/micro-bench.ts, not an assertion here.
  it('1080p frames: alternating pictures are a moving picture, the same picture for frozenSecs is frozen', () => {
    const m = new SignalMonitor({ frozenSecs: 0.1 });
    const a = Buffer.alloc(1920 * 1080 * 3, 17);
    const b = Buffer.alloc(1920 * 1080 * 3, 200);
    for (let i = 0; i < 200; i++) m.observe(i % 2 ? a : b, i);
    expect(m.report(199).signal).to.equal('ok');
    for (let t = 200; t <= 300; t += 10) m.observe(b, t);
    expect(m.report(300).signal).to.equal('frozen');
  });
});
