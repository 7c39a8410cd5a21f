/**
 * What the transports that press keys by name over a control protocol (CEC,
 * Roku ECP, ADB) share: a timed hold that always lets the key up, a refused
 * `send(trains)`, and the options every one of them takes.
 */
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { heldUntil } from './async.js';
import type { HoldOptions } from './types.js';

export interface NamedKeyOptions {
  /** How long the device (or the helper program) may take to answer one request; default 5000 ms. */
  timeoutMs?: number;
  logger?: Logger;
}

export const DEFAULT_TIMEOUT_MS = 5000;

/** `send(trains)` on a transport that has no IR: refused, naming what it does instead. */
export function noTrains(uri: string): Promise<never> {
  return Promise.reject(
    new FarmError('device_unavailable', `${uri} presses keys by name over its protocol; it cannot send infrared pulse trains`),
  );
}

/**
 * Key down, wait for the release (the signal) or `maxMs`, key up. The key is
 * let up whatever ends the hold, also when `down` fails half-way. With
 * `rejectOnAbort` (a timed press, not a hold until released) an abort still
 * lets the key up, then rejects with the signal's reason.
 */
export async function holdFor(
  down: () => Promise<void>,
  up: () => Promise<void>,
  opts: HoldOptions & { rejectOnAbort?: boolean },
): Promise<void> {
  opts.signal?.throwIfAborted();
  try {
    await down();
    opts.onDown?.();
    await heldUntil(opts.maxMs, opts.signal);
  } finally {
    await up();
  }
  if (opts.rejectOnAbort) opts.signal?.throwIfAborted();
}

/** A hold's length: 0 (a tap) unless a finite positive number of ms. */
export const holdMsOf = (ms: number | undefined): number => (ms !== undefined && Number.isFinite(ms) && ms > 0 ? ms : 0);
