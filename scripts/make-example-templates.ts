/**
 * Regenerates the example test pack's files that come from the virtual
 * set-top box: its remote (`config/remote-control/vstb.lircd.conf`) and the
 * template images (`tests/images/*.png`), rendered by the box's own renderer
 * at 1280x720. Run it after changing the box's look or remote:
 *
 *   node --import tsx scripts/make-example-templates.ts
 *
 * test/unit/vstb-templates.test.ts fails until the committed files match.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import sharp from 'sharp';
import {
  cutRegion,
  EXAMPLE_TEMPLATES,
  TEMPLATE_CLOCK,
  TEMPLATE_HEIGHT,
  TEMPLATE_WIDTH,
} from '../src/hardware/virtual/example-templates.js';
import { renderFrame, viewOf, VSTB_LIRCD_CONF, VSTB_REMOTE_FILE } from '../src/hardware/virtual/index.js';

const pack = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'examples', 'test-pack');

async function main(): Promise<void> {
  await writeFile(path.join(pack, VSTB_REMOTE_FILE), VSTB_LIRCD_CONF);
  const images = path.join(pack, 'tests', 'images');
  await mkdir(images, { recursive: true });
  for (const t of EXAMPLE_TEMPLATES) {
    const frame = await renderFrame(viewOf(t.state), TEMPLATE_CLOCK, TEMPLATE_WIDTH, TEMPLATE_HEIGHT);
    const raw = cutRegion(frame, TEMPLATE_WIDTH, t.region);
    const png = await sharp(raw, { raw: { width: t.region.width, height: t.region.height, channels: 3 } })
      .png({ compressionLevel: 9 })
      .toBuffer();
    await writeFile(path.join(images, t.file), png);
    console.log(`${t.file}: ${t.region.width}x${t.region.height} at (${t.region.x}, ${t.region.y})`);
  }
}

await main();
