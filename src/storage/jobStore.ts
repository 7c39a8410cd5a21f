/**
 * Jobs on disk: one small JSON file per job, `<data_dir>/jobs/<number>.json`,
 * written atomically. Jobs are read on demand (not all loaded at start), so
 * a long history costs nothing at start-up; the job counter lives in the
 * state file. Only one job runs at a time, so only the latest job can have
 * been running when the daemon died.
 */
import { mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import type { JobRecord } from '../core/model.js';
import type { JobRepository } from '../core/ports.js';
import { parseJobUid } from '../core/ids.js';
import { writeFileAtomic } from './atomic.js';
import type { StateStore } from './state.js';

export class FileJobRepository implements JobRepository {
  private readonly dir: string;
  /** The latest job, kept in memory: it is the one read and written most. */
  private latestJob: JobRecord | undefined;

  constructor(
    dataDir: string,
    private readonly state: StateStore,
    private readonly nodeId: string,
  ) {
    this.dir = path.join(dataDir, 'jobs');
    mkdirSync(this.dir, { recursive: true });
    const last = this.state.data.last_job_number;
    this.latestJob = last > 0 ? this.read(last) : undefined;
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

  async save(job: JobRecord): Promise<void> {
    if (!this.latestJob || job.number >= this.latestJob.number) this.latestJob = job;
    await writeFileAtomic(this.file(job.number), JSON.stringify(job));
  }

  async nextNumber(): Promise<number> {
    const n = this.state.data.last_job_number + 1;
    await this.state.update((s) => {
      s.last_job_number = n;
    });
    return n;
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
