/**
 * Durable, atomic file writes: write a temporary file beside the target,
 * fsync it, rename it over the target, fsync the directory. A crash leaves
 * either the old file or the new one, never a torn one.
 */
import { open, rename, rm } from 'node:fs/promises';
import { openSync, writeSync, fsyncSync, closeSync, renameSync } from 'node:fs';
import path from 'node:path';

let counter = 0;
const tempName = (file: string) => `${file}.tmp-${process.pid}-${++counter}`;

export async function writeFileAtomic(file: string, data: string | Uint8Array): Promise<void> {
  const tmp = tempName(file);
  const fh = await open(tmp, 'w', 0o644);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } catch (e) {
    await fh.close();
    await rm(tmp, { force: true });
    throw e;
  }
  await fh.close();
  await rename(tmp, file);
  await fsyncDir(path.dirname(file));
}

/** The synchronous twin, for the few places that must not yield (state at shutdown). */
export function writeFileAtomicSync(file: string, data: string | Uint8Array): void {
  const tmp = tempName(file);
  const fd = openSync(tmp, 'w', 0o644);
  try {
    writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  const dfd = openSync(path.dirname(file), 'r');
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
}

export async function fsyncDir(dir: string): Promise<void> {
  const dh = await open(dir, 'r');
  try {
    await dh.sync();
  } finally {
    await dh.close();
  }
}
