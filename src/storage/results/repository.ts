/**
 * The results store: one folder per run under `<data_dir>/results`, and an
 * index of finished runs for queries.
 *
 * On disk (all under `dir`):
 * - `<hex>/<n>/<YYYY-MM-DD>_<hh.mm.ss>/`: a run's folder (its working
 *   directory and artifacts) with `result.json`, the ResultRecord, written
 *   atomically when the run is added. The node id is not in the path: one
 *   node per data directory.
 * - `index.jsonl`: append-only, one record per line (a later line for the
 *   same id replaces the earlier one), and `{"deleted":"<id>"}` tombstones
 *   written by retention. Loaded whole into memory at open().
 * - `deleted.jsonl`: the deleted ids as one span of start times per job
 *   (see deleted-ids.ts).
 * - `index.snapshot`: the in-memory (columnar) index as it was when
 *   `index.jsonl` had a given length (snapshot.ts). open() loads it and reads
 *   only the lines after that length; a snapshot that is missing, torn,
 *   damaged, of another version, or no longer matches `index.jsonl` (cut
 *   below its length, replaced by a compaction or rebuild, changed) is
 *   ignored: the whole file is read, as without one, and a new snapshot is
 *   written. It is written (atomically, through the write chain) after a
 *   start that read many lines, every `snapshotEvery` appended lines, after
 *   a compaction or rebuild (which delete it first), and at close.
 *
 * Compaction: once the index holds more dead lines (tombstones, deleted or
 * replaced records) than max(10,000, live records), the deleted ids are
 * written to `deleted.jsonl` first, then `index.jsonl` is rewritten with the
 * live records only; each file is replaced atomically, and a crash between
 * the two leaves ids in both files, which is harmless. So deleted ids answer
 * `'deleted'` forever, at a few dozen bytes per job.
 *
 * If `index.jsonl` is missing it is rebuilt from the folders' `result.json`
 * (logged as a warning); ids deleted before the last compaction still answer
 * `'deleted'`, tombstones newer than it are lost with the file.
 *
 * Writes (add, retention, compaction) run one at a time through a promise
 * chain; reads are synchronous on the in-memory index.
 */
import { randomBytes } from 'node:crypto';
import { copyFile, lstat, mkdir, readdir, readFile, realpath, rename, rm, rmdir, stat, statfs, unlink } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { FarmError } from '../../core/errors.js';
import type { ArtifactListing, ResultRecord } from '../../core/model.js';
import type { Logger, ResultRepository, TidyReport } from '../../core/ports.js';
import type { ResultQuery } from '../../core/query.js';
import { ArtifactReader, isStoreTemp, RECORD_FILE } from './artifacts.js';
import { writeFileAtomic } from '../atomic.js';
import { makeRealFolders } from '../runDir.js';
import { readRegular } from '../safeFile.js';
import { DeletedIds } from './deleted-ids.js';
import { isCanonicalResultId, isHexDir, isNumberDir, isStampDir, parseResultId, type ResultIdParts } from '../../core/ids.js';
import { appendExisting, interruptedFiles, writeMissing, type InterruptedRun } from './interrupted.js';
import { IndexFile } from './index-file.js';
import { ColumnarIndex } from './columnar-index.js';
import { decodeSnapshot, encodeSnapshot } from './snapshot.js';
import { checkRecord, idOfTornLine, recordLine, tombstoneLine } from './record.js';
import { scanFolders, subdirs } from './scan.js';
import { silentLogger } from '../../logger.js';

export interface FileResultRepositoryOptions {
  /** `<data_dir>/results` */
  dir: string;
  retention: { max_results: number; min_free_mb: number };
  logger?: Logger;
  /** Entries of the in-memory md5 cache (default 4096). */
  md5CacheEntries?: number;
  /** Dead index lines tolerated before compaction, at least (default 10,000). */
  compactAfter?: number;
  /** Free bytes on the filesystem of a folder (default: statfs); tests pass their own. */
  diskFree?: (dir: string) => Promise<number>;
  /** Index lines appended before a new snapshot is written in the background (default 10,000). */
  snapshotEvery?: number;
  /** Read and write index.snapshot (default true; benchmarks turn it off to measure the whole index.jsonl's load). */
  snapshots?: boolean;
  /** Tests: called before each chunk of a snapshot is written (a crash test kills the process there). */
  snapshotChunkHook?: (chunk: number) => void;
}

