/**
 * Maps the recording's stream time (seconds from ffmpeg's start, as the
 * segment list reports it) to Node's monotonic clock. The preview frames are
 * the ticks: preview frame n of an ffmpeg process shows stream time
 * n / rate, and ffmpeg writes it as soon as the input frame that fills its
 * slot arrives (`-fps_mode cfr`, ffmpeg-args.ts). Under jitter the constant
 * rate repeats a frame one slot early and drops one later, so a frame can
 * reach Node up to one interval before its slot's time (two when the
 * preview is slower than the input: the constant rate takes a frame that
 * comes up to 1.1 slots early); that much is added so that mapped times are
 * a little late, never early. The offset is
 * the smallest `arrival - n / rate + hold` over the last couple of
 * seconds. Measured with `bench/stream-clock-error.ts` (a frame fed at a
 * known time first, 25 input frames a second): see docs/portal.md, "Live
 * view on the shipped configuration". A recent window rather than all
 * history: a `virtual:` feed that runs a little slower than its nominal rate
 * makes stream time drift behind.
 */

export class StreamClock {
  private frames = 0;
  private readonly offsets: number[] = [];
  private readonly window: number;
  private readonly holdMs: number;

  /** `inputFps`: the capture's rate; a preview slower than it picks frames up to two intervals early. */
  constructor(
    private readonly previewFps: number,
    inputFps = previewFps,
  ) {
    this.window = Math.max(4, Math.round(previewFps * 2));
    this.holdMs = (previewFps < inputFps ? -2000 : -1000) / previewFps;
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
