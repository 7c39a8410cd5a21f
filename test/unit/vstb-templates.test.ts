/**
 * The example test pack's template images against the virtual set-top box's
 * renderer: each committed PNG must be, pixel for pixel, the region of a
 * fresh render it was cut from (else the example tests would stop matching:
 * run scripts/make-example-templates.ts), and must not look like the same
 * region of the box's other screens (else a test could pass on the wrong
 * screen). The likeness measure is OpenCV's TM_CCOEFF_NORMED, the one the
 * Python test API matches with at threshold 0.9.
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
import { renderFrame, viewOf } from '../../src/hardware/virtual/index.js';
import { projectRoot } from '../../src/version.js';

const IMAGES = path.join(projectRoot, 'examples', 'test-pack', 'tests', 'images');

/** TM_CCOEFF_NORMED of two equally sized images (all channels together). */
function ccoeffNormed(a: Buffer, b: Buffer): number {
  const n = a.length;
  let ma = 0;
  let mb = 0;
  for (let i = 0; i < n; i++) {
    ma += a[i]!;
    mb += b[i]!;
  }
  ma /= n;
  mb /= n;
  let ab = 0;
  let aa = 0;
  let bb = 0;
  for (let i = 0; i < n; i++) {
    const da = a[i]! - ma;
    const db = b[i]! - mb;
    ab += da * db;
    aa += da * da;
    bb += db * db;
  }
  return aa === 0 || bb === 0 ? (aa === bb ? 1 : 0) : ab / Math.sqrt(aa * bb);
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

  it('a template scores below 0.9 on every other screen whose pixels there differ (no near-misses)', async () => {
    const screens = await Promise.all(EXAMPLE_TEMPLATES.map(render));
    for (const t of EXAMPLE_TEMPLATES) {
      const own = cutRegion(screens[EXAMPLE_TEMPLATES.indexOf(t)]!, TEMPLATE_WIDTH, t.region);
      EXAMPLE_TEMPLATES.forEach((other, j) => {
        const there = cutRegion(screens[j]!, TEMPLATE_WIDTH, t.region);
        // The same pixels: that screen shows the very thing (the Apps title with another tile focused).
        if (there.equals(own)) return;
        expect(ccoeffNormed(own, there), `${t.file} on the screen of ${other.file}`).to.be.below(0.9);
      });
    }
  });
});