/** The snapshot file, beside index.jsonl. */
const SNAPSHOT = 'index.snapshot';
/** A start that read more lines than this writes a snapshot soon after. */
const REPLAY_SNAPSHOT_LINES = 1000;

/** The small files every run keeps, whatever is deleted to make room for its record. */
const METADATA_FILES = new Set([RECORD_FILE, 'test-name', 'test-args', 'git-commit', 'duration', 'exit-status', 'failure-reason']);

/** Folders being deleted: renamed here first (atomic), then removed; emptied again at every start. */
const TRASH = '.trash';

async function statfsFree(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}


export class FileResultRepository implements ResultRepository {
  private readonly dir: string;
  private readonly log: Logger;
  private index = new ColumnarIndex();
  private readonly deleted = new DeletedIds();
  private readonly file: IndexFile;
  private readonly reader: ArtifactReader;
  private readonly compactAfter: number;
  private readonly diskFree: (dir: string) => Promise<number>;
  private readonly snapshotPath: string;
  private readonly snapshotEvery: number;
  /** The index differs from the snapshot on disk (lines appended, a rewrite, no snapshot). */
  private snapshotStale = true;
  /** Index lines appended since the last snapshot. */
  private appended = 0;
  /** A snapshot being written, if one is. */
  private snapshotting: Promise<void> | undefined;
  private deadLines = 0;
  /** Lines of index.jsonl that were not JSON or not a valid record, counted while loading. */
  private badLines = 0;
  private writes: Promise<unknown> = Promise.resolve();
  /** Emptying the trash in the background (start-up does not wait for it). */
  private emptying: Promise<void> = Promise.resolve();
  /** The background sweep, if one runs (close waits for it to stop). */
  private sweeping: Promise<unknown> = Promise.resolve();
  private closing = false;
  /** Run folders (`<hex>/<n>/<stamp>`) this process made or wrote: the sweep never takes them for a crash's. */
  private readonly made = new Set<string>();
  /** The sweep has run: `made` is no longer kept. */
  private swept = false;

  constructor(private readonly opts: FileResultRepositoryOptions) {
    this.dir = resolve(opts.dir);
    this.log = (opts.logger ?? silentLogger).child({ module: 'results' });
    this.file = new IndexFile(join(this.dir, 'index.jsonl'));
    this.reader = new ArtifactReader(opts.md5CacheEntries, this.dir);
    this.compactAfter = opts.compactAfter ?? 10_000;
    this.diskFree = opts.diskFree ?? statfsFree;
    this.snapshotPath = join(this.dir, SNAPSHOT);
    this.snapshotEvery = opts.snapshotEvery ?? 10_000;
  }

  /** Live (not deleted) results in the index. */
  get size(): number {
    return this.index.size;
  }

  /** Load the index, rebuilding it from the folders when it is missing. */
  async open(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    await this.removeIndexTemps();
    await this.loadDeleted();
    this.index.loadBegin();
    const from = await this.loadSnapshot();
    const loaded = await this.file.load((line) => this.loadLine(line), from);
    if (loaded === undefined) {
      await this.rebuild('missing');
    } else if (this.badLines > 0) {
      // Garbage in the index is not "no results": keep the bad file, merge in every run folder.
      const kept = await keepAside(this.file.path);
      this.log.error({ bad_lines: this.badLines, lines: loaded.lines, kept_as: kept }, 'results index had bad lines: rebuilding it from the result folders');
      await this.rebuild('corrupt');
    } else if (loaded.torn !== undefined) {
      await this.recoverTorn(loaded.torn);
    }
    this.index.loadEnd();
    const replayed = loaded?.lines ?? 0;
    this.appended += replayed;
    if (from === 0 || replayed > 0) this.snapshotStale = true;
    this.log.info({ results: this.index.size, jobs_with_deletions: this.deleted.jobs, from_snapshot: from > 0, lines_read: replayed }, 'results index loaded');
    await this.maybeCompact();
    if (this.snapshotStale && (from === 0 || replayed > REPLAY_SNAPSHOT_LINES)) this.snapshotSoon();
    this.emptyTrashSoon();
  }

