/**
 * Turns a view of the virtual set-top box and a clock reading into a raw
 * rgb24 frame of the capture size: an SVG document rendered by sharp. The
 * design space is scaled to the frame (stretched when the aspect ratio
 * differs), so any configured capture size works.
 */
import { loadSharp } from '../sharp.js';
import { COLOURS, DESIGN_HEIGHT, DESIGN_WIDTH, screenBody } from './screens.js';
import type { StbView } from './state.js';

/** `HH:MM:SS` of a time in the box's (the host's) local time zone. */
export function clockText(ms: number): string {
  const d = new Date(ms);
  return [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => String(n).padStart(2, '0')).join(':');
}

/** The parts of a frame that can be drawn on their own: the page's body and the clock. */
export interface Layers {
  body: boolean;
  clock: boolean;
}

/**
 * The whole SVG document of one frame. Standby is a plain black screen.
 * `layers` leaves out the page's body or the clock (the frame cache renders
 * them apart and puts them together, frames.ts); by default both are drawn.
 */
export function screenSvg(view: StbView, clock: string, width: number, height: number, layers: Layers = { body: true, clock: true }): string {
  const open = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${DESIGN_WIDTH} ${DESIGN_HEIGHT}" preserveAspectRatio="none">`;
  if (!view.power) return `${open}<rect width="${DESIGN_WIDTH}" height="${DESIGN_HEIGHT}" fill="#000000"/></svg>`;
  const background = `<rect width="${DESIGN_WIDTH}" height="${DESIGN_HEIGHT}" fill="${COLOURS.background}"/>`;
  const clockSvg = `<text x="1240" y="60" font-family="DejaVu Sans Mono" font-size="32" fill="${COLOURS.text}" text-anchor="end">${clock}</text>`;
  return `${open}${background}${layers.body ? screenBody(view) : ''}${layers.clock ? clockSvg : ''}</svg>`;
}

/** One raw rgb24 frame (`width * height * 3` bytes, rows top to bottom). */
export async function renderFrame(view: StbView, clock: string, width: number, height: number, layers?: Layers): Promise<Buffer> {
  const svg = Buffer.from(screenSvg(view, clock, width, height, layers));
  const sharp = await loadSharp();
  const { data, info } = await sharp(svg).removeAlpha().raw().toBuffer({ resolveWithObject: true });
  if (info.width !== width || info.height !== height || info.channels !== 3) {
    // librsvg rounds sizes; never hand ffmpeg a frame of the wrong length.
    return sharp(data, { raw: { width: info.width, height: info.height, channels: info.channels } })
      .resize(width, height, { fit: 'fill' })
      .removeAlpha()
      .raw()
      .toBuffer();
  }
  return data;
}
