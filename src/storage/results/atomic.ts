/**
 * Crash-safe file replacement: write a temporary file beside the target,
 * fsync it, rename it over the target, fsync the folder. A reader (or a
 * restart after power loss) sees the old content or the new, never half.
 */
import { randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** Replace `path` with `chunks` (written in order) atomically; the temporary file is `.<name>.<pid>.<hex>.tmp`. */
export async function writeFileAtomic(path: string, chunks: Iterable<string | Buffer>): Promise<void> {
  const tmp = join(dirname(path), `.${basename(path)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const fh = await open(tmp, 'w', 0o644);
  try {
    for (const c of chunks) await (typeof c === 'string' ? fh.write(c) : fh.write(c));
    await fh.sync();
  } catch (e) {
    await fh.close();
    await rm(tmp, { force: true });
    throw e;
  }
  await fh.close();
  await rename(tmp, path);
  await syncDir(dirname(path));
}

/** fsync a folder so a rename or a new entry in it survives power loss. */
export async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}