  /**
   * Load the snapshot when it is whole and still covers the start of
   * index.jsonl; returns the length of index.jsonl it covers (0: none, read
   * the whole file). Nothing is changed unless every check passed.
   */
  private async loadSnapshot(): Promise<number> {
    if (this.opts.snapshots === false) return 0;
    let buf: Buffer;
    try {
      buf = await readFile(this.snapshotPath);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') this.log.warn({ err: e }, 'results index snapshot: unreadable, reading index.jsonl whole');
      return 0;
    }
    try {
      const { columns, header } = decodeSnapshot(buf);
      if (!(await this.file.holds(header.jsonl))) throw new Error('index.jsonl no longer holds what it covers (cut, replaced or changed)');
      this.index.adopt(columns);
      for (const line of header.deleted.split('\n')) if (line) this.deleted.addLine(line);
      this.deadLines = header.deadLines;
      this.snapshotStale = false;
      return header.jsonl.size;
    } catch (e) {
      this.log.warn({ why: (e as Error).message }, 'results index snapshot not used: reading index.jsonl whole');
      return 0;
    }
  }

  /** Write a snapshot in the background (errors are logged: index.jsonl stays the truth). */
  private snapshotSoon(): void {
    if (this.closing || this.opts.snapshots === false) return;
    void this.writeSnapshot().catch((e: unknown) => this.log.warn({ err: e }, 'results index snapshot: could not write it'));
  }

  /**
   * Write the snapshot of the index as it is now, with what it covers of
   * index.jsonl: in the write chain, so no line is appended meanwhile and
   * the columns do not change under it; atomically (temp, fsync, rename).
   */
  private writeSnapshot(): Promise<void> {
    this.snapshotting ??= this.serial(async () => {
      if (!this.snapshotStale) return;
      const covers = await this.file.coverage();
      if (!covers) return;
      const t0 = Date.now();
      const chunks = encodeSnapshot(this.index.exportColumns(), { jsonl: covers, deadLines: this.deadLines, deleted: this.deleted.serialize() });
      const hook = this.opts.snapshotChunkHook;
      await writeFileAtomic(this.snapshotPath, hook ? hooked(chunks, hook) : chunks);
      this.snapshotStale = false;
      this.appended = 0;
      this.log.info({ results: this.index.size, covers: covers.size, ms: Date.now() - t0 }, 'results index snapshot written');
    }).finally(() => {
      this.snapshotting = undefined;
    });
    return this.snapshotting;
  }

  /** Lines were appended to index.jsonl: the snapshot is behind; a new one after every `snapshotEvery`. */
  private noteAppended(lines: number): void {
    this.snapshotStale = true;
    this.appended += lines;
    if (this.appended >= this.snapshotEvery) {
      this.appended = 0;
      this.snapshotSoon();
    }
  }

  /** index.jsonl is about to be replaced: the snapshot of the old one goes first (a crash then reads the new file whole). */
  private async dropSnapshot(): Promise<void> {
    this.snapshotStale = true;
    await unlink(this.snapshotPath).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
  }

  /** Temporary files of the index's atomic writes a crash left (snapshot, compaction): the data directory is locked to this process. */
  private async removeIndexTemps(): Promise<void> {
    for (const name of await readdir(this.dir).catch(() => [] as string[])) {
      if (/^\.(index\.snapshot|index\.jsonl|deleted\.jsonl)\.\d+\.[0-9a-f]+\.tmp$/.test(name)) await rm(join(this.dir, name), { force: true });
    }
  }

  dirOf(resultId: string): string {
    return join(this.dir, this.parts(resultId, 'not_found').relDir);
  }

  async createRunDir(resultId: string): Promise<string> {
    const rel = this.parts(resultId, 'invalid_request').relDir;
    this.noteMade(rel);
    const dir = join(this.dir, rel);
    // Through the write chain, so retention never removes an empty job folder under a mkdir.
    await this.serial(() => mkdir(dir, { recursive: true }));
    return dir;
  }

  async add(record: ResultRecord): Promise<void> {
    const checked = checkRecord(record);
    if (typeof checked === 'string') throw new FarmError('invalid_request', `result record: ${checked}`);
    const p = this.parts(checked.result_id, 'invalid_request');
    if (checked.result_id !== idOf(p) || checked.job_uid !== p.jobUid) {
      throw new FarmError('invalid_request', `result record: result_id ${checked.result_id} and job_uid ${checked.job_uid} disagree`);
    }
    this.noteMade(p.relDir);
    await this.serial(async () => {
      const dir = join(this.dir, p.relDir);
      try {
        await mkdir(dir, { recursive: true });
        await writeFileAtomic(join(dir, RECORD_FILE), [JSON.stringify(checked, null, 2) + '\n']);
        await this.file.append([recordLine(checked)]);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOSPC') throw new FarmError('storage_full', `no space left to record result ${checked.result_id}`);
        throw e;
      }
      if (this.index.get(checked.result_id)) this.deadLines++;
      this.index.put(checked);
      this.noteAppended(1);
    });
  }

