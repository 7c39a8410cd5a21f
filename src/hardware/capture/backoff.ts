/**
 * Restart delays for a supervised child: 0.5 s, doubling up to 30 s, and
 * back to 0.5 s once the child had run healthily for 10 s. Pure: the
 * caller says when the child became healthy and when it failed.
 *
 * The doubling is for a child that fails without delivering (no card, a
 * source with no signal): it must not spin. A child that delivered frames
 * for 10 s and then stalled is a new failure, not the next of a series:
 * with a minute there, a capture that stalled every half minute (a loaded
 * machine, a flaky source) climbed to 30 s offline after each stall, and a
 * pool's queued jobs waited that long for the node (docs/queue.md).
 */

export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  /** A child healthy for this long counts as recovered: the next delay is the initial one. */
  healthyResetMs: number;
}

export const CAPTURE_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 30_000, healthyResetMs: 10_000 };

export class Backoff {
  private next: number;

  constructor(private readonly o: BackoffOptions = CAPTURE_BACKOFF) {
    this.next = o.initialMs;
  }

  /**
   * The delay before the next restart, after a failure at `now` of a child
   * that had been healthy since `healthySince` (undefined if it never was).
   * Times are in ms on one clock.
   */
  failed(now: number, healthySince: number | undefined): number {
    if (healthySince !== undefined && now - healthySince >= this.o.healthyResetMs) this.next = this.o.initialMs;
    const delay = this.next;
    this.next = Math.min(this.next * 2, this.o.maxMs);
    return delay;
  }
}
