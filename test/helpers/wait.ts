/**
 * Waiting on a condition instead of sleeping: poll until a probe returns something truthy.
 * The timeout only turns a hang into a readable failure; it is no assertion about speed.
 */

export interface WaitOptions {
  /** What is awaited, for the failure message. */
  what?: string;
  /** Give up after this long (default 10 s, under mocha's 20 s so the message is ours). */
  timeoutMs?: number;
  /** Time between probes (default 20 ms). */
  intervalMs?: number;
}

/**
 * Resolve with the probe's first truthy value (so `await waitFor(() => readIfThere(f))` hands back
 * what was read). A probe that throws counts as "not yet"; its last error is in the failure message.
 */
export async function waitFor<T>(probe: () => T | Promise<T>, opts: WaitOptions | string = {}): Promise<NonNullable<T>> {
  const { what = 'condition', timeoutMs = 10_000, intervalMs = 20 } = typeof opts === 'string' ? { what: opts } : opts;
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
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

