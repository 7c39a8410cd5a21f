/**
 * The capture adapters and the one function the composition root calls to
 * pick one from the `capture` section of the config.
 */
import type { FrameSource, Logger } from '../../core/ports.js';
import { FfmpegFrameSource, type FfmpegFrameSourceOptions } from './ffmpeg-frame-source.js';
import { NoneFrameSource } from './none-frame-source.js';

export { FfmpegFrameSource, type FfmpegFrameSourceOptions, type FrameFeed } from './ffmpeg-frame-source.js';
export { NoneFrameSource, NO_CAPTURE_REASON } from './none-frame-source.js';
export type { RawFrame } from './frame-ring.js';
export { THUMBNAIL_WIDTH } from './encode.js';

/** The `capture` section of the config. */
export type CaptureConfig = Omit<FfmpegFrameSourceOptions, 'logger' | 'feed'>;

/**
 * `none:` -> always offline; anything else -> one supervised ffmpeg. Does no
 * I/O. `virtual:` needs `extra.feed` (the virtual set-top box's frames).
 */
export function createFrameSource(
  capture: CaptureConfig,
  logger?: Logger,
  extra: Pick<FfmpegFrameSourceOptions, 'feed'> = {},
): FrameSource {
  if (capture.uri === 'none:') return new NoneFrameSource();
  return new FfmpegFrameSource({ ...capture, ...extra, ...(logger && { logger }) });
}
