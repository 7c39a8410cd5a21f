/**
 * Checks every transport applies to the trains it is given, so an encoder
 * bug shows up the same way on the virtual device as on real hardware.
 */
import { FarmError } from '../../../core/errors.js';
import type { IrTrain } from './types.js';

const okUs = (n: unknown): boolean => typeof n === 'number' && Number.isFinite(n) && n >= 0;

/** Throws `invalid_request` unless every duration and gap is a finite, non-negative number of microseconds. */
export function checkTrains(trains: readonly IrTrain[]): void {
  for (const t of trains) {
    if (!Array.isArray(t.durations) || !t.durations.every(okUs) || !okUs(t.gap)) {
      throw new FarmError('invalid_request', 'IR durations and gaps must be finite, non-negative microseconds');
    }
    if (t.frequency !== undefined && !(Number.isFinite(t.frequency) && t.frequency >= 0)) {
      throw new FarmError('invalid_request', `IR carrier frequency ${String(t.frequency)} is not a number of Hz`);
    }
  }
}

/** How long the trains take to emit, gaps included, in microseconds. */
export const totalUs = (trains: readonly IrTrain[]): number =>
  trains.reduce((sum, t) => sum + t.durations.reduce((a, b) => a + b, 0) + t.gap, 0);