  get(resultId: string): ResultRecord | 'deleted' | undefined {
    const p = parseResultId(resultId);
    if (!p) return undefined;
    const rec = this.index.get(idOf(p));
    if (rec) return rec;
    return this.deleted.has(p.jobUid, p.seconds) ? 'deleted' : undefined;
  }

  query(q: ResultQuery): ResultRecord[] {
    return this.index.query(q);
  }

  /** Throws `not_found` for an unknown (or unfinished) result, `gone` for a deleted one. */
  async artifacts(resultId: string): Promise<ArtifactListing> {
    const found = this.get(resultId);
    if (found === 'deleted') throw new FarmError('gone', `result ${resultId} has been deleted`);
    if (!found) throw new FarmError('not_found', `no result ${resultId}`);
    return this.reader.list(this.dirOf(found.result_id));
  }

  async openArtifact(resultId: string, relPath: string): Promise<{ path: string; size: number; mtime: Date } | undefined> {
    const found = this.get(resultId);
    if (!found || found === 'deleted') return undefined;
    return this.reader.open(this.dirOf(found.result_id), relPath);
  }

  meanDuration(testCase: string): number | undefined {
    return this.index.meanDuration(testCase);
  }

  enforceRetention(): Promise<string[]> {
    return this.serial(async () => {
      const { max_results, min_free_mb } = this.opts.retention;
      const gone = await this.deleteOldest(this.index.size - max_results);
      // Batches double while space stays short: few rounds when far below the floor, at most 2x overshoot.
      for (let batch = 1; ; batch = Math.min(batch * 2, 256)) {
        const free = await this.diskFree(this.dir);
        if (free >= min_free_mb * 1024 * 1024 || this.index.size === 0) break;
        this.log.warn({ free_mb: Math.floor(free / 2 ** 20), min_free_mb, deleting: batch }, 'disk nearly full: deleting the oldest results');
        gone.push(...(await this.deleteOldest(batch)));
      }
      if (gone.length > 0) {
        this.log.info({ deleted: gone.length, kept: this.index.size }, 'retention deleted old results');
        await this.maybeCompact();
      }
      return gone;
    });
  }

  async sealInterrupted(resultId: string, run: InterruptedRun): Promise<string[]> {
    const relDir = this.parts(resultId, 'invalid_request').relDir;
    this.noteMade(relDir);
    const dir = join(this.dir, relDir);
    return this.serial(async () => {
      // The test may have swapped its folder (or one above it) for a symlink before the crash: never written through.
      const fixed = await makeRealFolders(this.dir, await realpath(this.dir), relDir);
      if (fixed) this.log.warn({ result: resultId, fixed }, 'the interrupted run had replaced its result folder: made a real one again');
      const files = interruptedFiles(run);
      const written = await writeMissing(dir, files);
      // A run that had its logs gets the note at their end, and the reason it is recorded with (by rename: safe from a FIFO).
      if (!written.includes('farmhand.log')) await appendExisting(join(dir, 'farmhand.log'), files['farmhand.log']!);
      if (!written.includes('failure-reason')) await writeFileAtomic(join(dir, 'failure-reason'), files['failure-reason']!);
      return written;
    });
  }

  async freeRunSpace(resultId: string, what: 'artifacts' | 'logs'): Promise<{ files: number; bytes: number }> {
    const dir = join(this.dir, this.parts(resultId, 'invalid_request').relDir);
    return this.serial(async () => {
      const freed = { files: 0, bytes: 0 };
      const walk = async (d: string, top: boolean): Promise<void> => {
        const entries = await readdir(d, { withFileTypes: true }).catch(() => []);
        for (const e of entries) {
          const full = join(d, e.name);
          if (top && METADATA_FILES.has(e.name)) continue;
          if (top && e.name.endsWith('.log') && what === 'artifacts') continue;
          const size = e.isFile() ? (await stat(full).catch(() => undefined))?.size ?? 0 : 0;
          if (e.isDirectory()) await walk(full, false);
          await rm(full, { recursive: true, force: true });
          freed.files += e.isDirectory() ? 0 : 1;
          freed.bytes += size;
        }
      };
      await walk(dir, true);
      this.log.warn({ result: resultId, what, ...freed }, 'disk full: deleted files of the run to record it');
      return freed;
    });
  }

