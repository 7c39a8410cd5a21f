/**
 * Frames of the virtual set-top box on their way into ffmpeg: a cache that
 * makes a new picture only when what the screen shows changes (the state, or
 * the clock's second), and a feeder that writes the cached frame into
 * ffmpeg's stdin at the capture frame rate without ever queueing more than
 * the frame in flight.
 *
 * A key press must not wait for an SVG render (librsvg at 720p: 30 ms idle,
 * up to 800 ms on a loaded machine; docs/portal.md, "Where the time went").
 * So the page's body (everything but the clock) and the clock are rendered
 * apart, each over the plain background, and put together by copying the
 * clock's rectangle into the body: the same bytes as one render of both,
 * because the two never draw on the same pixels (checked for every picture;
 * when they would, the whole frame is rendered as one). Bodies are kept per
 * view (a few recent ones), so going back to a screen seen before costs a
 * copy, not a render, and a clock render under way never holds up a press.
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
  /** New pictures made (each a new frame: rendered, or put together from kept layers). */
  renders: number;
  /** SVG renders (bodies, clocks, the background, whole frames). */
  svgRenders: number;
  /** Frames written to ffmpeg. */
  written: number;
  /** Ticks skipped because ffmpeg had not taken the previous frame yet, or no frame existed yet. */
  dropped: number;
  /** Ticks not written because the picture had not changed and the still rate's interval had not passed. */
  still: number;
}

/** A rectangle of pixels, `x1`/`y1` exclusive. */
export interface PixelBox {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
}

/** Bytes of rendered bodies kept (a 720p frame is 2.7 MB). */
const BODY_CACHE_BYTES = 32 * 1024 * 1024;
/** Pixels around the clock's drawn pixels that must be background in the body too. */
const CLOCK_MARGIN = 2;

/**
 * The smallest rectangle holding every pixel where `layer` differs from
 * `backdrop`, grown by CLOCK_MARGIN; undefined when they are equal.
 */
export function changedBox(layer: Buffer, backdrop: Buffer, width: number, height: number): PixelBox | undefined {
  const row = width * 3;
  let y0 = -1;
  let y1 = -1;
  let x0 = width;
  let x1 = -1;
  for (let y = 0; y < height; y++) {
    const start = y * row;
    if (layer.compare(backdrop, start, start + row, start, start + row) === 0) continue;
    if (y0 < 0) y0 = y;
    y1 = y;
    for (let x = 0; x < width; x++) {
      const i = start + x * 3;
      if (layer[i] !== backdrop[i] || layer[i + 1] !== backdrop[i + 1] || layer[i + 2] !== backdrop[i + 2]) {
        if (x < x0) x0 = x;
        if (x > x1) x1 = x;
      }
    }
  }
  if (y0 < 0) return undefined;
  const m = CLOCK_MARGIN;
  return { x0: Math.max(0, x0 - m), y0: Math.max(0, y0 - m), x1: Math.min(width, x1 + 1 + m), y1: Math.min(height, y1 + 1 + m) };
}

/**
 * `body` with `box` copied from `layer` (both rendered over `backdrop`), or
 * undefined when the body draws inside the box (the two layers would
 * overlap, so copying would not give the picture of one render).
 */
export function composeFrame(body: Buffer, layer: Buffer, backdrop: Buffer, box: PixelBox | undefined, width: number): Buffer | undefined {
  const row = width * 3;
  if (box) {
    for (let y = box.y0; y < box.y1; y++) {
      const a = y * row + box.x0 * 3;
      const b = y * row + box.x1 * 3;
      if (body.compare(backdrop, a, b, a, b) !== 0) return undefined;
    }
  }
  const out = Buffer.allocUnsafeSlow(body.length);
  body.copy(out);
  if (box) {
    for (let y = box.y0; y < box.y1; y++) layer.copy(out, y * row + box.x0 * 3, y * row + box.x0 * 3, y * row + box.x1 * 3);
  }
  return out;
}

interface ClockLayer {
  clock: string;
  frame: Buffer;
  box: PixelBox | undefined;
}

