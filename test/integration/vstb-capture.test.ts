/**
 * The virtual set-top box end to end below the API: its frames go through a
 * real ffmpeg (`virtual:` capture, 640x360), key presses go through the LIRC
 * encoder and a VirtualTransport, and the screenshots the capture serves
 * change exactly as a fresh render of the expected screen says.
 */
import { expect } from 'chai';
import sharp from 'sharp';
import { FfmpegFrameSource } from '../../src/hardware/capture/index.js';
import { LircEncoder } from '../../src/hardware/ir/lirc/index.js';
import { VirtualTransport } from '../../src/hardware/ir/transports/virtual.js';
import {
  clockText,
  createVirtualStb,
  ENTRY_TIMEOUT_MS,
  initialState,
  renderFrame,
  viewOf,
  vstbRemote,
  type StbView,
  type VirtualStb,
} from '../../src/hardware/virtual/index.js';
import { waitFor } from '../helpers/wait.js';

const W = 640;
const H = 360;


describe('virtual set-top box through a real ffmpeg capture (virtual:, 640x360)', function () {
  let stb: VirtualStb;
  let source: FfmpegFrameSource;
  let transport: VirtualTransport;
  let clock = new Date(2024, 5, 1, 18, 30, 0).getTime();
  const encoder = new LircEncoder(vstbRemote());
  const home = viewOf(initialState());

  before(async () => {
    stb = createVirtualStb({ width: W, height: H, fps: 25, now: () => clock });
    transport = new VirtualTransport(stb.transportListener);
    source = new FfmpegFrameSource({ uri: 'virtual:', width: W, height: H, fps: 25, preview_fps: 10, ffmpeg: 'ffmpeg', feed: stb.feed });
    await source.start();
    await waitFor(() => source.health().online, 'capture online');
  });

  after(async () => {
    await source.stop();
    stb.stop();
    await transport.close();
  });

  const press = async (...keys: string[]) => {
    for (const key of keys) await transport.send(encoder.sendOnce(key), { key: { remote: 'vstb', key } });
  };

  /** Wait until the captured frame is exactly the render of `view` at the current clock. */
  async function expectScreen(view: StbView): Promise<void> {
    const expected = await renderFrame(view, clockText(clock), W, H);
    let last: Buffer | undefined;
    await waitFor(() => {
      last = source.latestFrame()?.data;
      return last?.equals(expected) ?? false;
    }, `the screen ${JSON.stringify(view)}`).catch((e: unknown) => {
      const differing = last ? [...Array(W * H).keys()].filter((p) => last!.readUIntBE(p * 3, 3) !== expected.readUIntBE(p * 3, 3)).length : -1;
      throw new Error(`${String(e)} (${differing} pixels differ)`);
    });
  }

  it('the first screenshot is the main menu, pixel for pixel, and a lossless PNG of it', async () => {
    await expectScreen(home);
    const png = await source.screenshotPng();
    const { data } = await sharp(png).raw().toBuffer({ resolveWithObject: true });
    expect(data.equals(await renderFrame(home, clockText(clock), W, H))).to.equal(true);
  });

  it('KEY_DOWN moves the focus; KEY_OK opens the Guide; KEY_BACK returns', async () => {
    await press('KEY_DOWN');
    await expectScreen({ ...home, homeFocus: 1 });
    await press('KEY_OK');
    await expectScreen({ ...home, homeFocus: 1, page: 'guide' });
    await press('KEY_BACK');
    await expectScreen({ ...home, homeFocus: 1 });
  });

  it('the clock ticks on screen: the next second is a new frame', async () => {
    clock += 1000;
    await expectScreen({ ...home, homeFocus: 1 });
  });

  it('digits: "CH 10-" while typing, then Live TV with the banner "CH 104 - Kids Barn"', async () => {
    await press('KEY_1', 'KEY_0');
    await expectScreen({ ...home, homeFocus: 1, entry: '10' });
    await press('KEY_4');
    await expectScreen({ ...home, homeFocus: 1, page: 'live', channel: 104, banner: true });
    await press('KEY_7');
    clock += ENTRY_TIMEOUT_MS;
    await expectScreen({ ...home, homeFocus: 1, page: 'live', channel: 7, banner: true });
  });

  it('KEY_POWER: a black screen, then the main menu again', async () => {
    await press('KEY_POWER');
    await waitFor(() => source.latestFrame()?.data.every((b) => b === 0) ?? false, 'black');
    await press('KEY_POWER');
    await expectScreen({ ...home, channel: 7 });
  });
});
