/**
 * Jobs on disk: one small JSON file per job, `<data_dir>/jobs/<number>.json`,
 * written atomically. Jobs are read on demand (not all loaded at start), so
 * a long history costs nothing at start-up; the job counter lives in the
 * state file, written beside the new job's file rather than before it (a start
 * waits for one durable write, not two in a row: on a loaded node each is
 * hundreds of ms, docs/queue.md), so at open the counter is the state file's or
 * the highest job file's, whichever is higher. Only one job runs at a time, so
 * only the latest job can have been running when the daemon died.
 *
 * The store owns its writes: saves of one job go through a promise chain, so
 * they land in the order they were made (two atomic renames racing could
 * otherwise leave the older state on disk), and saves queued behind a write
 * collapse into one write of the newest state. `flush()` resolves once every
 * save made before it has landed; `close()` flushes and refuses later saves,
 * so nothing of this daemon lands after the next one has started.
 *
 * Idempotency keys (v2 run_tests' `Idempotency-Key`) are looked up among the last KEY_LOOKBACK jobs, indexed in
 * memory on the first lookup and kept up to date by every save: a key is for retrying a start that lost its
 * answer, minutes later, not months.
 */
import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { JobRecord } from '../core/model.js';
import type { JobRepository } from '../core/ports.js';
import { FarmError } from '../core/errors.js';
import { parseJobUid } from '../core/ids.js';
import { writeFileAtomic } from './atomic.js';
import { isDiskFull, type StateStore } from './state.js';

export interface FileJobRepositoryOptions {
  /** How a job file is written (default: writeFileAtomic); tests slow it down. */
  write?: (file: string, text: string) => Promise<void>;
}

/** The write queue of one job file. */
/** How many of the newest jobs an `Idempotency-Key` is looked up in. */
export const KEY_LOOKBACK = 1000;

const keyOf = (username: string, key: string) => `${username}\n${key}`;

interface Slot {
  /** The newest state asked for, as JSON (taken when save was called: the record keeps changing). */
  text: string;
  /** Versions: asked for, and landed on disk. */
  asked: number;
  landed: number;
  chain: Promise<void>;
}

export class FileJobRepository implements JobRepository {
  private readonly dir: string;
  /** The latest job, kept in memory: it is the one read and written most. */
  private latestJob: JobRecord | undefined;
  private readonly slots = new Map<number, Slot>();
  private readonly write: (file: string, text: string) => Promise<void>;
  private closed = false;
  /** `username\nkey` -> job number, over the last KEY_LOOKBACK jobs; built on the first findByKey. */
  private keys: Map<string, number> | undefined;
  /** The highest job number given out (the state file's may lag behind it while its write is on its way). */
  private last: number;

  constructor(
    dataDir: string,
    private readonly state: StateStore,
    private readonly nodeId: string,
    opts: FileJobRepositoryOptions = {},
  ) {
    this.dir = path.join(dataDir, 'jobs');
    this.write = opts.write ?? writeFileAtomic;
    mkdirSync(this.dir, { recursive: true });
    // A job saved while its number's state write had not landed yet (the daemon stopped between the two): its file counts.
    this.last = Math.max(this.state.data.last_job_number, highestJobFile(this.dir));
    this.latestJob = this.last > 0 ? this.read(this.last) : undefined;
  }

  get(jobUid: string): JobRecord | undefined {
    const p = parseJobUid(jobUid);
    if (!p || p.nodeId !== this.nodeId || p.hex !== this.state.data.installation_hex) return undefined;
    if (this.latestJob?.number === p.number) return this.latestJob;
    return this.read(p.number);
  }

  latest(): JobRecord | undefined {
    return this.latestJob;
  }

  running(): JobRecord[] {
    return this.latestJob?.status === 'running' ? [this.latestJob] : [];
  }

  findByKey(username: string, key: string): JobRecord | undefined {
    if (!this.keys) {
      this.keys = new Map();
      const last = this.last;
      for (let n = Math.max(1, last - KEY_LOOKBACK + 1); n <= last; n++) {
        const job = n === this.latestJob?.number ? this.latestJob : this.read(n);
        if (job?.idempotency_key !== undefined) this.keys.set(keyOf(job.username, job.idempotency_key), n);
      }
    }
    const n = this.keys.get(keyOf(username, key));
    if (n === undefined || n <= this.last - KEY_LOOKBACK) return undefined;
    return n === this.latestJob?.number ? this.latestJob : this.read(n);
  }

  save(job: JobRecord): Promise<void> {
    if (this.closed) return Promise.reject(new Error(`job store closed: job ${job.job_uid} not saved`));
    const previous = this.latestJob;
    if (!previous || job.number >= previous.number) this.latestJob = job;
    if (job.idempotency_key !== undefined) this.keys?.set(keyOf(job.username, job.idempotency_key), job.number);
    let slot = this.slots.get(job.number);
    if (!slot) {
      slot = { text: '', asked: 0, landed: 0, chain: Promise.resolve() };
      this.slots.set(job.number, slot);
    }
    const s = slot;
    s.text = JSON.stringify(job);
    const version = ++s.asked;
    const run = s.chain.then(async () => {
      if (s.landed >= version) return; // a later state already landed
      const [text, v] = [s.text, s.asked];
      await this.write(this.file(job.number), text).catch((e: unknown) => {
        // A job whose file never landed is no job (its start fails here): the latest is the one before it again.
        if (this.latestJob === job && !existsSync(this.file(job.number))) this.latestJob = previous === job ? undefined : previous;
        // The client hears "disk full" (507), not an internal error: this is the start's one durable write (nextNumber's is not awaited).
        throw isDiskFull(e) ? new FarmError('storage_full', 'no space left on the data disk to save the job; free some space') : e;
      });
      s.landed = v;
    });
    const chain = run.catch(() => undefined);
    s.chain = chain;
    void chain.then(() => {
      if (s.chain === chain && this.slots.get(job.number) === s) this.slots.delete(job.number);
    });
    return run;
  }

  async flush(): Promise<void> {
    // Again while saves were queued during the wait.
    for (;;) {
      const chains = [...this.slots.values()].map((s) => s.chain);
      if (chains.length === 0) return;
      await Promise.all(chains);
      if ([...this.slots.values()].every((s) => chains.includes(s.chain))) return;
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.flush();
  }

  /**
   * The next job's number, given at once. The state file records it on its own write queue, not awaited here: the job's
   * own file, saved next, is what a restart reads it back from (the constructor); a full disk is reported by that save.
   */
  nextNumber(): Promise<number> {
    const n = ++this.last;
    this.state
      .update((s) => {
        s.last_job_number = Math.max(s.last_job_number, n);
      })
      .catch(() => undefined);
    return Promise.resolve(n);
  }

  private file(n: number) {
    return path.join(this.dir, `${n}.json`);
  }

  private read(n: number): JobRecord | undefined {
    try {
      return JSON.parse(readFileSync(this.file(n), 'utf8')) as JobRecord;
    } catch {
      return undefined;
    }
  }
}

/** The highest `<n>.json` in the jobs folder, 0 when there is none. */
function highestJobFile(dir: string): number {
  let max = 0;
  for (const name of readdirSync(dir)) {
    const m = /^(\d{1,15})\.json$/.exec(name);
    if (m) max = Math.max(max, Number(m[1]));
  }
  return max;
}
