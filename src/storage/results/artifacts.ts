/**
 * The artifacts of a result folder: listing with size and md5 (clients
 * compare both before downloading again), and safe opening of one file by a
 * relative path from a request.
 *
 * Safety: a relative path is checked by shape first (no `..`, `.`, empty
 * segment, leading `/`, backslash or NUL), then its realpath must lie inside
 * the realpath of the folder and be a regular file. A symlink is listed or
 * served only when it resolves to a regular file inside the folder; symlinked
 * folders are never entered. `result.json` (the store's own metadata) and
 * the store's temporary files are neither listed nor served.
 *
 * The folder itself must be where the store put it: with `home` (the store's
 * root), a result folder whose real path is not `<real home>/<its path>` (a
 * test replaced it, or a folder above it, with a symlink to elsewhere) has
 * nothing listed or served. A file with more than one name (a hard link, which
 * could be any file the test's user can read) is neither listed nor served:
 * checked on the path for the listing and again on the opened descriptor
 * (`openRegular`) when it is read.
 *
 * md5 is streamed and cached in memory by (realpath, size, mtimeMs) in a
 * small LRU, so a 200 MB video is hashed once, not on every listing.
 */
import { createHash } from 'node:crypto';
import type { Dirent } from 'node:fs';
import { readdir, realpath, stat } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { ArtifactListing } from '../../core/model.js';
import { openRegular } from '../safeFile.js';

/** The file each result folder keeps for the store itself. */
export const RECORD_FILE = 'result.json';

/**
 * The temporary files the store and the recorder write beside their targets
 * before renaming them (`.result.json.<pid>.<hex>.tmp`, `.video.mp4.<tag>.tmp`):
 * half-written while they exist, so never listed or served, and deleted at
 * recovery when a crash left them.
 */
export const isStoreTemp = (name: string): boolean => name.startsWith('.') && name.endsWith('.tmp') && !name.includes('/');

interface CacheEntry { size: number; mtimeMs: number; md5: string }

export class ArtifactReader {
  private readonly cache = new Map<string, CacheEntry>();
  private readonly hashing = new Map<string, Promise<string>>();

  /** @param home the store's root: `list` and `open` take only folders under it that resolve to where they are named. */
  constructor(
    private readonly cacheSize = 4096,
    private readonly home?: string,
  ) {}

  /** The real path of a result folder, or undefined when it is missing or (with `home`) not where it is named. */
  private async rootOf(dir: string): Promise<string | undefined> {
    const root = await realpathOrUndefined(dir);
    if (root === undefined || this.home === undefined) return root;
    const home = await realpathOrUndefined(this.home);
    const rel = relative(this.home, dir);
    if (home === undefined || rel === '' || rel.startsWith('..')) return undefined;
    return root === join(home, rel) ? root : undefined;
  }

  /** Every regular file under `dir`, recursively, keyed by relative path with `/`. Missing folder: `{}`. */
  async list(dir: string): Promise<ArtifactListing> {
    const root = await this.rootOf(dir);
    if (root === undefined) return {};
    const found: Array<[string, { size: number; md5: string }]> = [];
    await this.walk(root, root, '', found);
    found.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return Object.fromEntries(found);
  }

  /** A file of `dir` by relative path; undefined when absent or not allowed. */
  async open(dir: string, relPath: string): Promise<{ path: string; size: number; mtime: Date } | undefined> {
    if (!isSafeRelPath(relPath) || relPath === RECORD_FILE) return undefined;
    const root = await this.rootOf(dir);
    if (root === undefined) return undefined;
    const real = await realpathOrUndefined(join(root, relPath));
    if (real === undefined || !allowed(root, real)) return undefined;
    const st = await stat(real).catch(() => undefined);
    if (!st?.isFile() || st.nlink > 1) return undefined;
    return { path: real, size: st.size, mtime: st.mtime };
  }

  private async walk(root: string, dir: string, prefix: string, out: Array<[string, { size: number; md5: string }]>): Promise<void> {
    let entries: Dirent[];
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch {
      return; // removed while listing (retention, a stop): list what is left
    }
    for (const e of entries) {
      if (prefix === '' && (e.name === RECORD_FILE || isStoreTemp(e.name))) continue;
      const full = join(dir, e.name);
      const rel = prefix + e.name;
      if (e.isDirectory()) {
        await this.walk(root, full, rel + '/', out);
        continue;
      }
      const target = e.isFile() ? full : e.isSymbolicLink() ? await realpathOrUndefined(full) : undefined;
      if (target === undefined || (target !== full && !allowed(root, target))) continue;
      const info = await this.describe(target);
      if (info) out.push([rel, info]);
    }
  }

  /** Size and md5 of a regular file; undefined when it is not one (or vanished). */
  private async describe(path: string): Promise<{ size: number; md5: string } | undefined> {
    const st = await stat(path).catch(() => undefined);
    if (!st?.isFile() || st.nlink > 1) return undefined;
    const hit = this.cache.get(path);
    if (hit && hit.size === st.size && hit.mtimeMs === st.mtimeMs) {
      this.cache.delete(path); // refresh its place in the LRU order
      this.cache.set(path, hit);
      return { size: st.size, md5: hit.md5 };
    }
    const key = `${path}\0${st.size}\0${st.mtimeMs}`;
    let pending = this.hashing.get(key);
    if (!pending) {
      pending = md5File(path).finally(() => this.hashing.delete(key));
      this.hashing.set(key, pending);
    }
    const md5 = await pending.catch(() => undefined);
    if (md5 === undefined) return undefined;
    this.remember(path, { size: st.size, mtimeMs: st.mtimeMs, md5 });
    return { size: st.size, md5 };
  }

  private remember(path: string, entry: CacheEntry): void {
    this.cache.delete(path);
    this.cache.set(path, entry);
    if (this.cache.size > this.cacheSize) this.cache.delete(this.cache.keys().next().value!);
  }
}

/** Shape check of a request's relative path, before it touches the disk. */
export function isSafeRelPath(p: unknown): p is string {
  if (typeof p !== 'string' || p.length === 0 || p.length > 4096) return false;
  if (p.includes('\0') || p.includes('\\') || p.startsWith('/')) return false;
  return p.split('/').every((seg) => seg !== '' && seg !== '.' && seg !== '..');
}

/** Inside the folder, and not the store's own record. */
function allowed(root: string, real: string): boolean {
  if (!real.startsWith(root + '/')) return false;
  const rel = real.slice(root.length + 1);
  return rel !== RECORD_FILE && !isStoreTemp(rel);
}

async function realpathOrUndefined(p: string): Promise<string | undefined> {
  try {
    return await realpath(p);
  } catch {
    return undefined;
  }
}

/** md5 hex digest, streamed in 1 MiB reads. */
export async function md5File(path: string): Promise<string> {
  const hash = createHash('md5');
  const fh = await openRegular(path); // the file may have been swapped for a FIFO since stat()
  try {
    for await (const chunk of fh.createReadStream({ highWaterMark: 1 << 20, autoClose: false })) hash.update(chunk as Buffer);
  } finally {
    await fh.close();
  }
  return hash.digest('hex');
}
