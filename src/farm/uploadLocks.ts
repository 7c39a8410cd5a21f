/**
 * One operation at a time on each partial upload file across every replica of the portal
 * (docs/farm.md, "Many portals": shared storage). Within a process FarmUploads chains the operations of
 * a file in memory; between processes sharing `storage_dir`, a row of `upload_locks` (migration 11) is
 * a lease on the file: taken with one INSERT (or the takeover of a lapsed lease), released with one
 * DELETE. No connection is held while the bytes arrive, and a replica that dies holding a lease
 * blocks the file only until the lease lapses (`leaseSecs`, default 600: a chunk is at most 8 MiB).
 *
 * A file whose lease another replica holds is not waited for: the operation answers 409 with the
 * offset held now, and the node's uploader resumes from there (src/farm/uploader.ts), as after a cut.
 */
import { randomBytes } from 'node:crypto';
import type pg from 'pg';

export class PgUploadLocks {
  /** This process's name in `upload_locks.holder`. */
  readonly holder: string;
  private readonly leaseSecs: number;

  constructor(
    private readonly pool: pg.Pool,
    o: { holder?: string; leaseSecs?: number } = {},
  ) {
    this.holder = o.holder ?? `${process.pid}-${randomBytes(6).toString('hex')}`;
    this.leaseSecs = o.leaseSecs ?? 600;
  }

  /** Take the file's lease; false while another replica's lease on it is live. */
  async take(key: string): Promise<boolean> {
    const { rowCount } = await this.pool.query(
      `INSERT INTO upload_locks (file_key, holder, until) VALUES ($1, $2, now() + make_interval(secs => $3))
       ON CONFLICT (file_key) DO UPDATE SET holder = EXCLUDED.holder, until = EXCLUDED.until
       WHERE upload_locks.until < now() OR upload_locks.holder = EXCLUDED.holder`,
      [key, this.holder, this.leaseSecs],
    );
    return rowCount === 1;
  }

  /**
   * Leases this holder left behind when it died: with a fixed `replicas.replica_id` a restarted replica is the
   * same holder, and frees its files at once instead of after the lease (called at start, before any upload).
   */
  async releaseMine(): Promise<number> {
    const { rowCount } = await this.pool.query('DELETE FROM upload_locks WHERE holder = $1', [this.holder]);
    return rowCount ?? 0;
  }

  async release(key: string): Promise<void> {
    await this.pool.query('DELETE FROM upload_locks WHERE file_key = $1 AND holder = $2', [key, this.holder]);
  }

  /** Run `fn` holding the file's lease; `busy()` when another replica holds it. The lease is released whatever happens. */
  async with<T>(key: string, fn: () => Promise<T>, busy: () => Promise<T>): Promise<T> {
    if (!(await this.take(key))) return busy();
    try {
      return await fn();
    } finally {
      await this.release(key).catch(() => undefined);
    }
  }
}
