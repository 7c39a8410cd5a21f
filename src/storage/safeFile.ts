/**
 * Opening files that a test script could have replaced. A test runs with its
 * result folder as working directory (and knows where its report goes), so
 * any name there may have become a FIFO, a symlink or a device by the time
 * the daemon opens it. A blocking open of a FIFO ties up one of libuv's few
 * threads for ever; enough of them and nothing in the daemon does I/O any
 * more. So these opens never follow a symlink, never block (O_NONBLOCK), and
 * accept only a regular file, checked on the open descriptor (fstat), with a
 * cap on what is read. Writes go through `writeFileAtomic` instead: a new
 * temporary file and a rename, which replaces whatever had the name without
 * opening it.
 */
import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { lstat, open, rename, rm, type FileHandle } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

/** What a caller sees when the name is not a regular file (any more). */
export class NotRegularFileError extends Error {
  readonly code = 'ENOTREG';
  constructor(file: string) {
    super(`${file} is not a regular file`);
  }
}

/**
 * What a caller sees when the file has more than one name (a hard link): a test
 * can give any file its user can read a second name in its result folder (the
 * node's credential, another result's files, a token store), and serving that
 * name would serve the file. A file farmhand or a test writes there has one name.
 */
export class LinkedFileError extends Error {
  readonly code = 'EMLINK';
  constructor(file: string, links: number) {
    super(`${file} has ${links} names (a hard link); only a file with one name is served`);
  }
}

/**
 * Open a regular file for reading; rejects (ELOOP, ENOTREG ...) for anything
 * else, and (EMLINK) for a file with more than one name unless `anyLinks`
 * (files farmhand reads for itself, not to hand out: a report, a record).
 */
export async function openRegular(file: string, o: { anyLinks?: boolean } = {}): Promise<FileHandle> {
  const fh = await open(file, READ_FLAGS);
  try {
    const st = await fh.stat();
    if (!st.isFile()) throw new NotRegularFileError(file);
    if (!o.anyLinks && st.nlink > 1) throw new LinkedFileError(file, st.nlink);
  } catch (e) {
    await fh.close();
    throw e;
  }
  return fh;
}

/** The text of a regular file of at most `maxBytes`; rejects for anything else or anything larger. */
export async function readRegular(file: string, maxBytes: number): Promise<string> {
  const fh = await openRegular(file, { anyLinks: true });
  try {
    const { size } = await fh.stat();
    if (size > maxBytes) throw Object.assign(new Error(`${file} is larger than ${maxBytes} bytes`), { code: 'EFBIG' });
    const buf = Buffer.alloc(size);
    let got = 0;
    while (got < size) {
      const { bytesRead } = await fh.read(buf, got, size - got, got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return buf.subarray(0, got).toString('utf8');
  } finally {
    await fh.close();
  }
}

/** `readRegular` for start-up code that reads synchronously; never blocks on a FIFO either. */
export function readRegularSync(file: string, maxBytes: number): string {
  const fd = openSync(file, READ_FLAGS);
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) throw new NotRegularFileError(file);
    if (st.size > maxBytes) throw Object.assign(new Error(`${file} is larger than ${maxBytes} bytes`), { code: 'EFBIG' });
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < st.size) {
      const n = readSync(fd, buf, got, st.size - got, got);
      if (n === 0) break;
      got += n;
    }
    return buf.subarray(0, got).toString('utf8');
  } finally {
    closeSync(fd);
  }
}

/**
 * A new regular file for writing (created or truncated), refusing a symlink
 * and never blocking on a FIFO; returns the descriptor, open for reading too
 * (see `restoreName`). For files written as a stream (the run logs), which
 * cannot go through a rename.
 */
export function openForWriteSync(file: string): number {
  const fd = openSync(file, constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644);
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    throw new NotRegularFileError(file);
  }
  return fd;
}

/**
 * Make `file` name the content of `fd` again when something else took the
 * name since it was opened (a test that deleted its log, or put a FIFO in its
 * place): the content is copied to a new temporary file renamed over the
 * name. Resolves true when it had to.
 */
export async function restoreName(fd: number, file: string): Promise<boolean> {
  const mine = fstatSync(fd);
  const now = await lstat(file).catch(() => undefined);
  if (now && now.ino === mine.ino && now.dev === mine.dev) return false;
  const tmp = join(dirname(file), `.${basename(file)}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
  const out = await open(tmp, 'wx', 0o644);
  try {
    const buf = Buffer.allocUnsafe(1 << 20);
    for (let pos = 0; ; ) {
      const n = readSync(fd, buf, 0, buf.length, pos);
      if (n === 0) break;
      await out.write(buf, 0, n);
      pos += n;
    }
  } catch (e) {
    await out.close();
    await rm(tmp, { force: true });
    throw e;
  }
  await out.close();
  await rename(tmp, file);
  return true;
}
