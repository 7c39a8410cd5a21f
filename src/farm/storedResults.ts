/**
 * The results the nodes uploaded to the portal: the files under
 * `storage_dir`, the records in PostgreSQL (FarmResults), and the ids the
 * portal deleted (table `results_deleted`, migration 5), which answer 410 as
 * a node's tombstones do.
 *
 * Layout: `<storage_dir>/<node_id>/<hex>/<n>/<YYYY-MM-DD_hh.mm.ss>/`, the
 * node's own `<data_dir>/results/<hex>/<n>/<stamp>/` under a folder per node,
 * with the same files (logs, screenshot, thumbnail, video, artifacts ...) and
 * `result.json` (the record, written by the portal when the node sends it).
 * Files still being uploaded live in `<storage_dir>/.partial/` (a node id
 * never starts with a dot), so a result folder only ever holds whole files.
 * Every path is made from a parsed result id (core/ids.ts: no segment can be
 * `..` or hold a separator) and a relative path checked by isSafeRelPath.
 */
import { mkdir, rename, rm, rmdir, stat, statfs } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type pg from 'pg';
import { FarmError } from '../core/errors.js';
import { parseResultId, type ResultIdParts } from '../core/ids.js';
import type { ArtifactListing, ResultRecord } from '../core/model.js';
import { writeFileAtomic } from '../storage/atomic.js';
import { ArtifactReader, RECORD_FILE } from '../storage/results/artifacts.js';
import { checkRecord } from '../storage/results/record.js';
import type { FarmResults } from './results.js';

/** Where partial uploads wait (inside storage_dir, so the final rename is atomic). */
export const PARTIAL_DIR = '.partial';
/** Folders being deleted are renamed here first. */
const TRASH_DIR = '.trash';
/** Results deleted per round of retention. */
const RETENTION_BATCH = 1000;

async function freeBytes(dir: string): Promise<number> {
  const st = await statfs(dir);
  return st.bavail * st.bsize;
}

export class StoredResults {
  readonly dir: string;
  private readonly reader: ArtifactReader;

  constructor(
    private readonly o: { storageDir: string; index: FarmResults; pool: pg.Pool },
  ) {
    this.dir = resolve(o.storageDir);
    this.reader = new ArtifactReader(undefined, this.dir);
  }

  get index(): FarmResults {
    return this.o.index;
  }

  async open(): Promise<void> {
    await mkdir(join(this.dir, PARTIAL_DIR), { recursive: true });
  }

  /**
   * True for a result in the index whose node has sent the record but not yet every file
   * (`files=pending`): its folder has no `result.json` yet, which the record after the files
   * writes. Its files are read from the node (forwarded), not from the portal's storage.
   */
  async filesOnNode(resultId: string): Promise<boolean> {
    return !(await stat(join(this.dirOf(resultId), RECORD_FILE)).catch(() => undefined))?.isFile();
  }

  /** The folder of a result id (no I/O); `invalid_request` for anything that is not a result id. */
  dirOf(resultId: string): string {
    const p = parts(resultId);
    return join(this.dir, p.job.nodeId, p.relDir);
  }

  /** An uploaded result; `'deleted'` once the portal deleted it; undefined when not (yet) uploaded. */
  async get(resultId: string): Promise<ResultRecord | 'deleted' | undefined> {
    const p = parseResultId(resultId);
    if (!p) return undefined;
    const id = `${p.jobUid}/${p.stamp}`;
    const rec = await this.o.index.get(id);
    if (rec) return rec;
    const gone = await this.o.pool.query('SELECT 1 FROM results_deleted WHERE result_id = $1', [id]);
    return gone.rowCount ? 'deleted' : undefined;
  }

  /** Every file of an uploaded result with size and md5, as the node lists them. */
  artifacts(resultId: string): Promise<ArtifactListing> {
    return this.reader.list(this.dirOf(resultId));
  }

