/**
 * Resumable, checksummed uploads of a result's files to the portal's storage
 * (docs/farm.md, "Results: uploads and the farm index"):
 *
 * - a file is appended to in chunks at the offset the portal has (`append`),
 *   into a partial file under `<storage_dir>/.partial/` named by a hash of
 *   (result id, path), so a half-uploaded file is never listed or served;
 * - `status` says how many bytes the portal holds, so a node resumes there
 *   after a cut connection or a restart of either side;
 * - `complete` checks the sha256 of the whole file: a match renames the
 *   partial file into the result's folder (atomic), a mismatch deletes it
 *   (the node starts that file again) and is a 400.
 *
 * One operation at a time per file (an in-memory lock, and with `locks` a lease in
 * PostgreSQL for replicas sharing the storage, src/farm/uploadLocks.ts): two requests
 * for the same file (a retry racing its first attempt, on this portal or another)
 * cannot interleave their bytes.
 *
 * Each node's partial files together hold at most `maxPartialBytesPerNode`
 * (the portal's `max_partial_upload_bytes_per_node`): a chunk that would pass it
 * is refused whole (507 `storage_full`, nothing of it kept), after the node's
 * partial files untouched for PARTIAL_STALE_MS (uploads it gave up) are
 * released. The partial files are named `<node_id>.<hash>.part`, so the count
 * survives a restart of the portal (one scan of `.partial/` at the first use).
 */
import { createHash } from 'node:crypto';
import { constants } from 'node:fs';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { FarmError } from '../core/errors.js';
import { parseResultId } from '../core/ids.js';
import { syncDir } from '../storage/atomic.js';
import { isSafeRelPath, RECORD_FILE } from '../storage/results/artifacts.js';
import { PARTIAL_DIR, type StoredResults } from './storedResults.js';
import { chunkFault, type ChunkTarget } from './uploadChunk.js';
import type { PgUploadLocks } from './uploadLocks.js';

export const DEFAULT_MAX_CHUNK_BYTES = 8 << 20;
/** A partial file untouched this long belongs to an upload that was given up (docs/farm.md, "Storage layout"). */
export const PARTIAL_MAX_AGE_MS = 7 * 24 * 3600_000;
/** The default quota of one node's partial files (docs/farm.md, "What a node can do to the portal"). */
export const DEFAULT_MAX_PARTIAL_BYTES_PER_NODE = 2 * 1024 ** 3;
/** A node's partial file untouched this long is released when the node reaches its quota (an upload it gave up). */
export const PARTIAL_STALE_MS = 3600_000;
/** `<node_id>.<sha256 hex>.part` */
const PARTIAL_NAME = /^(.+)\.([0-9a-f]{64})\.part$/;
const SHA256 = /^[0-9a-f]{64}$/;

export interface UploadStatus {
  /** Bytes of the file the portal holds so far (the partial file); the next chunk goes here. */
  offset: number;
  /** Size of the completed file in the result's folder, or null when there is none yet. */
  complete_size: number | null;
}

export interface UploadStats {
  /** Chunk bytes written, over every file (a resume that re-sent nothing adds only what was missing). */
  bytesReceived: number;
  filesCompleted: number;
  checksumMismatches: number;
  /** Chunks refused because their node's partial files would pass its quota. */
  quotaRefusals: number;
  /** Partial files released (deleted) to make room under a node's quota. */
  stalePartialsReleased: number;
}

export class FarmUploads {
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Leases shared by the replicas on one storage (absent: this process is the only writer). */
  private readonly leases: PgUploadLocks | undefined;
  readonly stats: UploadStats = { bytesReceived: 0, filesCompleted: 0, checksumMismatches: 0, quotaRefusals: 0, stalePartialsReleased: 0 };
  readonly maxChunkBytes: number;
  readonly maxPartialBytesPerNode: number;
  /** Each node's partial files and their sizes (loaded by one scan at the first use, then kept up to date). */
  private partials: Map<string, Map<string, number>> | undefined;
  private loading: Promise<Map<string, Map<string, number>>> | undefined;

  constructor(
    private readonly store: StoredResults,
    opts: { maxChunkBytes?: number; maxPartialBytesPerNode?: number; locks?: PgUploadLocks } = {},
  ) {
    this.leases = opts.locks;
    this.maxChunkBytes = opts.maxChunkBytes ?? DEFAULT_MAX_CHUNK_BYTES;
    this.maxPartialBytesPerNode = opts.maxPartialBytesPerNode ?? DEFAULT_MAX_PARTIAL_BYTES_PER_NODE;
  }

