/**
 * Image files from raw frames: the lossless screenshot (PNG at compression
 * level 1: DESIGN.md measured 8-32 ms for 1080p, against 25-68 ms at the
 * default level 6) and the 320-wide JPEG thumbnail.
 */
import sharp, { type Sharp } from 'sharp';
import type { RawFrame } from './frame-ring.js';

/** Width of thumbnails in pixels; the height keeps the frame's aspect ratio. */
export const THUMBNAIL_WIDTH = 320;
const JPEG_QUALITY = 75;

function fromRaw(frame: RawFrame): Sharp {
  return sharp(frame.data, { raw: { width: frame.width, height: frame.height, channels: 3 } });
}

/** A lossless PNG of the frame. */
export function encodePng(frame: RawFrame): Promise<Buffer> {
  return fromRaw(frame).png({ compressionLevel: 1 }).toBuffer();
}

/** A JPEG of the frame scaled to 320 pixels wide. */
export function encodeThumbnail(frame: RawFrame): Promise<Buffer> {
  return fromRaw(frame).resize({ width: THUMBNAIL_WIDTH }).jpeg({ quality: JPEG_QUALITY }).toBuffer();
}