  openArtifact(resultId: string, relPath: string): Promise<{ path: string; size: number; mtime: Date } | undefined> {
    return this.reader.open(this.dirOf(resultId), relPath);
  }

  /**
   * Make an uploaded result visible: its record, checked, into the index
   * (idempotent on result_id: an upload made again replaces it, never
   * duplicates) and into its folder (`result.json`, atomically). With
   * `filesPending` (the node sends the record before the files and goes on
   * with them) the folder is left alone: no `result.json` is what says the
   * files are still on the node (filesOnNode), until the record comes again
   * without it. Nothing is written to disk then, so the record reaches the
   * index without waiting for an fsync.
   */
  async record(raw: unknown, nodeId: string, o: { filesPending?: boolean } = {}): Promise<ResultRecord> {
    const rec = checkRecord(raw);
    if (typeof rec === 'string') throw new FarmError('invalid_request', `result record: ${rec}`);
    const p = parseResultId(rec.result_id);
    if (!p || rec.result_id !== `${p.jobUid}/${p.stamp}` || rec.job_uid !== p.jobUid) {
      throw new FarmError('invalid_request', `result record: result_id ${rec.result_id} and job_uid ${rec.job_uid} disagree`);
    }
    if (p.job.nodeId !== nodeId) throw new FarmError('forbidden', `node ${nodeId} cannot record a result of node ${p.job.nodeId}`);
    const jobUid = p.jobUid;
    // The portal's account of a run it declared lost (its node went offline) stands: the files are
    // kept, the late node's record does not replace it (docs/farm.md, "Faults": a paused node).
    const ended = await this.endedByPortal(jobUid);
    const kept = ended ? await this.o.index.get(rec.result_id) : undefined;
    if (!o.filesPending) {
      const dir = this.dirOf(rec.result_id);
      await mkdir(dir, { recursive: true });
      await writeFileAtomic(join(dir, RECORD_FILE), JSON.stringify(kept ?? rec, null, 2) + '\n');
    }
    if (kept) return kept;
    await this.o.index.put([rec]);
    await this.o.pool.query('DELETE FROM results_deleted WHERE result_id = $1', [rec.result_id]);
    // A run the portal never heard of (its node died before its run.finished arrived) counts in the
    // job the portal ended: the counts become the index's, which holds every run of the job once.
    if (ended) await this.recount(jobUid);
    return rec;
  }

  /**
   * Every file of a result is uploaded (docs/farm.md, "The node stream"): its record, folded from the node's
   * stream into the index, is written to its folder (`result.json`, atomically), and from then on the portal
   * serves its files from storage. 409 `conflict` while the record has not reached the index (the node's stream
   * is behind its uploads): the node asks again; 410 `gone` for a result the portal deleted (retention).
   */
  async complete(resultId: string, nodeId: string): Promise<ResultRecord> {
    const p = parts(resultId);
    if (p.job.nodeId !== nodeId) throw new FarmError('forbidden', `node ${nodeId} cannot complete a result of node ${p.job.nodeId}`);
    const rec = await this.get(resultId);
    if (rec === 'deleted') throw new FarmError('gone', `the portal deleted ${resultId} (retention); its files are not wanted`);
    if (!rec) throw new FarmError('conflict', `the record of ${resultId} has not reached the portal yet (it comes with its run.finished in the node's stream); ask again`);
    const dir = this.dirOf(resultId);
    await mkdir(dir, { recursive: true });
    await writeFileAtomic(join(dir, RECORD_FILE), JSON.stringify(rec, null, 2) + '\n');
    return rec;
  }

  /** Whether the portal ended this job itself (its node went offline): its account of the job's runs stands. */
  async endedByPortal(jobUid: string): Promise<boolean> {
    const ended = await this.o.pool.query('SELECT 1 FROM jobs WHERE job_uid = $1 AND end_reason IS NOT NULL', [jobUid]);
    return (ended.rowCount ?? 0) > 0;
  }

