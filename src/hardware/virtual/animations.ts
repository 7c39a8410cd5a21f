/**
 * Animations of the virtual set-top box, and its record of when the picture
 * really changed: the truth that transition timings are checked against.
 *
 * Off by default (`capture.virtual_animations`): then every frame is the
 * cache's picture, as before. On:
 *
 * - **channel-change black**: tuning (a channel step, digits, Live TV) shows
 *   a black picture for BLACK_MS before the channel;
 * - **menu slide**: opening a page from the main menu slides it in from the
 *   right over SLIDE_MS, over black;
 * - **spinner**: OK on an app tile shows a square going round the middle of
 *   the screen for SPINNER_MS (eight places a turn, one a frame interval).
 *
 * Every frame written also carries its number (the count of frames the box
 * has written) in 32 black or white 8x8 squares at the top left, inside the
 * top band of the screen where the clock is (TOP_BAND_DESIGN rows of the
 * 720-row design). The box records each frame whose picture below that band
 * differs from the frame before (its number and when it was written), and each
 * key it obeyed (with the number of the last frame written before it), so a
 * test can name the exact frame a change appeared in.
 */
import { DESIGN_HEIGHT } from './screens.js';
import type { StbState } from './state.js';

export const BLACK_MS = 400;
export const SLIDE_MS = 480;
export const SPINNER_MS = 800;
/** The top band (clock, frame numbers) in design rows: not part of "the picture" for the record. */
export const TOP_BAND_DESIGN = 90;
/** Squares of the frame number: size in pixels and how many (bits). */
export const MARK_SIZE = 8;
export const MARK_BITS = 32;
/** Records kept (the oldest go first). */
const MAX_RECORDS = 5000;

export type AnimationKind = 'black' | 'slide' | 'spinner';

export interface Animation {
  kind: AnimationKind;
  /** Wall-clock ms it starts at (when the key was obeyed) and its length. */
  start: number;
  length: number;
}

/** A frame whose picture (below the top band) differs from the one before. */
export interface PictureChange {
  /** The frame's number (as marked on it). */
  mark: number;
  /** Wall-clock ms it was written into the capture. */
  at: number;
}

/** A key the box obeyed. */
export interface KeyRecord {
  key: string;
  at: number;
  /** The number of the last frame written before it (the next frame is the first that can show it). */
  mark: number;
  animation?: AnimationKind;
}

export interface Truth {
  changes: PictureChange[];
  keys: KeyRecord[];
}

/** The animation a key starts, from the states before and after it (undefined: none). */
export function animationFor(before: StbState, after: StbState, key: string): AnimationKind | undefined {
  if (!after.power) return undefined;
  const tuned = after.page === 'live' && (before.page !== 'live' || before.channel !== after.channel);
  if (tuned) return 'black';
  if (before.page === 'home' && after.page !== 'home' && after.page !== 'live') return 'slide';
  if (key === 'KEY_OK' && before.page === 'apps' && after.page === 'apps' && before.entry === '') return 'spinner';
  return undefined;
}

const LENGTH: Record<AnimationKind, number> = { black: BLACK_MS, slide: SLIDE_MS, spinner: SPINNER_MS };

/** Draws animations and frame numbers onto the frames written, and keeps the record. */
export class Animator {
  private animation: Animation | undefined;
  private written = 0;
  private previous: Buffer | undefined;
  private readonly changes: PictureChange[] = [];
  private readonly keys: KeyRecord[] = [];
  private readonly band: number;
  private readonly row: number;

  constructor(
    private readonly width: number,
    private readonly height: number,
    private readonly now: () => number,
  ) {
    this.band = Math.min(height, Math.ceil((height * TOP_BAND_DESIGN) / DESIGN_HEIGHT));
    this.row = width * 3;
  }

  /** A key was obeyed: start its animation (if any) and record it. */
  keyObeyed(key: string, kind: AnimationKind | undefined): void {
    const at = this.now();
    if (kind) this.animation = { kind, start: at, length: LENGTH[kind] };
    push(this.keys, { key, at, mark: this.written, ...(kind && { animation: kind }) });
  }

  /** The bytes of the next frame written, made from the cache's picture `frame`; records a change. */
  frame(frame: Buffer): Buffer {
    const at = this.now();
    const out = this.picture(frame, at);
    this.written++;
    this.markNumber(out, this.written);
    const start = this.band * this.row;
    if (!this.previous || out.compare(this.previous, start, out.length, start, out.length) !== 0) {
      push(this.changes, { mark: this.written, at });
    }
    this.previous = out;
    return out;
  }

  truth(): Truth {
    return { changes: [...this.changes], keys: [...this.keys] };
  }

  private picture(frame: Buffer, at: number): Buffer {
    const out = Buffer.allocUnsafeSlow(frame.length);
    const a = this.animation;
    const elapsed = a ? at - a.start : Infinity;
    if (!a || elapsed >= a.length || elapsed < 0) {
      frame.copy(out);
      return out;
    }
    const bandBytes = this.band * this.row;
    if (a.kind === 'black') {
      frame.copy(out, 0, 0, bandBytes);
      out.fill(0, bandBytes);
    } else if (a.kind === 'slide') {
      frame.copy(out, 0, 0, bandBytes);
      out.fill(0, bandBytes);
      const offset = Math.max(1, Math.round(this.width * (1 - elapsed / a.length)));
      for (let y = this.band; y < this.height; y++) {
        const r = y * this.row;
        frame.copy(out, r + offset * 3, r, r + (this.width - offset) * 3);
      }
    } else {
      frame.copy(out);
      const step = Math.floor(elapsed / 40) % 8;
      const angle = (step * Math.PI) / 4;
      const size = Math.max(8, Math.round(this.height / 18));
      const cx = Math.round(this.width / 2 + Math.cos(angle) * size * 2);
      const cy = Math.round(this.height / 2 + Math.sin(angle) * size * 2);
      for (let y = Math.max(this.band, cy - size / 2); y < Math.min(this.height, cy + size / 2); y++) {
        const x0 = Math.max(0, cx - size / 2);
        const x1 = Math.min(this.width, cx + size / 2);
        out.fill(255, Math.floor(y) * this.row + Math.floor(x0) * 3, Math.floor(y) * this.row + Math.floor(x1) * 3);
      }
    }
    return out;
  }

  private markNumber(out: Buffer, n: number): void {
    const size = Math.min(MARK_SIZE, this.band);
    for (let bit = 0; bit < MARK_BITS; bit++) {
      const x0 = bit * MARK_SIZE;
      if (x0 + MARK_SIZE > this.width) break;
      const v = (n >>> bit) & 1 ? 255 : 0;
      for (let y = 0; y < size; y++) out.fill(v, y * this.row + x0 * 3, y * this.row + (x0 + MARK_SIZE) * 3);
    }
  }
}

function push<T>(list: T[], item: T): void {
  list.push(item);
  if (list.length > MAX_RECORDS) list.shift();
}
