/**
 * The template images of the example test pack (examples/test-pack/tests/
 * images/): for each, the box state it is cut from and where. One list
 * serves scripts/make-example-templates.ts, which writes the PNGs, and the
 * unit test that checks the committed PNGs still equal a fresh render, so a
 * renderer change that would break the example pack is caught.
 */
import { initialState, type StbState } from './state.js';

/** The capture size the example pack's templates are made for (the config's default). */
export const TEMPLATE_WIDTH = 1280;
export const TEMPLATE_HEIGHT = 720;
/** The clock shown while rendering templates; no template includes the clock. */
export const TEMPLATE_CLOCK = '12:00:00';

/** One template: file name, the state it shows, and the region cut out (pixels of the 1280x720 frame). */
export interface ExampleTemplate {
  file: string;
  state: StbState;
  region: { x: number; y: number; width: number; height: number };
}

const home = initialState();
/** Inside a focused main-menu item: its amber background and label. */
const menuItem = (i: number) => ({ x: 88, y: 148 + i * 96, width: 300, height: 64 });
/** A page's title and its accent bar. */
const TITLE = { x: 76, y: 80, width: 420, height: 84 };
/** The left part of the channel banner, with its text. */
const BANNER = { x: 80, y: 560, width: 720, height: 110 };

export const EXAMPLE_TEMPLATES: readonly ExampleTemplate[] = [
  { file: 'menu-live-tv-focused.png', state: home, region: menuItem(0) },
  { file: 'menu-guide-focused.png', state: { ...home, homeFocus: 1 }, region: menuItem(1) },
  { file: 'menu-apps-focused.png', state: { ...home, homeFocus: 3 }, region: menuItem(3) },
  { file: 'menu-settings-focused.png', state: { ...home, homeFocus: 4 }, region: menuItem(4) },
  { file: 'title-guide.png', state: { ...home, homeFocus: 1, page: 'guide' }, region: TITLE },
  { file: 'title-apps.png', state: { ...home, homeFocus: 3, page: 'apps' }, region: TITLE },
  { file: 'title-settings.png', state: { ...home, homeFocus: 4, page: 'settings' }, region: TITLE },
  {
    file: 'app-music-focused.png',
    state: { ...home, homeFocus: 3, page: 'apps', appFocus: 3 },
    // Inside the tile (name and focus underline): the frame alone would look alike on every focused tile.
    region: { x: 120, y: 460, width: 260, height: 110 },
  },
  { file: 'banner-ch-102.png', state: { ...home, page: 'live', channel: 102, bannerUntil: 1 }, region: BANNER },
  { file: 'banner-ch-105.png', state: { ...home, page: 'live', channel: 105, bannerUntil: 1 }, region: BANNER },
];

/** The pixels of `region` of a raw rgb24 frame `width` pixels wide, as a raw rgb24 image. */
export function cutRegion(frame: Buffer, width: number, region: ExampleTemplate['region']): Buffer {
  const out = Buffer.alloc(region.width * region.height * 3);
  for (let row = 0; row < region.height; row++) {
    const from = ((region.y + row) * width + region.x) * 3;
    frame.copy(out, row * region.width * 3, from, from + region.width * 3);
  }
  return out;
}