  private async recount(jobUid: string): Promise<void> {
    await recountEndedJob(this.o.pool, jobUid);
  }

  /**
   * The portal's retention, as the node's (`retention` in the node's config): at most `max_results`
   * results, the oldest deleted first, and the oldest deleted while the storage's filesystem has
   * less than `min_free_mb` free. Returns how many were deleted. One pass at a time.
   */
  enforceRetention(r: { max_results: number; min_free_mb: number }, diskFree: (dir: string) => Promise<number> = freeBytes): Promise<number> {
    const pass = (this.retention ?? Promise.resolve(0)).then(async () => {
      let deleted = 0;
      for (let over = (await this.o.index.count()) - r.max_results; over > 0; over -= RETENTION_BATCH) {
        deleted += await this.delete(await this.o.index.oldest(Math.min(over, RETENTION_BATCH)));
      }
      // Batches double while space stays short: few rounds when far below the floor, at most 2x overshoot.
      for (let batch = 1; (await diskFree(this.dir)) < r.min_free_mb * 2 ** 20; batch = Math.min(batch * 2, RETENTION_BATCH)) {
        const ids = await this.o.index.oldest(batch);
        if (ids.length === 0) break;
        deleted += await this.delete(ids);
      }
      return deleted;
    });
    this.retention = pass.catch(() => 0);
    return pass;
  }

  private retention: Promise<number> | undefined;

  /** Delete uploaded results (retention): tombstones first, then the records, then the folders. */
  async delete(ids: readonly string[]): Promise<number> {
    const valid = ids.map((id) => parseResultId(id)).filter((p): p is ResultIdParts => p !== undefined);
    if (valid.length === 0) return 0;
    const resultIds = valid.map((p) => `${p.jobUid}/${p.stamp}`);
    await this.o.pool.query(
      `INSERT INTO results_deleted (result_id, node_id) SELECT * FROM unnest($1::text[], $2::text[]) ON CONFLICT DO NOTHING`,
      [resultIds, valid.map((p) => p.job.nodeId)],
    );
    const n = await this.o.index.delete(resultIds);
    for (const p of valid) await this.removeFolder(p);
    return n;
  }

  private async removeFolder(p: ResultIdParts): Promise<void> {
    const trash = join(this.dir, TRASH_DIR);
    await mkdir(trash, { recursive: true });
    const doomed = join(trash, `${p.job.nodeId}-${p.job.hex}-${p.job.number}-${p.stamp}`);
    await rename(join(this.dir, p.job.nodeId, p.relDir), doomed).catch((e: NodeJS.ErrnoException) => {
      if (e.code !== 'ENOENT') throw e;
    });
    await rm(doomed, { recursive: true, force: true });
    const job = join(this.dir, p.job.nodeId, p.job.hex, String(p.job.number));
    for (const d of [job, join(this.dir, p.job.nodeId, p.job.hex)]) {
      if (!(await rmdir(d).then(() => true, () => false))) return;
    }
  }
}

function parts(resultId: string): ResultIdParts {
  const p = parseResultId(resultId);
  if (!p) throw new FarmError('invalid_request', `"${String(resultId).slice(0, 200)}" is not a result id`);
  return p;
}

/** A job the portal ended (its node went offline): its counts become the index's, which holds every run of it once. */
export async function recountEndedJob(q: Pick<pg.ClientBase, 'query'>, jobUid: string): Promise<void> {
  await q.query(
    `UPDATE jobs SET job = jsonb_set(coalesce(job, '{}'), '{result_counts}', (
       SELECT jsonb_build_object('pass', count(*) FILTER (WHERE result = 'pass'), 'fail', count(*) FILTER (WHERE result = 'fail'),
                                 'error', count(*) FILTER (WHERE result = 'error'), 'total', count(*))
       FROM results WHERE job_uid = $1))
     WHERE job_uid = $1 AND end_reason IS NOT NULL`,
    [jobUid],
  );
}