  /** Bytes of a node's partial files (uploads not completed). */
  /** Uploads being written now (one per file: a file's chunks wait for each other), for /metrics. */
  get inFlight(): number {
    return this.locks.size;
  }

  async partialBytes(nodeId: string): Promise<number> {
    let n = 0;
    for (const size of (await this.partialsByNode()).get(nodeId)?.values() ?? []) n += size;
    return n;
  }

  private partialsByNode(): Promise<Map<string, Map<string, number>>> {
    if (this.partials) return Promise.resolve(this.partials);
    this.loading ??= (async () => {
      const dir = join(this.store.dir, PARTIAL_DIR);
      const byNode = new Map<string, Map<string, number>>();
      for (const name of await readdir(dir).catch(() => [] as string[])) {
        const m = PARTIAL_NAME.exec(name);
        if (!m) continue; // not a partial file, or one named before the quota (swept when stale)
        const st = await stat(join(dir, name)).catch(() => undefined);
        if (!st?.isFile()) continue;
        const files = byNode.get(m[1]!) ?? new Map<string, number>();
        // A size recorded meanwhile by an operation is newer than the scan's.
        if (!files.has(join(dir, name))) files.set(join(dir, name), st.size);
        byNode.set(m[1]!, files);
      }
      this.partials = byNode;
      return byNode;
    })();
    return this.loading;
  }

  /** Record a partial file's size (undefined: it is gone). */
  private async track(nodeId: string, file: string, size: number | undefined): Promise<void> {
    const byNode = await this.partialsByNode();
    const files = byNode.get(nodeId) ?? new Map<string, number>();
    if (size === undefined) files.delete(file);
    else files.set(file, size);
    if (files.size > 0) byNode.set(nodeId, files);
    else byNode.delete(nodeId);
  }

  /**
   * Room for `more` bytes in `file` (which holds `have`) under the node's quota, taken at once (the file counts as
   * `have + more` until its operation records its real size), so chunks of many files at once cannot pass the quota
   * together. When there is none, the node's other partial files untouched for PARTIAL_STALE_MS are released first;
   * then 507 if there is still none.
   */
  private async makeRoom(nodeId: string, file: string, have: number, more: number, relPath: string): Promise<void> {
    const byNode = await this.partialsByNode();
    if (this.take(byNode, nodeId, file, have + more)) return;
    const now = Date.now();
    for (const other of [...(byNode.get(nodeId)?.keys() ?? [])]) {
      if (other === file || this.locks.has(other)) continue;
      const st = await stat(other).catch(() => undefined);
      if (st && now - st.mtimeMs < PARTIAL_STALE_MS) continue;
      await rm(other, { force: true });
      await this.track(nodeId, other, undefined);
      if (st) this.stats.stalePartialsReleased++;
    }
    if (this.take(byNode, nodeId, file, have + more)) return;
    const quota = this.maxPartialBytesPerNode;
    const used = (await this.partialBytes(nodeId)) - (byNode.get(nodeId)?.get(file) ?? 0) + have;
    this.stats.quotaRefusals++;
    throw new FarmError(
      'storage_full',
      `node ${nodeId} has ${used} bytes of unfinished uploads on the portal and ${relPath} would add ${more}: the quota is ${quota} bytes per node ` +
        '(max_partial_upload_bytes_per_node in the portal\'s config). Complete or DELETE partial files first; the portal releases those untouched for an hour when the quota is reached',
      { used, quota },
    );
  }

  /** Count `file` as `size` bytes when the node's partial files then stay within the quota (no await: check and take at once). */
  private take(byNode: Map<string, Map<string, number>>, nodeId: string, file: string, size: number): boolean {
    const files = byNode.get(nodeId) ?? new Map<string, number>();
    let others = 0;
    for (const [f, n] of files) if (f !== file) others += n;
    if (others + size > this.maxPartialBytesPerNode) return false;
    files.set(file, Math.max(files.get(file) ?? 0, size));
    byNode.set(nodeId, files);
    return true;
  }

  async status(resultId: string, relPath: string): Promise<UploadStatus> {
    const f = this.files(resultId, relPath);
    return {
      offset: await sizeOf(f.partial),
      complete_size: (await exists(f.final)) ? await sizeOf(f.final) : null,
    };
  }

