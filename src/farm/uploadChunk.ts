/**
 * One chunk of an upload being appended to its partial file (src/farm/uploads.ts, `append`): where it goes, how
 * much of it arrived, and the answer when it fails.
 */
import type { FileHandle } from 'node:fs/promises';
import { FarmError } from '../core/errors.js';

/** The partial file a chunk is appended to, and how much of the chunk it holds so far. */
export interface ChunkTarget {
  fh: FileHandle;
  node: string;
  partial: string;
  /** The file's size before the chunk. */
  have: number;
  /** The chunk's stated length (0: none). */
  declared: number;
  relPath: string;
  written: number;
}

/** The error a failed chunk answers with; the bytes that arrived whole are kept, so the node resumes after them. */
export async function chunkFault(e: unknown, t: ChunkTarget, resultId: string): Promise<unknown> {
  if (e instanceof FarmError) return e;
  await t.fh.truncate(t.have + t.written).catch(() => undefined);
  const code = (e as NodeJS.ErrnoException).code;
  if (code === 'ENOSPC') return new FarmError('storage_full', `the portal's storage is full (${t.relPath} of ${resultId})`);
  if (code === 'ECONNRESET' || (e as Error).message === 'aborted') {
    // The node went away mid-chunk: what arrived is kept, it resumes there (nobody reads this answer).
    return new FarmError('invalid_request', `the chunk was cut short; the portal keeps ${t.have + t.written} bytes: resume at that offset`);
  }
  return e;
}
