/** Await a promise that must reject, and hand back what it rejected with. */
import { isFarmError, type FarmError } from '../../src/core/errors.js';

/** The error a promise rejected with; fails the test when it resolves. */
export async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection');
}

/** The FarmError code a promise rejected with (a description when it was no FarmError); undefined when it resolved. */
export async function rejectionCode(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
  } catch (e) {
    return isFarmError(e) ? e.code : `not a FarmError: ${String(e)}`;
  }
  return undefined;
}

/** The FarmError a promise rejected with; fails the test when it resolves or rejects with anything else. */
export async function farmRejection(p: Promise<unknown>): Promise<FarmError> {
  const e = await rejection(p);
  if (isFarmError(e)) return e;
  throw e;
}
