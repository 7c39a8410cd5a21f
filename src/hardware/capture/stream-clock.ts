/**
 * Maps the recording's stream time (seconds from ffmpeg's start, as the
 * segment list reports it) to Node's monotonic clock. The preview frames are
 * the ticks: preview frame n of an ffmpeg process shows stream time
 * n / preview_fps and reaches Node a few ms later, so the smallest
 * `arrival - n / preview_fps` over the last couple of seconds is the offset.
 * A recent window rather than all history: a `virtual:` feed that runs a
 * little slower than its nominal rate makes stream time drift behind.
 */

export class StreamClock {
  private frames = 0;
  private readonly offsets: number[] = [];
  private readonly window: number;

  constructor(private readonly previewFps: number) {
    this.window = Math.max(4, Math.round(previewFps * 2));
  }

  /** A new ffmpeg process: its stream time starts again at 0. */
  reset(): void {
    this.frames = 0;
    this.offsets.length = 0;
  }

  /** A preview frame arrived at `nowMs` (performance.now()). */
  frame(nowMs: number): void {
    this.offsets.push(nowMs - (this.frames * 1000) / this.previewFps);
    if (this.offsets.length > this.window) this.offsets.shift();
    this.frames++;
  }

  /** The monotonic time (ms) of a stream time in seconds; undefined before the first frame. */
  toMonotonic(streamSecs: number): number | undefined {
    if (this.offsets.length === 0) return undefined;
    return Math.min(...this.offsets) + streamSecs * 1000;
  }
}
