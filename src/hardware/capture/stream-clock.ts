/**
 * Maps the recording's stream time (seconds from ffmpeg's start, as the
 * segment list reports it) to Node's monotonic clock. The preview frames are
 * the ticks: preview frame n of an ffmpeg process shows stream time
 * n / preview_fps and reaches Node one preview interval later (ffmpeg's fps
 * filter holds each output slot until a frame past it arrives: measured
 * 1/preview_fps plus 0-140 ms, at 2, 5 and 10 fps), so the smallest
 * `arrival - n / preview_fps - 1 / preview_fps` over the last couple of
 * seconds is the offset. What is left of the filter's hold makes mapped
 * times a little late, never early; the recorder's end margin absorbs it.
 * A recent window rather than all history: a `virtual:` feed that runs a
 * little slower than its nominal rate makes stream time drift behind.
 */

export class StreamClock {
  private frames = 0;
  private readonly offsets: number[] = [];
  private readonly window: number;
  private readonly holdMs: number;

  constructor(private readonly previewFps: number) {
    this.window = Math.max(4, Math.round(previewFps * 2));
    this.holdMs = 1000 / previewFps;
  }

  /** A new ffmpeg process: its stream time starts again at 0. */
  reset(): void {
    this.frames = 0;
    this.offsets.length = 0;
  }

  /** A preview frame arrived at `nowMs` (performance.now()). */
  frame(nowMs: number): void {
    this.offsets.push(nowMs - this.holdMs - (this.frames * 1000) / this.previewFps);
    if (this.offsets.length > this.window) this.offsets.shift();
    this.frames++;
  }

  /** The monotonic time (ms) of a stream time in seconds; undefined before the first frame. */
  toMonotonic(streamSecs: number): number | undefined {
    if (this.offsets.length === 0) return undefined;
    return Math.min(...this.offsets) + streamSecs * 1000;
  }
}
