/**
 * The node's side of the portal connection, its reconnect back-off (docs/farm.md, "The node's connection").
 * A leaf: the rest of src/farm/link/ imports it, it imports only protocol.ts.
 */
import { RECONNECT_CAP_MS } from '../protocol.js';

export interface BackoffSettings {
  /** The first retry waits up to this long. */
  baseMs: number;
  /** No wait is longer. */
  capMs: number;
  /** A connection that lasts this long (after the welcome) resets the back-off. */
  stableMs: number;
}

export const DEFAULT_BACKOFF: BackoffSettings = { baseMs: 500, capMs: RECONNECT_CAP_MS, stableMs: 10_000 };

/**
 * "Full jitter" (AWS architecture blog, "Exponential Backoff And Jitter"): a uniform wait in
 * [0, min(cap, base * 2^attempt)). Spreads a lab full of nodes reconnecting after a portal restart.
 */
export function backoffDelay(attempt: number, b: Pick<BackoffSettings, 'baseMs' | 'capMs'>, random: () => number = Math.random): number {
  const ceiling = Math.min(b.capMs, b.baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(random() * ceiling);
}