  /**
   * After a crash, before any run starts: the runs in flight (`keep`, left
   * for the caller to close) whose `result.json` was written but whose index
   * line was lost (a kill between the two) are indexed again, so the caller
   * does not take them for unfinished. Only those folders are read: start-up
   * does not wait for a look at every folder (that is `sweep`, afterwards).
   */
  tidy(opts: { nodeId: string; keep: readonly string[] }): Promise<TidyReport> {
    return this.serial(async () => {
      const report: TidyReport = { orphans: 0, unrecorded: 0, reindexed: 0, temps: 0 };
      for (const id of opts.keep) {
        const p = parseResultId(id);
        if (!p || this.index.get(idOf(p))) continue;
        if (await this.reindexFromFolder(p)) report.reindexed++;
      }
      if (report.reindexed > 0) this.log.warn({ ...report }, 'results: indexed again the runs a crash left recorded but not listed');
      return report;
    });
  }

  /**
   * The look at every run folder a crash may have left half-done, made in
   * the background once the daemon answers (requests and runs go on
   * meanwhile). Every run folder on disk ends up a listed result, the run in
   * flight (`keep`), or gone: a folder retention tombstoned but did not
   * remove, and a folder of a run that was never recorded (a kill at its
   * creation), move to the trash; a `result.json` whose index line was lost
   * is indexed again; temporary files a write cut short (older than
   * `before`, ms since the epoch: the daemon's start) are deleted. Folders
   * this process made (its own runs, since open) are never touched; each
   * step goes through the write chain and looks again at the index there,
   * so it cannot race an add or retention. Stops early at close().
   */
  async sweep(opts: { nodeId: string; keep?: readonly string[]; before: number }): Promise<TidyReport> {
    const report: TidyReport = { orphans: 0, unrecorded: 0, reindexed: 0, temps: 0 };
    const keep = new Set((opts.keep ?? []).map((id) => parseResultId(id)?.relDir));
    const run = (async () => {
      for (const hex of await subdirs(this.dir, isHexDir)) {
        for (const num of await subdirs(join(this.dir, hex), isNumberDir)) {
          for (const stamp of await subdirs(join(this.dir, hex, num), isStampDir)) {
            if (this.closing) return;
            const rel = `${hex}/${num}/${stamp}`;
            const p = parseResultId(`/${opts.nodeId}/${rel}`);
            if (!p || keep.has(rel) || this.made.has(rel)) continue;
            await this.serial(() => this.sweepFolder(p, rel, opts.before, report));
          }
        }
      }
    })();
    this.sweeping = run.catch(() => undefined);
    try {
      await run;
    } finally {
      // Needed only while a sweep may come: a long-running daemon does not keep a name per run.
      this.swept = true;
      this.made.clear();
    }
    if (report.orphans + report.unrecorded + report.reindexed + report.temps > 0) this.log.warn({ ...report }, 'results: tidied what a crash left half-done');
    return report;
  }

  private noteMade(rel: string): void {
    if (!this.swept) this.made.add(rel);
  }

  /** One folder of the sweep, in the write chain (nothing else writes meanwhile). */
  private async sweepFolder(p: ResultIdParts, rel: string, before: number, report: TidyReport): Promise<void> {
    if (this.closing || this.made.has(rel)) return;
    if (this.index.get(idOf(p))) {
      report.temps += await this.removeTemps(rel, before);
    } else if (this.deleted.has(p.jobUid, p.seconds)) {
      report.orphans++;
      await this.removeFolder(rel);
    } else if (await this.reindexFromFolder(p)) {
      // Killed between writing result.json and its index line: the run is complete, list it.
      report.reindexed++;
      report.temps += await this.removeTemps(rel, before);
    } else {
      report.unrecorded++;
      await this.removeFolder(rel);
    }
  }

  /** Index a run from its folder's `result.json` when it is whole and names that folder; false when not. */
  private async reindexFromFolder(p: ResultIdParts): Promise<boolean> {
    const rec = await readRecord(join(this.dir, p.relDir, RECORD_FILE));
    if (!rec || rec.result_id !== idOf(p)) return false;
    await this.file.append([recordLine(rec)]);
    if (this.index.get(rec.result_id)) this.deadLines++;
    this.index.put(rec);
    this.noteAppended(1);
    return true;
  }

