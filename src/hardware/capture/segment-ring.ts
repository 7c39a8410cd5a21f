/**
 * The bookkeeping of the continuous recording: which closed segments exist,
 * what stretch of (monotonic) time each one shows, which of them the open
 * clips still need, and which may go. Pure: the recorder does the file
 * system work with what this returns.
 */

/** One closed segment file of the recording. */
export interface Segment {
  /** Absolute path of the `.ts` file. */
  path: string;
  /** The ffmpeg process (run id) that wrote it. */
  run: string;
  /** Stream seconds it lasts, from the segment list. */
  duration: number;
  /** performance.now() of its first and last moment. */
  start: number;
  end: number;
  /** performance.now() when ffmpeg reported it closed (end + encoder and muxer latency). */
  closedAt: number;
}

export interface SegmentRingOptions {
  /** Segments are kept this long after their end (when no clip needs them). */
  keepMs: number;
  /** A clip open longer than this stops protecting its segments (a leaked clip must not fill the disk). */
  maxClipMs: number;
}

/** Segments a clip starting at t may need begin up to this much earlier (clock estimate error). */
const PIN_SLACK_MS = 2000;

export class SegmentRing {
  private readonly segs: Segment[] = [];
  private readonly pins = new Map<number, number>();
  private nextPin = 1;

  constructor(private readonly o: SegmentRingOptions) {}

  add(seg: Segment): void {
    this.segs.push(seg);
  }

  /** All segments, oldest first (a copy). */
  list(): Segment[] {
    return [...this.segs];
  }

  /** The latest end time of any segment, or -Infinity. */
  latestEnd(): number {
    return this.segs.at(-1)?.end ?? -Infinity;
  }

  /** Protect the segments from `fromMs` on until the returned function is called. */
  pin(fromMs: number): () => void {
    const id = this.nextPin++;
    this.pins.set(id, fromMs);
    return () => this.pins.delete(id);
  }

  /** The segments that show any moment of [fromMs, toMs), oldest first. */
  covering(fromMs: number, toMs: number): Segment[] {
    return this.segs.filter((s) => s.end > fromMs && s.start < toMs);
  }

  /** Remove and return the segments past the keep window that no live clip needs. */
  expire(nowMs: number): Segment[] {
    let limit = nowMs - this.o.keepMs;
    for (const from of this.pins.values()) {
      if (nowMs - from <= this.o.maxClipMs) limit = Math.min(limit, from - PIN_SLACK_MS);
    }
    let n = 0;
    while (n < this.segs.length && this.segs[n]!.end < limit) n++;
    return this.segs.splice(0, n);
  }

  /** Whether a file is one of the tracked segments. */
  has(path: string): boolean {
    return this.segs.some((s) => s.path === path);
  }
}
