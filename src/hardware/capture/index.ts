/**
 * The capture adapters and the functions the composition root calls to
 * pick one from the `capture` section of the config.
 */
import type { FrameSource, Logger, VideoRecorder } from '../../core/ports.js';
import { FfmpegFrameSource, type FfmpegFrameSourceOptions } from './ffmpeg-frame-source.js';
import { NoneFrameSource } from './none-frame-source.js';

export { FfmpegFrameSource, type FfmpegFrameSourceOptions, type FrameFeed } from './ffmpeg-frame-source.js';
export { NoneFrameSource, NO_CAPTURE_REASON } from './none-frame-source.js';
export { Recorder, type RecorderOptions } from './recorder.js';
export type { Segment } from './segment-ring.js';
export { DEFAULT_BLACK_SECS, DEFAULT_FROZEN_SECS, type SignalOptions, type SignalReport, type SignalState } from './signal-monitor.js';
export type { RawFrame } from './frame-ring.js';
export { THUMBNAIL_WIDTH } from './encode.js';

/** The `capture` section of the config. */
export type CaptureConfig = Omit<FfmpegFrameSourceOptions, 'logger' | 'feed' | 'recording' | 'signal' | 'input' | 'overlay'>;

/** What the daemon wires in besides the config. */
export type CaptureExtras = Pick<FfmpegFrameSourceOptions, 'feed' | 'recording' | 'signal' | 'overlay'>;

/**
 * `none:` -> always offline; anything else -> one supervised ffmpeg. Does no
 * I/O. `virtual:` needs `extra.feed` (the virtual set-top box's frames).
 */
export function createFrameSource(capture: CaptureConfig, logger?: Logger, extra: CaptureExtras = {}): FrameSource {
  if (capture.uri === 'none:') return new NoneFrameSource();
  return new FfmpegFrameSource({ ...capture, ...extra, ...(logger && { logger }) });
}

/**
 * The frame source and, when `extra.recording` is given and the URI has an
 * ffmpeg (`none:` has none), the per-run video recorder fed by the same
 * ffmpeg: `createCapture(cfg.capture, log, { recording: { dir: <data_dir>/recording } })`.
 */
export function createCapture(
  capture: CaptureConfig,
  logger?: Logger,
  extra: CaptureExtras = {},
): { frames: FrameSource; video: VideoRecorder | undefined } {
  const frames = createFrameSource(capture, logger, extra);
  return { frames, video: frames instanceof FfmpegFrameSource ? frames.recorder() : undefined };
}