/** The latest frame; makes a new one when the scene changes, at most one render of each kind at a time. */
export class FrameCache {
  private frame: Buffer | undefined;
  private frameKey: string | undefined;
  private readonly listeners = new Set<() => void>();
  /** Rendered bodies by view (JSON), least recently used first. */
  private readonly bodies = new Map<string, Buffer>();
  private readonly maxBodies: number;
  private backdrop: Buffer | undefined;
  private clockLayer: ClockLayer | undefined;
  /** Renders under way, by job name (`body <view>`, `clock <text>`, `backdrop`, `whole <view> <clock>`). */
  private readonly running = new Set<string>();
  /** Jobs that failed, not tried again (a broken scene is not retried every frame). */
  private readonly failed = new Set<string>();
  private stopped = false;
  readonly stats: FrameStats = { renders: 0, svgRenders: 0, written: 0, dropped: 0, still: 0 };

  constructor(
    private readonly width: number,
    private readonly height: number,
    private readonly scene: () => Scene,
    private readonly log: Logger,
  ) {
    this.maxBodies = Math.max(2, Math.floor(BODY_CACHE_BYTES / (width * height * 3)));
  }

  /** The last frame (shared: callers must not modify it). */
  current(): Buffer | undefined {
    return this.frame;
  }

  /** Call `listener` (synchronously) whenever a new frame is ready; returns the unsubscribe. */
  onFrame(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Make the scene's frame if it differs from the cached one: at once from kept layers, else once they are rendered. */
  refresh(): void {
    if (this.stopped) return;
    const { view, clock } = this.scene();
    const viewKey = JSON.stringify(view);
    if (`${viewKey} ${clock}` === this.frameKey) return;
    if (!view.power) {
      // Standby: a black screen without a clock, kept like a body.
      const black = this.body(viewKey, view);
      if (black) this.publish(black, `${viewKey} ${clock}`);
      return;
    }
    const backdrop = this.backdrop ?? this.render('backdrop', view, '', { body: false, clock: false }, (f) => (this.backdrop = f));
    if (this.clockLayer?.clock !== clock) this.renderClock(view, clock);
    const body = this.body(viewKey, view);
    const layer = this.clockLayer;
    if (!backdrop || !body || !layer) {
      // The very first picture does not wait for three renders (ffmpeg is waiting for it): one whole render, as before.
      if (this.frame === undefined) this.render(`whole ${viewKey} ${clock}`, view, clock, { body: true, clock: true }, (f) => this.frame === undefined && this.publish(f, `${viewKey} ${clock}`));
      return;
    }
    // Until the current second's clock is rendered, the body goes out with the last one rendered.
    const key = `${viewKey} ${layer.clock}`;
    if (key === this.frameKey) return;
    const whole = `whole ${key}`;
    const frame = composeFrame(body, layer.frame, backdrop, layer.box, this.width);
    if (frame) this.publish(frame, key);
    else this.render(whole, view, layer.clock, { body: true, clock: true }, (f) => this.publish(f, key));
  }

  /** Render nothing more. */
  stop(): void {
    this.stopped = true;
    this.listeners.clear();
  }

  private publish(frame: Buffer, key: string): void {
    this.frame = frame;
    this.frameKey = key;
    this.stats.renders++;
    for (const l of [...this.listeners]) l();
  }

  /** The kept body of a view (now the most recently used), or undefined while it is rendered. */
  private body(viewKey: string, view: StbView): Buffer | undefined {
    const kept = this.bodies.get(viewKey);
    if (kept) {
      this.bodies.delete(viewKey);
      this.bodies.set(viewKey, kept);
      return kept;
    }
    // One body at a time: a newer view waits for the render under way, then refresh() asks again.
    if ([...this.running].some((j) => j.startsWith('body '))) return undefined;
    this.render(`body ${viewKey}`, view, '', { body: true, clock: false }, (f) => {
      this.bodies.set(viewKey, f);
      while (this.bodies.size > this.maxBodies) this.bodies.delete(this.bodies.keys().next().value as string);
    });
    return undefined;
  }

  private renderClock(view: StbView, clock: string): void {
    if ([...this.running].some((j) => j.startsWith('clock '))) return;
    this.render(`clock ${clock}`, view, clock, { body: false, clock: true }, (f) => {
      // The backdrop is rendered first (the clock's render waits for it below), so it is there.
      const box = this.backdrop ? changedBox(f, this.backdrop, this.width, this.height) : undefined;
      this.clockLayer = { clock, frame: f, box };
    });
  }

  /** Start a render job unless one of that name runs or failed; calls refresh() when it ends. */
  private render(job: string, view: StbView, clock: string, layers: { body: boolean; clock: boolean }, done: (frame: Buffer) => void): undefined {
    if (this.running.has(job) || this.failed.has(job)) return undefined;
    if (job.startsWith('clock ') && !this.backdrop) return undefined;
    this.running.add(job);
    renderFrame(view, clock, this.width, this.height, layers)
      .then((frame) => {
        this.stats.svgRenders++;
        if (!this.stopped) done(frame);
      })
      .catch((err: unknown) => {
        if (this.failed.size > 100) this.failed.clear();
        this.failed.add(job);
        this.log.error({ err }, 'virtual set-top box: rendering failed');
      })
      .finally(() => {
        this.running.delete(job);
        this.refresh();
      });
    return undefined;
  }
}

/**
 * Write `cache`'s frame into `stdin` `fps` times a second until the returned
 * function is called. `beforeFrame` runs first on every tick (it refreshes
 * the cache). A tick whose predecessor is still in the pipe is skipped, so
 * at most one frame waits for ffmpeg; a late timer does not cause a burst.
 *
 * A new picture (a key press) does not wait for the next tick: it is written
 * at once if the last write is at least half an interval old, else when it
 * becomes so, and the ticks go on one interval after it. Half an interval,
 * not a whole one: ffmpeg stamps raw frames with the wall clock on arrival
 * (`-use_wallclock_as_timestamps`) and its rate limit (`-r`, the fps filter,
 * the recording's constant rate) moves or drops a frame that comes early, so
 * the rate stays the same; the picture is only never held back by a tick.
 * `decorate`, when given, makes the bytes written from the cache's frame
 * (the animations and frame numbers of animations.ts).
 *
 * `stillFps` (at most `fps`): while the picture does not change, a frame is
 * written only this often; the ticks go on at `fps` (so a new clock second or
 * picture goes out within a tick) but skip the write. ffmpeg repeats the
 * last frame on its constant-rate outputs (the recording, the preview while
 * recording), so the video is the same; the box's pipe and ffmpeg's input
 * carry a fifth of the bytes at 5 of 25 (docs/virtual-stb.md, "Frames").
 * With `decorate` every frame is new (its number): always `fps`.
 */
export function feedFrames(
  stdin: Writable,
  fps: number,
  cache: FrameCache,
  beforeFrame: () => void,
  decorate?: (frame: Buffer) => Buffer,
  stillFps = fps,
): () => void {
  const interval = 1000 / fps;
  // Half a tick of slack: a tick a little early still writes, so the still frames keep to about `stillFps`.
  const stillGap = decorate ? 0 : 1000 / Math.min(fps, stillFps) - interval / 2;
  let due = performance.now();
  let lastWrite = -Infinity;
  let lastFrame: Buffer | undefined;
  let timer: NodeJS.Timeout | undefined;
  let stopped = false;
  let ticking = false;
  let awaitingDrain = false;
  const write = (): void => {
    const frame = cache.current();
    if (frame !== undefined && frame === lastFrame && performance.now() - lastWrite < stillGap) {
      cache.stats.still++;
      return;
    }
    if (frame && stdin.writable && !stdin.writableNeedDrain) {
      stdin.write(decorate ? decorate(frame) : frame);
      cache.stats.written++;
      lastWrite = performance.now();
      lastFrame = frame;
    } else {
      cache.stats.dropped++;
    }
  };
  const schedule = (at: number): void => {
    clearTimeout(timer);
    due = at;
    if (!stopped) timer = setTimeout(tick, Math.max(0, at - performance.now()));
  };
  const tick = (): void => {
    ticking = true;
    try {
      beforeFrame();
    } finally {
      ticking = false;
    }
    write();
    const now = performance.now();
    schedule(Math.max(due + interval, now));
  };
  /** A new picture: write it now if the rate allows and the pipe has room, else as soon as it does. */
  const push = (): void => {
    // A picture made inside a tick is written by that tick.
    if (stopped || ticking || !stdin.writable || cache.current() === lastFrame) return;
    const now = performance.now();
    const soonest = lastWrite + interval / 2;
    if (now < soonest) {
      // The tick after the early write stays one interval after it.
      if (soonest < due) schedule(soonest);
      return;
    }
    if (stdin.writableNeedDrain) {
      if (!awaitingDrain) {
        awaitingDrain = true;
        stdin.once('drain', onDrain);
      }
      return;
    }
    write();
    schedule(now + interval);
  };
  const onDrain = (): void => {
    awaitingDrain = false;
    push();
  };
  const unsubscribe = cache.onFrame(push);
  tick();
  return () => {
    stopped = true;
    unsubscribe();
    stdin.off('drain', onDrain);
    clearTimeout(timer);
  };
}
