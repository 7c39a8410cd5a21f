/**
 * Maps the recording's stream time (seconds from ffmpeg's start, as the
 * segment list reports it) to Node's monotonic clock. The preview frames are
 * the ticks: preview frame n of an ffmpeg process shows stream time
 * n / preview_fps and reaches Node once ffmpeg's fps filter lets it go: the
 * filter (rounding to the nearest slot) holds output slot n until an input
 * frame past the slot's middle arrives, so at least half a preview interval
 * after n / preview_fps. So the smallest
 * `arrival - n / preview_fps - 1 / (2 preview_fps)` over the last couple of
 * seconds is the offset: mapped times are a little late (by the input frame
 * that passed the middle, and ffmpeg's own time), never early. Measured with
 * the preview's `-threads 1` (ffmpeg-args.ts), a frame fed at a known time
 * first: 2-21 ms late at 2, 5, 10 and 25 preview frames a second (25 input);
 * the recorder's end margin absorbs it. A recent window rather than all
 * history: a `virtual:` feed that runs a little slower than its nominal rate
 * makes stream time drift behind.
 */

export class StreamClock {
  private frames = 0;
  private readonly offsets: number[] = [];
  private readonly window: number;
  private readonly holdMs: number;

  constructor(private readonly previewFps: number) {
    this.window = Math.max(4, Math.round(previewFps * 2));
    this.holdMs = 500 / previewFps;
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
