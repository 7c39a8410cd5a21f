/**
 * Image files from raw frames: the lossless screenshot (PNG at compression
 * level 1: DESIGN.md measured 8-32 ms for 1080p, against 25-68 ms at the
 * default level 6) and the 320-wide JPEG thumbnail.
 */
import type { Sharp } from 'sharp';
import { loadSharp } from '../sharp.js';
import type { RawFrame } from './frame-ring.js';

/** Width of thumbnails in pixels; the height keeps the frame's aspect ratio. */
export const THUMBNAIL_WIDTH = 320;
const JPEG_QUALITY = 75;

async function fromRaw(frame: RawFrame): Promise<Sharp> {
  const sharp = await loadSharp();
  return sharp(frame.data, { raw: { width: frame.width, height: frame.height, channels: 3 } });
}

/** A lossless PNG of the frame. */
export async function encodePng(frame: RawFrame): Promise<Buffer> {
  return (await fromRaw(frame)).png({ compressionLevel: 1 }).toBuffer();
}

/** A JPEG of the frame scaled to 320 pixels wide. */
export async function encodeThumbnail(frame: RawFrame): Promise<Buffer> {
  return (await fromRaw(frame)).resize({ width: THUMBNAIL_WIDTH }).jpeg({ quality: JPEG_QUALITY }).toBuffer();
}
