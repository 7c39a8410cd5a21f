/**
 * Durable, atomic file writes: write a temporary file beside the target
 * (`.<name>.<pid>.<hex>.tmp`), fsync it, rename it over the target, fsync the
 * directory. A reader, or a restart after power loss, sees the old content or
 * the new, never half.
 */
import { randomBytes } from 'node:crypto';
import { lstat, open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

const tempName = (file: string) => join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);

/**
 * Replace `file` with `data` (or chunks written in order) atomically and durably.
 * `keepMode`: the new file gets the permission bits of the file it replaces
 * (one an operator or the daemon closed to others stays closed, whatever the
 * umask of the process writing it, e.g. `farmhand token create`).
 */
export async function writeFileAtomic(file: string, data: string | Uint8Array | Iterable<string | Uint8Array>, opts: { keepMode?: boolean } = {}): Promise<void> {
  const tmp = tempName(file);
  const old = opts.keepMode ? await lstat(file).catch(() => undefined) : undefined;
  // 'wx': a fresh file, never something that already had the name (a FIFO would block the open).
  const fh = await open(tmp, 'wx', 0o644);
  try {
    if (old?.isFile()) await fh.chmod(old.mode & 0o777);
    const chunks = typeof data === 'string' || data instanceof Uint8Array ? [data] : data;
    for (const c of chunks) await (typeof c === 'string' ? fh.write(c) : fh.write(c));
    await fh.sync();
  } catch (e) {
    await fh.close();
    await rm(tmp, { force: true });
    throw e;
  }
  await fh.close();
  await rename(tmp, file);
  await syncDir(dirname(file));
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
