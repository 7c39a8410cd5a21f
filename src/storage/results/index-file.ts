/**
 * The append-only JSON-lines file behind the results index. Reads stream in
 * 1 MiB chunks (100,000 records never sit in memory as one string); appends
 * go through one handle and are fdatasync'ed, because on open the file is
 * trusted and the result folders are not rescanned.
 *
 * A crash in the middle of an append leaves a last line without its newline.
 * `load` reports it, cuts the file back to the last complete line (else the
 * next append would be glued onto it), and hands the torn text back so the
 * caller can recover the record from its folder.
 */
import { createHash } from 'node:crypto';
import { open, type FileHandle } from 'node:fs/promises';
import { writeFileAtomic } from '../atomic.js';
import type { Coverage } from './snapshot.js';

const CHUNK = 1024 * 1024;
const NL = 0x0a;

export class IndexFile {
  private handle: FileHandle | undefined;

  constructor(readonly path: string) {}

  /**
   * Call `onLine` for every complete non-empty line. Returns the number of
   * lines and the torn tail, if any; undefined when the file does not exist.
   * `from`: start at this byte (the end of a line: what a snapshot covers).
   */
  async load(onLine: (line: string) => void, from = 0): Promise<{ lines: number; torn: string | undefined } | undefined> {
    let fh: FileHandle;
    try {
      fh = await open(this.path, 'r+');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw e;
    }
    try {
      return await readLines(fh, onLine, from);
    } finally {
      await fh.close();
    }
  }

  /**
   * Append lines (each without its newline) and flush them to disk. A failed
   * write (disk full) is cut back off, so no half line stays in the middle.
   */
  async append(lines: string[]): Promise<void> {
    if (lines.length === 0) return;
    const h = (this.handle ??= await open(this.path, 'a', 0o644));
    const before = (await h.stat()).size;
    try {
      await h.write(lines.join('\n') + '\n');
      await h.datasync();
    } catch (e) {
      await h.truncate(before).catch(() => undefined);
      throw e;
    }
  }

  /** Replace the whole file atomically with `lines`. */
  async rewrite(lines: Iterable<string>): Promise<void> {
    await this.close();
    await writeFileAtomic(this.path, batches(lines));
  }

  /** What the file holds now, for a snapshot to cover (undefined when there is no file). */
  async coverage(): Promise<Coverage | undefined> {
    const fh = await open(this.path, 'r').catch((e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') return undefined;
      throw e;
    });
    if (!fh) return undefined;
    try {
      const st = await fh.stat();
      return { size: st.size, ino: st.ino, ...(await ends(fh, st.size)) };
    } finally {
      await fh.close();
    }
  }

  /**
   * Whether the file still holds, unchanged, what `c` covers: the same inode
   * (a compaction or rebuild replaces the file), at least that length, and
   * the same first and last 4 KiB below it.
   */
  async holds(c: Coverage): Promise<boolean> {
    const fh = await open(this.path, 'r').catch(() => undefined);
    if (!fh) return false;
    try {
      const st = await fh.stat();
      if (st.ino !== c.ino || st.size < c.size) return false;
      const e = await ends(fh, c.size);
      return e.head === c.head && e.tail === c.tail;
    } finally {
      await fh.close();
    }
  }

  async close(): Promise<void> {
    const h = this.handle;
    this.handle = undefined;
    await h?.close();
  }
}

async function readLines(fh: FileHandle, onLine: (line: string) => void, from: number): Promise<{ lines: number; torn: string | undefined }> {
  const buf = Buffer.allocUnsafe(CHUNK);
  let carry = Buffer.alloc(0);
  let offset = from;
  let lines = 0;
  for (;;) {
    const { bytesRead } = await fh.read(buf, 0, CHUNK, offset);
    if (bytesRead === 0) break;
    offset += bytesRead;
    const data = carry.length ? Buffer.concat([carry, buf.subarray(0, bytesRead)]) : buf.subarray(0, bytesRead);
    const end = data.lastIndexOf(NL);
    if (end < 0) {
      carry = Buffer.from(data);
      continue;
    }
    // Cutting at a newline byte never splits a UTF-8 sequence.
    for (const line of data.toString('utf8', 0, end).split('\n')) {
      if (line.length > 0) {
        lines++;
        onLine(line);
      }
    }
    carry = Buffer.from(data.subarray(end + 1));
  }
  if (carry.length === 0) return { lines, torn: undefined };
  await fh.truncate(offset - carry.length);
  await fh.sync();
  return { lines, torn: carry.toString('utf8') };
}

const EDGE = 4096;

/** sha256 of the first and the last 4 KiB of the file's first `size` bytes. */
async function ends(fh: FileHandle, size: number): Promise<{ head: string; tail: string }> {
  const hash = async (at: number, len: number): Promise<string> => {
    const b = Buffer.alloc(len);
    let got = 0;
    while (got < len) {
      const { bytesRead } = await fh.read(b, got, len - got, at + got);
      if (bytesRead === 0) break;
      got += bytesRead;
    }
    return createHash('sha256').update(b.subarray(0, got)).digest('hex');
  };
  const n = Math.min(EDGE, size);
  return { head: await hash(0, n), tail: await hash(size - n, n) };
}

/** Join lines into ~1 MiB strings so a rewrite makes few writes and no giant string. */
function* batches(lines: Iterable<string>): Generator<string> {
  let out = '';
  for (const l of lines) {
    out += l + '\n';
    if (out.length > 1 << 20) {
      yield out;
      out = '';
    }
  }
  if (out) yield out;
}