  /**
   * Append one chunk at `offset`, which must be the size held now (409 with
   * the current offset otherwise). The bytes that arrived are kept even when
   * the connection is cut mid-chunk: the node resumes after them.
   */
  append(resultId: string, relPath: string, offset: number, body: Readable, declaredBytes = 0): Promise<UploadStatus> {
    const f = this.files(resultId, relPath);
    // Another replica writes this file now: no offset in the answer (it is moving), so the node's uploader backs off and asks again.
    const busy = (): Promise<never> => {
      body.resume();
      return othersBusy(relPath)();
    };
    return this.locked(f.partial, async () => {
      const have = await this.admitChunk(f, offset, declaredBytes, relPath, body);
      const fh = await open(f.partial, constants.O_WRONLY | constants.O_CREAT | constants.O_APPEND | constants.O_NOFOLLOW, 0o644);
      const t: ChunkTarget = { fh, node: f.node, partial: f.partial, have, declared: declaredBytes, relPath, written: 0 };
      try {
        await this.receiveChunk(body, t);
      } catch (e) {
        throw await chunkFault(e, t, resultId);
      } finally {
        await fh.close();
        await this.track(f.node, f.partial, await sizeOf(f.partial));
      }
      return { offset: have + t.written, complete_size: null };
    }, busy);
  }

  /** The size held now, when the chunk starts there and its stated length fits the node's quota; else the body is drained and the refusal thrown. */
  private async admitChunk(f: { partial: string; node: string }, offset: number, declaredBytes: number, relPath: string, body: Readable): Promise<number> {
    const have = await sizeOf(f.partial);
    try {
      if (offset !== have) {
        throw new FarmError('conflict', `the portal holds ${have} bytes of ${relPath}: send the chunk at offset ${have}`, { offset: have });
      }
      await this.makeRoom(f.node, f.partial, have, declaredBytes, relPath);
    } catch (e) {
      body.resume(); // drain what the client sends; the answer tells it where to start
      throw e;
    }
    return have;
  }

  /**
   * Write the body's bytes at the end of the partial file. Past the quota the chunk is refused whole: the file
   * goes back to its size before the chunk and the rest of the body is read and dropped (the client reads the answer).
   */
  private async receiveChunk(body: Readable, t: ChunkTarget): Promise<void> {
    let refused: Error | undefined;
    let dropped = 0;
    for await (const chunk of body) {
      const buf = chunk as Buffer;
      if (refused !== undefined) {
        dropped += buf.length;
        if (dropped > this.maxChunkBytes) throw refused;
        continue;
      }
      if (t.written + buf.length > this.maxChunkBytes) {
        await t.fh.truncate(t.have + t.written); // keep only the whole bytes counted so far
        throw new FarmError('payload_too_large', `a chunk holds at most ${this.maxChunkBytes} bytes`);
      }
      // A chunk longer than it said (or of no stated length) is held to the quota as it arrives: refused whole.
      if (t.written + buf.length > t.declared) {
        try {
          await this.makeRoom(t.node, t.partial, t.have, t.written + buf.length, t.relPath);
        } catch (e) {
          await t.fh.truncate(t.have);
          dropped = t.written + buf.length;
          t.written = 0;
          refused = e instanceof Error ? e : new Error(String(e));
          continue;
        }
      }
      await t.fh.write(buf);
      t.written += buf.length;
      this.stats.bytesReceived += buf.length;
    }
    if (refused !== undefined) throw refused;
  }

