/**
 * Rendering the virtual set-top box: frames of the capture size, a different
 * picture for every different view, the clock ticking, standby black, text
 * really drawn (a font is installed), and the same view always giving the
 * same bytes (templates depend on it).
 */
import { expect } from 'chai';
import { clockText, initialState, pressKey, renderFrame, viewOf, type StbView } from '../../src/hardware/virtual/index.js';

const home = viewOf(initialState());

/** Pixels (not bytes) that differ between two frames of the same size. */
function differingPixels(a: Buffer, b: Buffer): number {
  let n = 0;
  for (let i = 0; i < a.length; i += 3) if (a[i] !== b[i] || a[i + 1] !== b[i + 1] || a[i + 2] !== b[i + 2]) n++;
  return n;
}

/** Distinct colours in a rectangle of a frame. */
function colours(frame: Buffer, width: number, x0: number, y0: number, w: number, h: number): number {
  const seen = new Set<number>();
  for (let y = y0; y < y0 + h; y++) {
    for (let x = x0; x < x0 + w; x++) {
      const i = (y * width + x) * 3;
      seen.add((frame[i]! << 16) | (frame[i + 1]! << 8) | frame[i + 2]!);
    }
  }
  return seen.size;
}

describe('virtual set-top box: rendering', () => {
  it('frames are raw rgb24 of exactly the capture size, at several sizes and aspect ratios', async () => {
    for (const [w, h] of [[1280, 720], [640, 360], [1920, 1080], [720, 576], [333, 201]] as const) {
      const frame = await renderFrame(home, '12:00:00', w, h);
      expect(frame.length, `${w}x${h}`).to.equal(w * h * 3);
    }
  });

  it('the same view and clock render identical bytes', async () => {
    const a = await renderFrame(home, '08:15:30', 640, 360);
    const b = await renderFrame(home, '08:15:30', 640, 360);
    expect(a.equals(b)).to.equal(true);
  });

  it('every different state renders a different frame', async () => {
    const s0 = initialState();
    const views: StbView[] = [
      home,
      viewOf(pressKey(s0, 'KEY_DOWN', 0)),
      ...(['guide', 'recordings', 'apps', 'settings'] as const).map((page) => ({ ...home, page })),
      { ...home, page: 'apps', appFocus: 4 },
      { ...home, page: 'live' },
      { ...home, page: 'live', banner: true },
      { ...home, page: 'live', banner: true, channel: 105 },
      { ...home, entry: '1' },
      { ...home, entry: '12' },
      { ...home, power: false },
    ];
    const frames = await Promise.all(views.map((v) => renderFrame(v, '10:00:00', 320, 180)));
    for (let i = 0; i < frames.length; i++) {
      for (let j = i + 1; j < frames.length; j++) {
        expect(frames[i]!.equals(frames[j]!), `${JSON.stringify(views[i])} vs ${JSON.stringify(views[j])}`).to.equal(false);
      }
    }
  });

  it('the clock (HH:MM:SS, top right) changes the frame, and only the top-right corner', async () => {
    const W = 640;
    const a = await renderFrame(home, '10:00:00', W, 360);
    const b = await renderFrame(home, '10:00:01', W, 360);
    expect(differingPixels(a, b)).to.be.greaterThan(10);
    for (let y = 0; y < 360; y++) {
      for (let x = 0; x < W; x++) {
        const i = (y * W + x) * 3;
        if (a[i] !== b[i]) expect(x >= W / 2 && y < 50, `pixel ${x},${y}`).to.equal(true);
      }
    }
    expect(clockText(new Date(2024, 0, 1, 7, 5, 9).getTime())).to.equal('07:05:09');
  });

  it('text is drawn: a menu label has anti-aliased glyph edges, not a flat box', async () => {
    const frame = await renderFrame(home, '10:00:00', 1280, 720);
    // The focused "Live TV" item: amber box x 80-480, y 140-220; its label starts at x 110.
    expect(colours(frame, 1280, 100, 150, 200, 60)).to.be.greaterThan(5);
    // The panel's empty lower middle is one flat colour.
    expect(colours(frame, 1280, 700, 400, 200, 60)).to.equal(1);
  });

  it('standby is a black screen', async () => {
    const frame = await renderFrame({ ...home, power: false }, '10:00:00', 320, 180);
    expect(frame.every((b) => b === 0)).to.equal(true);
  });
});
