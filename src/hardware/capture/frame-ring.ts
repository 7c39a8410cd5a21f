/**
 * The latest-frame store of a capture device: a ring of 3 preallocated
 * buffers of one raw rgb24 frame each. The stdout reader copies chunks into
 * the buffer being filled and publishes it when complete. There is no queue
 * and no allocation per frame: a slow reader only ever sees the newest frame.
 *
 * Why leases: with 3 slots and no rules, a published buffer is overwritten
 * once two more frames have been published, i.e. after 2 / preview_fps
 * seconds (33 ms at 60 fps). A PNG of a 1080p frame takes 8-32 ms on an idle
 * box and longer when the thread pool is busy, so an encoder could read a
 * half-overwritten frame. Instead a reader leases the slot it reads, and the
 * writer never starts a frame in a leased or published slot. One slot is
 * published, one is being written, so the third is free unless two readers
 * hold two different older frames; then the writer drops incoming frames
 * until a lease ends (readers only hold leases while encoding). Zero-copy
 * reads therefore go through `withLatest`; `latestCopy` serves callers that
 * keep the bytes for an unknown time.
 */

/** A raw frame: rgb24, `width * height * 3` bytes, row by row. */
export interface RawFrame {
  data: Buffer;
  width: number;
  height: number;
  /** Counts published frames from 1, across ffmpeg restarts. */
  seq: number;
  /** When the frame was complete, ms since the epoch. */
  at: number;
}

const SLOTS = 3;
/** `writing` for a frame not kept (keepOneIn); -1 is a frame dropped for want of a free slot. */
const SKIPPED = -2;

export class FrameRing {
  readonly frameBytes: number;
  private readonly slots: Buffer[];
  private readonly leases: number[] = new Array<number>(SLOTS).fill(0);
  /** Slot being filled; -1 while the current frame is dropped, SKIPPED while it is not kept. */
  private writing = 0;
  private filled = 0;
  private published: { slot: number; seq: number; at: number; mono: number } | undefined;
  private seq = 0;
  private dropped = 0;
  /** Frames completed since the last resetPartial (the ffmpeg run's frame index). */
  private index = 0;
  /**
   * Copy and publish only frame indexes divisible by this; the others are counted but never copied (no
   * live view watching: the checks and screenshots want `preview_fps`, ffmpeg sends `live_fps`).
   */
  keepOneIn = 1;

  constructor(
    readonly width: number,
    readonly height: number,
  ) {
    this.frameBytes = width * height * 3;
    this.slots = Array.from({ length: SLOTS }, () => Buffer.alloc(this.frameBytes));
  }

  /** Copy a chunk of the byte stream in; returns how many frames it completed. */
  push(chunk: Buffer): number {
    let offset = 0;
    let completed = 0;
    while (offset < chunk.length) {
      if (this.filled === 0) this.writing = this.index % this.keepOneIn === 0 ? this.freeSlot() : SKIPPED;
      const n = Math.min(this.frameBytes - this.filled, chunk.length - offset);
      if (this.writing >= 0) chunk.copy(this.slots[this.writing]!, this.filled, offset, offset + n);
      this.filled += n;
      offset += n;
      if (this.filled === this.frameBytes) {
        this.filled = 0;
        completed++;
        this.index++;
        if (this.writing >= 0) this.publish(this.writing);
        else if (this.writing !== SKIPPED) this.dropped++;
      }
    }
    return completed;
  }

  /** Forget a partly written frame: a new ffmpeg process starts on a frame boundary. */
  resetPartial(): void {
    this.filled = 0;
    this.index = 0;
  }

  /** Frames dropped because every slot was leased or published. */
  droppedFrames(): number {
    return this.dropped;
  }

  /** Monotonic time (performance.now) at which the latest frame was published. */
  latestMonotonic(): number | undefined {
    return this.published?.mono;
  }

  /**
   * Run `fn` on the latest frame without copying it; the slot cannot be
   * overwritten until the promise `fn` returns settles. `fn` must not keep
   * `frame.data` afterwards. Returns undefined when no frame was published.
   */
  async withLatest<T>(fn: (frame: RawFrame) => Promise<T>): Promise<T | undefined> {
    const p = this.published;
    if (p === undefined) return undefined;
    this.leases[p.slot]!++;
    try {
      return await fn(this.frameOf(p.slot, p.seq, p.at));
    } finally {
      this.leases[p.slot]!--;
    }
  }

  /**
   * The latest frame's bytes, lent for synchronous use only (the next push
   * may reuse them); undefined when none was published.
   */
  latestData(): Buffer | undefined {
    return this.published === undefined ? undefined : this.slots[this.published.slot];
  }

  /** A copy of the latest frame that the caller owns; undefined when none was published. */
  latestCopy(): RawFrame | undefined {
    const p = this.published;
    if (p === undefined) return undefined;
    // Synchronous: the writer runs on this thread, so the slot cannot change during the copy.
    return { ...this.frameOf(p.slot, p.seq, p.at), data: Buffer.from(this.slots[p.slot]!) };
  }

  private frameOf(slot: number, seq: number, at: number): RawFrame {
    return { data: this.slots[slot]!, width: this.width, height: this.height, seq, at };
  }

  private publish(slot: number): void {
    this.seq++;
    this.published = { slot, seq: this.seq, at: Date.now(), mono: performance.now() };
  }

  /** A slot that is neither published nor leased, or -1. */
  private freeSlot(): number {
    for (let i = 1; i <= SLOTS; i++) {
      // Start after the last slot written so slots rotate evenly.
      const s = (Math.max(this.writing, 0) + i) % SLOTS;
      if (s !== this.published?.slot && this.leases[s] === 0) return s;
    }
    return -1;
  }
}
