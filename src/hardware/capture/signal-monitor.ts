/**
 * No-signal detection on the preview frames: a black picture, or a picture
 * that has not changed for a while (frozen). Both are cheap on purpose: each
 * frame is reduced to a few thousand sampled pixels (12 KB at the default),
 * never compared in full, so the check costs microseconds per preview frame.
 * "Nothing at all" (no frames) is not decided here: the frame source's
 * stall watchdog already reports it, and it makes the node offline.
 *
 * Identical pixels cannot tell a frozen card from a menu that is simply
 * still, so "frozen" is only looked for where it can happen: a real capture
 * card (which may keep repeating its last frame when the signal goes), and
 * only after a long time. The virtual set-top box draws its own picture: a
 * still menu there is a normal picture, and a stuck box stops sending frames
 * (offline) rather than freezing. See docs/capture.md "No signal".
 */

/** `ok`; `black` or `frozen` (online, with a warning); `none` (no frames: offline). */
export type SignalState = 'ok' | 'black' | 'frozen' | 'none';

/** The picture's state and, unless `ok`, a sentence saying why. */
export interface SignalReport {
  signal: SignalState;
  reason: string | null;
}

export interface SignalOptions {
  /** A picture unchanged for this long is reported frozen; null: never. Default 300 s (see {@link signalOptionsFor}). */
  frozenSecs?: number | null;
  /** A picture black for this long is reported black. Default 2 s (a channel change is shorter). */
  blackSecs?: number;
  /** Pixels sampled per frame. Default 4096. */
  samples?: number;
}

/** Far longer than a test waits on an unchanged menu; a real card repeating its last frame stays so. */
export const DEFAULT_FROZEN_SECS = 300;
export const DEFAULT_BLACK_SECS = 2;
const DEFAULT_SAMPLES = 4096;
/** A sampled pixel with a luma at or below this (of 255) counts as black. */
const BLACK_LUMA = 32;
/** At least this share of the sampled pixels must be black (ffmpeg's blackdetect uses 0.98 too). */
const BLACK_SHARE = 0.98;
/**
 * Mean absolute difference (per sampled byte, of 255) below which two frames
 * count as the same picture: exact equality would miss a frozen picture that
 * a card's MJPEG or scaler adds a little noise to.
 */
const STILL_MEAN_DIFF = 1;

/**
 * The options for a capture URI: `virtual:` never reports frozen unless told
 * to (its still menu is a real picture); every other source as given.
 */
export function signalOptionsFor(uri: string, o: SignalOptions = {}): SignalOptions {
  return uri === 'virtual:' && o.frozenSecs === undefined ? { ...o, frozenSecs: null } : o;
}

export class SignalMonitor {
  private readonly frozenMs: number;
  private readonly blackMs: number;
  private readonly samples: number;
  private offsets: Uint32Array = new Uint32Array(0);
  private frameBytes = -1;
  private reference: Uint8Array = new Uint8Array(0);
  private hasReference = false;
  private stillSince: number | undefined;
  private blackSince: number | undefined;

  constructor(o: SignalOptions = {}) {
    this.frozenMs = o.frozenSecs === null ? Number.POSITIVE_INFINITY : (o.frozenSecs ?? DEFAULT_FROZEN_SECS) * 1000;
    this.blackMs = (o.blackSecs ?? DEFAULT_BLACK_SECS) * 1000;
    this.samples = o.samples ?? DEFAULT_SAMPLES;
  }

  /** Forget the history (a new ffmpeg process starts). */
  reset(): void {
    this.hasReference = false;
    this.stillSince = this.blackSince = undefined;
  }

  /** Look at one rgb24 frame that arrived at `nowMs` (any one clock, used consistently). */
  observe(data: Buffer, nowMs: number): void {
    if (data.length !== this.frameBytes) this.layout(data.length);
    const ref = this.reference;
    let dark = 0;
    let diff = 0;
    for (let i = 0, j = 0; i < this.offsets.length; i++, j += 3) {
      const o = this.offsets[i]!;
      const r = data[o]!;
      const g = data[o + 1]!;
      const b = data[o + 2]!;
      if ((r * 77 + g * 150 + b * 29) >> 8 <= BLACK_LUMA) dark++;
      diff += Math.abs(r - ref[j]!) + Math.abs(g - ref[j + 1]!) + Math.abs(b - ref[j + 2]!);
    }
    const black = dark >= this.offsets.length * BLACK_SHARE;
    this.blackSince = black ? (this.blackSince ?? nowMs) : undefined;
    const still = this.hasReference && diff <= STILL_MEAN_DIFF * ref.length;
    // The reference stays while the picture is still, so a slow drift adds up and ends "frozen".
    if (!still) this.takeReference(data, nowMs);
  }

  /** The state at `nowMs`; black wins over frozen (a black picture is also still). */
  report(nowMs: number): SignalReport {
    if (this.blackSince !== undefined && nowMs - this.blackSince >= this.blackMs) {
      return { signal: 'black', reason: 'no signal: the picture is black' };
    }
    if (this.stillSince !== undefined && nowMs - this.stillSince >= this.frozenMs) {
      const secs = Math.floor((nowMs - this.stillSince) / 1000);
      return { signal: 'frozen', reason: `no signal: the picture has been frozen for ${secs} s` };
    }
    return { signal: 'ok', reason: null };
  }

  /** Sample positions spread over the whole frame, jittered so they do not line up in columns. */
  private layout(bytes: number): void {
    const pixels = Math.floor(bytes / 3);
    const n = Math.min(this.samples, pixels);
    const step = pixels / n;
    this.offsets = new Uint32Array(n);
    for (let i = 0; i < n; i++) {
      const jitter = ((i * 2654435761) >>> 0) % Math.max(1, Math.floor(step));
      this.offsets[i] = Math.min(pixels - 1, Math.floor(i * step) + jitter) * 3;
    }
    this.frameBytes = bytes;
    this.reference = new Uint8Array(n * 3);
    this.reset();
  }

  private takeReference(data: Buffer, nowMs: number): void {
    for (let i = 0, j = 0; i < this.offsets.length; i++, j += 3) {
      const o = this.offsets[i]!;
      this.reference[j] = data[o]!;
      this.reference[j + 1] = data[o + 1]!;
      this.reference[j + 2] = data[o + 2]!;
    }
    this.hasReference = true;
    this.stillSince = nowMs;
  }
}
