/**
 * The example test pack's template images against the virtual set-top box's
 * renderer: each committed PNG must be, pixel for pixel, the region of a
 * fresh render it was cut from (else the example tests would stop matching:
 * run scripts/make-example-templates.ts), and must not look like the same
 * region of the box's other screens (else a test could pass on the wrong
 * screen, or on a sibling element such as another menu item). The likeness
 * measure is OpenCV's TM_CCOEFF_NORMED, the one the Python test API matches
 * with at threshold 0.9; checked here at the places that matter rather than
 * slid over whole frames, which takes OpenCV itself half a minute on 2 cores.
 */
import { expect } from 'chai';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import sharp from 'sharp';
import {
  cutRegion,
  EXAMPLE_TEMPLATES,
  TEMPLATE_CLOCK,
  TEMPLATE_HEIGHT,
  TEMPLATE_WIDTH,
  type ExampleTemplate,
} from '../../src/hardware/virtual/example-templates.js';
import { APP_COLUMNS, APPS, CHANNELS, HOME_ITEMS, initialState, renderFrame, viewOf, type StbView } from '../../src/hardware/virtual/index.js';
import { MENU, TILE } from '../../src/hardware/virtual/screens.js';
import { projectRoot } from '../../src/version.js';

const IMAGES = path.join(projectRoot, 'examples', 'test-pack', 'tests', 'images');

/** OpenCV's TM_CCOEFF_NORMED of two equally sized rgb24 images (each channel about its own mean). */
function ccoeffNormed(a: Buffer, b: Buffer): number {
  const mean = (img: Buffer, c: number) => {
    let sum = 0;
    for (let i = c; i < img.length; i += 3) sum += img[i]!;
    return sum / (img.length / 3);
  };
  const ma = [0, 1, 2].map((c) => mean(a, c));
  const mb = [0, 1, 2].map((c) => mean(b, c));
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < a.length; i++) {
    const da = a[i]! - ma[i % 3]!;
    const db = b[i]! - mb[i % 3]!;
    ab += da * db;
    aa += da * da;
    bb += db * db;
  }
  return aa === 0 || bb === 0 ? 0 : ab / Math.sqrt(aa * bb);
}

/** Every kind of screen the box shows: each menu focus, page, app focus, channel with and without banner, entry, standby. */
function allViews(): StbView[] {
  const home = viewOf(initialState());
  return [
    ...HOME_ITEMS.map((_, homeFocus) => ({ ...home, homeFocus })),
    ...(['guide', 'recordings', 'settings'] as const).map((page) => ({ ...home, page })),
    ...APPS.map((_, appFocus) => ({ ...home, page: 'apps' as const, appFocus })),
    ...[...CHANNELS.map((c) => c.number), 7].flatMap((channel) => [true, false].map((banner) => ({ ...home, page: 'live' as const, channel, banner }))),
    { ...home, entry: '10' },
    { ...home, power: false },
  ];
}

/**
 * Where else on a screen a template's kind of element sits, as offsets from
 * its own region: the other menu items, the other app tiles. A template must
 * not nearly match a sibling (OpenCV searches the whole frame).
 */
function siblingOffsets(t: ExampleTemplate): [number, number][] {
  if (t.file.startsWith('menu-')) return HOME_ITEMS.map((_, i) => [0, (i - t.state.homeFocus) * MENU.step]);
  if (t.file.startsWith('app-')) {
    const [col, row] = [t.state.appFocus % APP_COLUMNS, Math.floor(t.state.appFocus / APP_COLUMNS)];
    return APPS.map((_, i) => [(i % APP_COLUMNS - col) * TILE.stepX, (Math.floor(i / APP_COLUMNS) - row) * TILE.stepY]);
  }
  return [[0, 0]];
}

const render = (t: ExampleTemplate) => renderFrame(viewOf(t.state), TEMPLATE_CLOCK, TEMPLATE_WIDTH, TEMPLATE_HEIGHT);

describe('virtual set-top box: the example test pack\'s templates', () => {
  it('every PNG in tests/images is listed in EXAMPLE_TEMPLATES and the other way round', async () => {
    const files = (await readdir(IMAGES)).filter((f) => f.endsWith('.png')).sort();
    expect(files).to.deep.equal(EXAMPLE_TEMPLATES.map((t) => t.file).sort());
  });

  for (const t of EXAMPLE_TEMPLATES) {
    it(`${t.file} is pixel-identical to its region of a fresh render`, async () => {
      const { data, info } = await sharp(await readFile(path.join(IMAGES, t.file))).raw().toBuffer({ resolveWithObject: true });
      expect([info.width, info.height, info.channels]).to.deep.equal([t.region.width, t.region.height, 3]);
      const fresh = cutRegion(await render(t), TEMPLATE_WIDTH, t.region);
      expect(data.equals(fresh), `${t.file} differs from the renderer: run scripts/make-example-templates.ts`).to.equal(true);
    });
  }

  it('on every screen, a template scores 1 where it is shown and below 0.9 where it is not (itself and its siblings\' places)', async () => {
    const views = allViews();
    const screens = await Promise.all(views.map((v) => renderFrame(v, TEMPLATE_CLOCK, TEMPLATE_WIDTH, TEMPLATE_HEIGHT)));
    for (const t of EXAMPLE_TEMPLATES) {
      const own = cutRegion(await render(t), TEMPLATE_WIDTH, t.region);
      let shownOn = 0;
      screens.forEach((screen, i) => {
        for (const [dx, dy] of siblingOffsets(t)) {
          const there = cutRegion(screen, TEMPLATE_WIDTH, { ...t.region, x: t.region.x + dx, y: t.region.y + dy });
          // The same pixels: that screen shows the very thing (the Apps title with another tile focused).
          if (there.equals(own)) {
            shownOn++;
            expect(ccoeffNormed(own, there)).to.be.closeTo(1, 1e-9);
            continue;
          }
          expect(ccoeffNormed(own, there), `${t.file} at +${dx},+${dy} on ${JSON.stringify(views[i])}`).to.be.below(0.9);
        }
      });
      expect(shownOn, `${t.file} is shown somewhere`).to.be.greaterThan(0);
    }
  });
});
