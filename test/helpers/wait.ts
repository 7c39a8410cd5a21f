/**
 * Waiting on a condition instead of sleeping: poll until a probe returns something truthy.
 * The timeout only turns a hang into a readable failure; it is no assertion about speed.
 */

export interface WaitOptions {
  /** What is awaited, for the failure message. */
  what?: string;
  /** Give up after this long (default 10 s, under mocha's 20 s so the message is ours). */
  timeoutMs?: number;
  /** Time before the second probe (default 20 ms); it doubles after each miss, up to `maxIntervalMs`. */
  intervalMs?: number;
  /**
   * Longest time between probes (default 250 ms). Probes over HTTP count against the daemon's rate
   * limit (20 requests a second per client): a slow condition on a loaded machine must not turn into
   * a flood of 429s, nor starve the requests the test makes next.
   */
  maxIntervalMs?: number;
}

/**
 * Resolve with the probe's first truthy value (so `await waitFor(() => readIfThere(f))` hands back
 * what was read). A probe that throws counts as "not yet"; its last error is in the failure message.
 */
export async function waitFor<T>(probe: () => T | Promise<T>, opts: WaitOptions | string = {}): Promise<NonNullable<T>> {
  const { what = 'condition', timeoutMs = 10_000, intervalMs = 20, maxIntervalMs = 250 } = typeof opts === 'string' ? { what: opts } : opts;
  let interval = Math.min(intervalMs, maxIntervalMs);
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    const why = last instanceof Error ? last.message : JSON.stringify(last);
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}${last ? ` (last error: ${why})` : ''}`);
    await new Promise((r) => setTimeout(r, interval));
    interval = Math.min(interval * 2, Math.max(intervalMs, maxIntervalMs));
  }
}

