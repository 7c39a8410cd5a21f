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
 * a little late, never early. Measured with `bench/stream-clock-error.ts` (a
 * frame fed at a known time first, 25 input frames a second): see
 * docs/portal.md, "Live view on the shipped configuration".
 *
 * The offset is the smallest `arrival - n / rate + hold` since the ffmpeg
 * process started, not over a recent window. Stream time follows real time
 * (a V4L2 card's kernel timestamps, `virtual:` frames stamped by the wall
 * clock when ffmpeg reads them, `-re` for files and lavfi), so a frame can
 * only ever arrive late, and the least late one is the best estimate. A
 * window made every mapped time late by however far the preview had fallen
 * behind: a consumer too slow for the raw preview (a busy Node reading 25
 * 720p frames a second) holds ffmpeg back, each preview frame reaches Node
 * later after the moment it shows, and a run's end was mapped seconds late,
 * so its video was cut seconds short (issue 20; docs/portal.md, "The short
 * video").
 */

export class StreamClock {
  private frames = 0;
  private offset = Infinity;
  private readonly holdMs: number;

  /** `inputFps`: the capture's rate; a preview slower than it picks frames up to two intervals early. */
  constructor(
    private readonly previewFps: number,
    inputFps = previewFps,
  ) {
    this.holdMs = (previewFps < inputFps ? -2000 : -1000) / previewFps;
  }

  /** A new ffmpeg process: its stream time starts again at 0. */
  reset(): void {
    this.frames = 0;
    this.offset = Infinity;
  }

  /** A preview frame arrived at `nowMs` (performance.now()). */
  frame(nowMs: number): void {
    this.offset = Math.min(this.offset, nowMs - this.holdMs - (this.frames * 1000) / this.previewFps);
    this.frames++;
  }

  /** The monotonic time (ms) of a stream time in seconds; undefined before the first frame. */
  toMonotonic(streamSecs: number): number | undefined {
    return this.frames === 0 ? undefined : this.offset + streamSecs * 1000;
  }

  /**
   * The monotonic time (ms) of the moment the latest preview frame shows: how far ffmpeg's output has got.
   * Behind the present by however far ffmpeg (or its reader) has fallen behind. Undefined before the first frame.
   */
  position(): number | undefined {
    return this.toMonotonic((this.frames - 1) / this.previewFps);
  }
}
