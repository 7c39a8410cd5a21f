// Renders the virtual set-top box's screens for bench/stbt-ocr-bench.py's accuracy corpus:
// `npx tsx bench/virtual-menus.ts OUTDIR` writes OUTDIR/<n>.rgb (raw rgb24 1280x720, renderFrame's
// output) and OUTDIR/manifest.json: each frame's lines of text as drawn (text, x, y of the baseline,
// font size, fill colour, anchor), read from the frame's own SVG.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderFrame, screenSvg } from '../src/hardware/virtual/render.js';
import { APPS, CHANNELS, HOME_ITEMS, type Page, type StbView } from '../src/hardware/virtual/state.js';

const out = process.argv[2];
if (!out) throw new Error('usage: tsx bench/virtual-menus.ts OUTDIR');
mkdirSync(out, { recursive: true });
const base: StbView = { power: true, page: 'home', homeFocus: 0, appFocus: 0, channel: 101, entry: '', banner: false };
const views: StbView[] = [];
HOME_ITEMS.forEach((_item, i) => views.push({ ...base, homeFocus: i }));
for (const page of ['guide', 'recordings', 'settings'] as Page[]) views.push({ ...base, page });
APPS.forEach((_app, i) => views.push({ ...base, page: 'apps', appFocus: i }));
for (const c of CHANNELS) views.push({ ...base, page: 'live', channel: c.number, banner: true });
views.push({ ...base, page: 'live', entry: '10' });

const unescape = (s: string): string => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&amp;/g, '&');
const manifest = [];
for (const [n, view] of views.entries()) {
  const clock = '12:34:56';
  const svg = screenSvg(view, clock, 1280, 720);
  const lines = [...svg.matchAll(/<text ([^>]*)>([^<]*)<\/text>/g)].map((m) => {
    const [, attrs = '', content = ''] = m;
    const attr = (name: string): string | undefined => new RegExp(`(?:^| )${name}="([^"]*)"`).exec(attrs)?.[1];
    return {
      text: unescape(content), x: Number(attr('x')), y: Number(attr('y')), size: Number(attr('font-size')),
      fill: attr('fill'), anchor: attr('text-anchor') ?? 'start', opacity: attr('fill-opacity') ?? null,
      bold: attr('font-weight') === 'bold', mono: (attr('font-family') ?? '').includes('Mono'),
    };
  }).filter((l) => l.text.trim() !== '');
  writeFileSync(join(out, `${n}.rgb`), await renderFrame(view, clock, 1280, 720));
  manifest.push({ file: `${n}.rgb`, page: view.page, lines });
}
writeFileSync(join(out, 'manifest.json'), JSON.stringify(manifest, null, 1));
console.log(`${views.length} frames in ${out}`);
