/**
 * Frames of the virtual set-top box on their way into ffmpeg: a one-frame
 * cache that is re-rendered only when what the screen shows changes (the
 * state, or the clock's second), and a feeder that writes the cached frame
 * into ffmpeg's stdin at the capture frame rate without ever queueing more
 * than the frame in flight.
 */
import type { Writable } from 'node:stream';
import type { Logger } from '../../core/ports.js';
import { renderFrame } from './render.js';
import type { StbView } from './state.js';

/** What the screen should show now. */
export interface Scene {
  view: StbView;
  clock: string;
}

/** Counters for tests and the benchmark. */
export interface FrameStats {
  /** Frames rendered (each a new picture). */
  renders: number;
  /** Frames written to ffmpeg. */
  written: number;
  /** Ticks skipped because ffmpeg had not taken the previous frame yet, or no frame existed yet. */
  dropped: number;
}

/** The latest rendered frame; renders at most one at a time. */
export class FrameCache {
  private frame: Buffer | undefined;
  private frameKey: string | undefined;
  private rendering = false;
  private again = false;
  private stopped = false;
  readonly stats: FrameStats = { renders: 0, written: 0, dropped: 0 };

  constructor(
    private readonly width: number,
    private readonly height: number,
    private readonly scene: () => Scene,
    private readonly log: Logger,
  ) {}

  /** The last rendered frame (shared: callers must not modify it). */
  current(): Buffer | undefined {
    return this.frame;
  }

  /** Start rendering the scene if it differs from the cached frame. */
  refresh(): void {
    if (this.stopped) return;
    if (this.rendering) {
      this.again = true;
      return;
    }
    const { view, clock } = this.scene();
    const key = `${JSON.stringify(view)} ${clock}`;
    if (key === this.frameKey) return;
    this.rendering = true;
    renderFrame(view, clock, this.width, this.height)
      .then((frame) => {
        this.frame = frame;
        this.stats.renders++;
      })
      .catch((err: unknown) => this.log.error({ err }, 'virtual set-top box: rendering failed'))
      .finally(() => {
        // Remembered even after a failure, so a broken scene is not retried every frame.
        this.frameKey = key;
        this.rendering = false;
        if (this.again) {
          this.again = false;
          this.refresh();
        }
      });
  }

  /** Render nothing more. */
  stop(): void {
    this.stopped = true;
  }
}

/**
 * Write `cache`'s frame into `stdin` `fps` times a second until the returned
 * function is called. `beforeFrame` runs first on every tick (it refreshes
 * the cache). A tick whose predecessor is still in the pipe is skipped, so
 * at most one frame waits for ffmpeg; a late timer does not cause a burst.
 */
export function feedFrames(stdin: Writable, fps: number, cache: FrameCache, beforeFrame: () => void): () => void {
  const interval = 1000 / fps;
  let due = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const tick = (): void => {
    beforeFrame();
    const frame = cache.current();
    if (frame && stdin.writable && !stdin.writableNeedDrain) {
      stdin.write(frame);
      cache.stats.written++;
    } else {
      cache.stats.dropped++;
    }
    const now = performance.now();
    due = Math.max(due + interval, now);
    timer = setTimeout(tick, Math.max(0, due - now));
  };
  tick();
  return () => clearTimeout(timer);
}
