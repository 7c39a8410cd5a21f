/**
 * The virtual set-top box's frame cache puts a frame together from a body
 * kept per view and the clock rendered apart: every picture must be the
 * same bytes as one render of the whole frame (templates cut from whole
 * renders must keep matching), and a press back to a screen seen before
 * must not wait for an SVG render.
 */
import { expect } from 'chai';
import { Writable } from 'node:stream';
import { LircEncoder } from '../../src/hardware/ir/lirc/index.js';
import { clockText, createVirtualStb, renderFrame, viewOf, vstbRemote, type VirtualStb } from '../../src/hardware/virtual/index.js';
import { waitFor } from '../helpers/wait.js';

const encoder = new LircEncoder(vstbRemote());

describe('virtual set-top box: frame cache', function () {
  this.timeout(120_000);
  let stb: VirtualStb | undefined;
  afterEach(() => {
    stb?.stop();
    stb = undefined;
  });

  /** Press `key` and wait until the box shows the whole render of its new state. */
  async function pressAndCheck(box: VirtualStb, key: string, now: number, w: number, h: number): Promise<void> {
    box.transportListener({ trains: encoder.sendOnce(key), at: 0 });
    const view = viewOf(box.state());
    const whole = await renderFrame(view, view.power ? clockText(now) : '', w, h);
    await waitFor(() => box.currentFrame()?.equals(whole) === true, { what: `${key}: the picture of ${JSON.stringify(view)}`, timeoutMs: 30_000 });
  }

  for (const [w, h] of [[1280, 720], [333, 201]] as const) {
    it(`every picture is byte-identical to one render of the whole frame (${w}x${h})`, async () => {
      let clock = new Date(2024, 0, 1, 12, 0, 0).getTime();
      const box = (stb = createVirtualStb({ width: w, height: h, fps: 25, now: () => clock }));
      const first = await renderFrame(viewOf(box.state()), clockText(clock), w, h);
      await waitFor(() => box.currentFrame()?.equals(first) === true, { what: 'first picture', timeoutMs: 30_000 });
      // Menus, pages, the digit entry box (near the clock), the channel banner, standby and back.
      const keys = ['KEY_DOWN', 'KEY_DOWN', 'KEY_UP', 'KEY_OK', 'KEY_BACK', 'KEY_1', 'KEY_2', 'KEY_OK', 'KEY_MENU',
        'KEY_DOWN', 'KEY_DOWN', 'KEY_DOWN', 'KEY_OK', 'KEY_RIGHT', 'KEY_POWER', 'KEY_POWER', 'KEY_UP'];
      for (const key of keys) await pressAndCheck(box, key, clock, w, h);
      clock += 1000; // the clock ticks on a screen whose body is kept
      const view = viewOf(box.state());
      const ticked = await renderFrame(view, clockText(clock), w, h);
      // Feed ticks refresh the cache (a press would too).
      box.feed(new Writable({ write: (_chunk, _enc, done) => done() }));
      await waitFor(() => box.currentFrame()?.equals(ticked) === true, { what: 'the next second', timeoutMs: 30_000 });
    });
  }

  it('a press back to a screen seen before makes its picture at once, without an SVG render', async () => {
    const clock = new Date(2024, 0, 1, 12, 0, 0).getTime();
    const box = (stb = createVirtualStb({ width: 640, height: 360, fps: 25, now: () => clock }));
    await waitFor(() => box.currentFrame() !== undefined, { what: 'first picture', timeoutMs: 30_000 });
    const home = box.currentFrame()!;
    await pressAndCheck(box, 'KEY_DOWN', clock, 640, 360);
    const down = box.currentFrame()!;
    const renders = box.stats().svgRenders;
    box.transportListener({ trains: encoder.sendOnce('KEY_UP'), at: 0 });
    expect(box.currentFrame()!.equals(home), 'home again, synchronously').to.equal(true);
    box.transportListener({ trains: encoder.sendOnce('KEY_DOWN'), at: 0 });
    expect(box.currentFrame()!.equals(down), 'down again, synchronously').to.equal(true);
    expect(box.stats().svgRenders).to.equal(renders);
  });
});