  async close(): Promise<void> {
    this.closing = true;
    await this.sweeping;
    await this.writes.catch(() => undefined);
    // A clean stop leaves a snapshot of everything: the next start reads no line.
    if (this.snapshotStale && this.opts.snapshots !== false) await this.writeSnapshot().catch((e: unknown) => this.log.warn({ err: e }, 'results index snapshot: could not write it at close'));
    await this.emptying;
    await this.file.close();
  }

  // -------------------------------------------------------------- internals

  private parts(resultId: string, code: 'not_found' | 'invalid_request'): ResultIdParts {
    const p = parseResultId(resultId);
    if (!p) throw new FarmError(code, `"${String(resultId).slice(0, 200)}" is not a result id`);
    return p;
  }

  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.writes.then(fn, fn);
    this.writes = run.catch(() => undefined);
    return run;
  }

  private loadLine(line: string): void {
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      this.log.warn({ line: line.slice(0, 200) }, 'results index: skipped a line that is not JSON');
      this.deadLines++;
      this.badLines++;
      return;
    }
    const tomb = typeof raw === 'object' && raw !== null ? (raw as { deleted?: unknown }).deleted : undefined;
    const p = typeof tomb === 'string' ? parseResultId(tomb) : undefined;
    if (p) {
      this.index.loadDelete(idOf(p));
      this.deleted.add(p.jobUid, p.seconds);
      this.deadLines += 2; // the tombstone and the record it ends
      return;
    }
    const rec = checkRecord(raw);
    if (typeof rec === 'string' || !isCanonicalResultId(rec.result_id)) {
      this.log.warn({ line: line.slice(0, 200), why: rec }, 'results index: skipped a bad record');
      this.deadLines++;
      this.badLines++;
      return;
    }
    // The record was parsed here for the index alone: kept as it is (no copy), its strings interned.
    if (this.index.loadOwned(rec)) this.deadLines++;
  }

  private async loadDeleted(): Promise<void> {
    let text: string;
    try {
      text = await readFile(join(this.dir, 'deleted.jsonl'), 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return;
      throw e;
    }
    let bad = 0;
    for (const line of text.split('\n')) if (line && !this.deleted.addLine(line)) bad++;
    if (bad > 0) this.log.warn({ bad }, 'deleted.jsonl: skipped bad lines');
  }

  /** A crash mid-append: the file was cut back to its last full line; re-add the run from its folder. */
  private async recoverTorn(torn: string): Promise<void> {
    const id = idOfTornLine(torn);
    const p = id === undefined ? undefined : parseResultId(id);
    const rec = p && (await readRecord(join(this.dir, p.relDir, RECORD_FILE)));
    this.log.warn({ torn: torn.slice(0, 200), recovered: rec ? rec.result_id : null }, 'results index: last line was torn (crash while writing)');
    if (!rec || idOf(p) !== rec.result_id) return;
    this.index.loadSet(rec);
    await this.file.append([recordLine(rec)]);
    this.snapshotStale = true;
  }

  private async rebuild(why: 'missing' | 'corrupt'): Promise<void> {
    const t0 = Date.now();
    let orphans = 0;
    const scan = await scanFolders(this.dir, async (rec) => {
      const p = parseResultId(rec.result_id)!;
      if (!this.deleted.has(p.jobUid, p.seconds)) {
        this.index.loadSet(rec);
        return;
      }
      // Retention wrote the tombstone but a crash kept it from removing the folder.
      orphans++;
      await rm(join(this.dir, p.relDir), { recursive: true, force: true });
    });
    for (const b of scan.bad) this.log.warn(b, 'results rebuild: skipped a folder');
    this.index.loadEnd();
    await this.dropSnapshot();
    await this.file.rewrite(lines(this.index.records()));
    this.deadLines = 0;
    this.log.warn({ results: this.index.size, orphans, ms: Date.now() - t0 }, `results index was ${why}: rebuilt it from the result folders`);
  }

  private async deleteOldest(n: number): Promise<string[]> {
    const victims = this.index.oldest(n);
    if (victims.length === 0) return [];
    // Tombstones first: a crash before the folders go leaves orphans that a rebuild removes, never a listed run without files.
    await this.file.append(victims.map((r) => tombstoneLine(r.result_id)));
    this.index.removeOldest(victims.length);
    this.deadLines += 2 * victims.length;
    this.noteAppended(victims.length);
    for (const r of victims) {
      const p = parseResultId(r.result_id)!;
      this.deleted.add(p.jobUid, p.seconds);
      await this.removeFolder(p.relDir);
    }
    return victims.map((r) => r.result_id);
  }

  /**
   * Remove a run's folder and its job/installation folders once empty. The
   * folder is renamed into the trash first (one atomic step), so a crash
   * while its files are deleted leaves nothing in the results tree, and the
   * next start finishes the deletion.
   */
  private async removeFolder(relDir: string): Promise<void> {
    const [hex, num, stamp] = relDir.split('/') as [string, string, string];
    const trash = join(this.dir, TRASH);
    const doomed = join(trash, `${hex}-${num}-${stamp}-${randomBytes(4).toString('hex')}`);
    await mkdir(trash, { recursive: true });
    // A test may have made a folder above it a symlink: renamed by that path, a folder outside would be deleted.
    const fixed = await makeRealFolders(this.dir, await realpath(this.dir), `${hex}/${num}`);
    if (fixed) this.log.warn({ folder: relDir, fixed }, 'retention: a folder above the result was not a real folder; made a real one again');
    try {
      await rename(join(this.dir, relDir), doomed);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
    await rm(doomed, { recursive: true, force: true });
    for (const d of [join(this.dir, hex, num), join(this.dir, hex)]) {
      try {
        await rmdir(d);
      } catch {
        return; // not empty (or a run is being created there): keep it
      }
    }
  }

  /** Delete the store's temporary files a crash left in a run folder (last changed before `before`); returns how many. */
  private async removeTemps(relDir: string, before: number): Promise<number> {
    const names = await readdir(join(this.dir, relDir)).catch(() => [] as string[]);
    let n = 0;
    for (const t of names.filter(isStoreTemp)) {
      const st = await lstat(join(this.dir, relDir, t)).catch(() => undefined);
      if (!st || !st.isFile() || st.mtimeMs >= before) continue;
      await rm(join(this.dir, relDir, t), { force: true });
      n++;
    }
    return n;
  }

  /** Empty the trash a crash during retention left, in the background: start-up does not wait for it. */
  private emptyTrashSoon(): void {
    const trash = join(this.dir, TRASH);
    this.emptying = (async () => {
      const names = await readdir(trash).catch(() => [] as string[]);
      for (const n of names) await rm(join(trash, n), { recursive: true, force: true });
      if (names.length > 0) this.log.warn({ folders: names.length }, 'results: emptied the trash a crash left (deleted results)');
    })().catch((e: unknown) => this.log.error({ err: e }, 'results: could not empty the trash'));
  }

  private async maybeCompact(): Promise<void> {
    if (this.deadLines <= Math.max(this.compactAfter, this.index.size)) return;
    const t0 = Date.now();
    await writeFileAtomic(join(this.dir, 'deleted.jsonl'), [this.deleted.serialize()]);
    await this.dropSnapshot();
    await this.file.rewrite(lines(this.index.records()));
    const dead = this.deadLines;
    this.deadLines = 0;
    this.index.repool();
    this.snapshotSoon();
    this.log.info({ dropped_lines: dead, live: this.index.size, ms: Date.now() - t0 }, 'results index compacted');
  }
}

/** Index lines of records, made one at a time as the file is written. */
function* lines(records: Iterable<ResultRecord>): Generator<string> {
  for (const r of records) yield recordLine(r);
}

/** The chunks, calling `hook` before each. */
function* hooked<T>(chunks: T[], hook: (chunk: number) => void): Generator<T> {
  for (let i = 0; i < chunks.length; i++) {
    hook(i);
    yield chunks[i]!;
  }
}

const idOf = (p: ResultIdParts): string => `${p.jobUid}/${p.stamp}`;

/** Keep a corrupt index as `index.jsonl.corrupt-<timestamp>` (a copy: the rebuild replaces the original atomically). */
async function keepAside(file: string): Promise<string> {
  const dest = `${file}.corrupt-${new Date().toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}`;
  await copyFile(file, dest);
  return dest;
}

async function readRecord(path: string): Promise<ResultRecord | undefined> {
  try {
    const rec = checkRecord(JSON.parse(await readRegular(path, 16 << 20)));
    return typeof rec === 'string' ? undefined : rec;
  } catch {
    return undefined;
  }
}