  /** Check the whole file's sha256 and move it into the result's folder; 400 (and the partial file deleted) on a mismatch. */
  complete(resultId: string, relPath: string, sha256: unknown): Promise<{ size: number; sha256: string }> {
    if (typeof sha256 !== 'string' || !SHA256.test(sha256)) throw new FarmError('invalid_request', 'send {"sha256": "<64 lower-case hex digits of the whole file>"}');
    const f = this.files(resultId, relPath);
    return this.locked(f.partial, async () => {
      let source = f.partial;
      if (!(await exists(f.partial))) {
        // Completed before and the answer was lost: the same checksum again is a success.
        if (await exists(f.final)) {
          if ((await sha256File(f.final)) === sha256) return { size: await sizeOf(f.final), sha256 };
        }
        // An empty file needs no chunk.
        await (await open(f.partial, 'wx', 0o644)).close();
        source = f.partial;
      }
      const got = await sha256File(source);
      if (got !== sha256) {
        this.stats.checksumMismatches++;
        await rm(source, { force: true });
        await this.track(f.node, source, undefined);
        throw new FarmError('invalid_request', `checksum mismatch for ${relPath}: the portal received bytes whose sha256 is ${got}, not ${sha256}; the partial file was discarded, upload it again from offset 0`, { reason: 'checksum_mismatch' });
      }
      try {
        await mkdir(dirname(f.final), { recursive: true });
        await rename(source, f.final);
        await this.track(f.node, source, undefined);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOTDIR' || code === 'EISDIR' || code === 'EEXIST' || code === 'ENOTEMPTY') {
          throw new FarmError('conflict', `${relPath} clashes with another file of the result (a file and a folder of the same name)`);
        }
        throw e;
      }
      await syncDir(dirname(f.final));
      this.stats.filesCompleted++;
      return { size: await sizeOf(f.final), sha256 };
    }, othersBusy(relPath));
  }

  /** Forget a partial file (the node's copy changed, or it starts again). */
  discard(resultId: string, relPath: string): Promise<void> {
    const f = this.files(resultId, relPath);
    return this.locked(f.partial, async () => {
      await rm(f.partial, { force: true });
      await this.track(f.node, f.partial, undefined);
    }, othersBusy(relPath));
  }

  /**
   * Delete the partial files nobody has written to for `maxAgeMs`: uploads a node gave up (its
   * result deleted on the node, the node retired). A node that comes back later asks for the
   * offset, is told 0 and sends the file again, so nothing it still has is lost. A file with an
   * operation under way is left alone; its age is checked again under the file's lock.
   */
  async sweepPartials(maxAgeMs = PARTIAL_MAX_AGE_MS, now = Date.now()): Promise<number> {
    const dir = join(this.store.dir, PARTIAL_DIR);
    const names = await readdir(dir).catch(() => [] as string[]);
    let removed = 0;
    for (const name of names) {
      if (!name.endsWith('.part')) continue;
      const file = join(dir, name);
      if (this.locks.has(file)) continue;
      await this.locked(file, async () => {
        const st = await stat(file).catch(() => undefined);
        if (!st?.isFile() || now - st.mtimeMs < maxAgeMs) return;
        await rm(file, { force: true });
        const node = PARTIAL_NAME.exec(name)?.[1];
        if (node !== undefined) await this.track(node, file, undefined);
        removed++;
      }, () => Promise.resolve()); // another replica works on it: not given up
    }
    return removed;
  }

  /** The partial and final paths of a file; refuses any path that could leave the result's folder. */
  private files(resultId: string, relPath: string): { partial: string; final: string; node: string } {
    const parsed = parseResultId(resultId);
    if (!parsed) throw new FarmError('invalid_request', `"${resultId.slice(0, 200)}" is not a result id`);
    if (!isSafeRelPath(relPath) || relPath.length > 1024 || relPath.split('/').some((s) => s.startsWith('.') && s.endsWith('.tmp'))) {
      throw new FarmError('invalid_request', `${JSON.stringify(relPath.slice(0, 200))} is not a relative path inside the result folder (no "..", ".", empty segment, leading "/", backslash or NUL)`);
    }
    if (relPath === RECORD_FILE) throw new FarmError('invalid_request', `${RECORD_FILE} is written by the portal from PUT .../record`);
    const key = createHash('sha256').update(`${resultId}\0${relPath}`).digest('hex');
    const node = parsed.job.nodeId;
    return { partial: join(this.store.dir, PARTIAL_DIR, `${node}.${key}.part`), final: join(this.store.dirOf(resultId), relPath), node };
  }

  /** One operation at a time on `file`: chained here, and under its lease among replicas (`busy` when another holds it). */
  private locked<T>(file: string, fn: () => Promise<T>, busy: () => Promise<T>): Promise<T> {
    const key = file;
    const leases = this.leases;
    const op = leases ? () => leases.with(basename(file), fn, busy) : fn;
    const prev = this.locks.get(key) ?? Promise.resolve();
    const run = prev.then(op, op);
    const tail = run.catch(() => undefined);
    this.locks.set(key, tail);
    void tail.then(() => {
      if (this.locks.get(key) === tail) this.locks.delete(key);
    });
    return run;
  }
}

const othersBusy = (relPath: string) => (): Promise<never> =>
  Promise.reject(new FarmError('conflict', `another portal is working on ${relPath} now; try again in a moment`));

async function sizeOf(file: string): Promise<number> {
  const st = await stat(file).catch(() => undefined);
  return st?.isFile() ? st.size : 0;
}

async function exists(file: string): Promise<boolean> {
  return (await stat(file).catch(() => undefined))?.isFile() ?? false;
}

export async function sha256File(file: string): Promise<string> {
  const hash = createHash('sha256');
  const fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    for await (const chunk of fh.createReadStream({ highWaterMark: 1 << 20, autoClose: false })) hash.update(chunk as Buffer);
  } finally {
    await fh.close();
  }
  return hash.digest('hex');
}
