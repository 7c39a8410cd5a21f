/**
 * The virtual box's animations and its record (animations.ts), on a fixed
 * clock: which key starts which animation, the pictures drawn, the frame
 * numbers in the top band and the record of changed frames.
 */
import { expect } from 'chai';
import { Animator, animationFor, BLACK_MS, initialState, MARK_BITS, MARK_SIZE, pressKey, SLIDE_MS, type StbState } from '../../src/hardware/virtual/index.js';

const W = 320;
const H = 180;
const BAND = Math.ceil((H * 90) / 720);

function picture(value: number): Buffer {
  return Buffer.alloc(W * H * 3, value);
}

function numberOf(frame: Buffer): number {
  let n = 0;
  for (let bit = 0; bit < MARK_BITS; bit++) {
    const i = ((MARK_SIZE / 2) * W + bit * MARK_SIZE + MARK_SIZE / 2) * 3;
    if (frame[i]! > 127) n |= 1 << bit;
  }
  return n >>> 0;
}

const px = (f: Buffer, x: number, y: number) => f[(y * W + x) * 3]!;

describe('virtual box animations', () => {
  it('starts black on tuning, a slide opening a page from the menu, a spinner on OK on an app tile', () => {
    const home = initialState();
    const press = (s: StbState, key: string) => [s, pressKey(s, key, 1000), key] as const;
    expect(animationFor(...press(home, 'KEY_OK'))).to.equal('black'); // Live TV
    const live = pressKey(home, 'KEY_OK', 1000);
    expect(animationFor(...press(live, 'KEY_CHANNELUP'))).to.equal('black');
    expect(animationFor(...press(live, 'KEY_MENU'))).to.equal(undefined);
    expect(animationFor(...press(home, 'KEY_DOWN'))).to.equal(undefined);
    const appsFocused = { ...home, homeFocus: 3 };
    expect(animationFor(...press(appsFocused, 'KEY_OK'))).to.equal('slide');
    const apps = pressKey(appsFocused, 'KEY_OK', 1000);
    expect(animationFor(...press(apps, 'KEY_OK'))).to.equal('spinner');
    expect(animationFor(...press(apps, 'KEY_RIGHT'))).to.equal(undefined);
  });

  it('numbers every frame and records the frames whose picture below the top band changed', () => {
    let now = 0;
    const a = new Animator(W, H, () => now);
    const f1 = a.frame(picture(50));
    now += 40;
    const f2 = a.frame(picture(50));
    expect([numberOf(f1), numberOf(f2)]).to.deep.equal([1, 2]);
    // a change inside the top band only (the clock) is no change of the picture
    const clock = picture(50);
    clock.fill(200, 20 * W * 3, 20 * W * 3 + 30);
    now += 40;
    a.frame(clock);
    now += 40;
    a.frame(picture(60));
    expect(a.truth().changes).to.deep.equal([{ mark: 1, at: 0 }, { mark: 4, at: 120 }]);
  });

  it('draws the black for its length, then the picture; the record names the key and the frame before it', () => {
    let now = 1000;
    const a = new Animator(W, H, () => now);
    a.frame(picture(50));
    a.keyObeyed('KEY_CHANNELUP', 'black');
    const marks: number[] = [];
    for (let t = 0; t <= BLACK_MS; t += 40) {
      now = 1000 + t;
      const f = a.frame(picture(90));
      marks.push(px(f, W / 2, H / 2));
      expect(px(f, W - 1, BAND - 1)).to.equal(90); // the band keeps the picture's (the clock)
    }
    expect(marks).to.deep.equal([...Array(10).fill(0), 90]);
    expect(a.truth().keys).to.deep.equal([{ key: 'KEY_CHANNELUP', at: 1000, mark: 1, animation: 'black' }]);
    expect(a.truth().changes.map((c) => c.mark)).to.deep.equal([1, 2, 12]);
  });

  it('slides the page in from the right', () => {
    let now = 0;
    const a = new Animator(W, H, () => now);
    a.keyObeyed('KEY_OK', 'slide');
    const page = picture(0);
    for (let y = 0; y < H; y++) page.fill(255, (y * W) * 3, (y * W + 10) * 3); // a white stripe at the left edge
    now = SLIDE_MS / 2;
    const half = a.frame(page);
    expect(px(half, 5, H / 2)).to.equal(0);
    expect(px(half, W / 2 + 5, H / 2)).to.equal(255);
    now = SLIDE_MS;
    expect(px(a.frame(page), 5, H / 2)).to.equal(255);
  });
});
