/**
 * The small, bounded state of the node (DESIGN.md "Data on disk"): lowdb over
 * `<data_dir>/state.json`. Nothing unbounded goes in here: lowdb rewrites the
 * whole file on every write. Writes are serialised and atomic.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Low } from 'lowdb';
import type { Adapter } from 'lowdb';
import { writeFileAtomic } from './atomic.js';

export interface StateData {
  /** 4 hex digits chosen once per installation; part of every job_uid. */
  installation_hex: string;
  last_job_number: number;
}

/** A lowdb adapter whose writes are durable (fsync + rename + fsync dir). */
class DurableJsonFile<T> implements Adapter<T> {
  constructor(private readonly file: string) {}
  async read(): Promise<T | null> {
    if (!existsSync(this.file)) return null;
    const text = readFileSync(this.file, 'utf8');
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw new Error(`${this.file} is not valid JSON (${(e as Error).message}); move it aside to start afresh`);
    }
  }
  async write(data: T): Promise<void> {
    await writeFileAtomic(this.file, JSON.stringify(data, null, 2));
  }
}

export class StateStore {
  private readonly db: Low<StateData>;
  private queue: Promise<void> = Promise.resolve();

  private constructor(file: string) {
    this.db = new Low<StateData>(new DurableJsonFile<StateData>(file), {
      installation_hex: randomBytes(2).toString('hex'),
      last_job_number: 0,
    });
  }

  static async open(dataDir: string): Promise<StateStore> {
    const s = new StateStore(path.join(dataDir, 'state.json'));
    await s.db.read();
    s.db.data = Object.assign({ installation_hex: randomBytes(2).toString('hex'), last_job_number: 0 }, s.db.data);
    await s.db.write();
    return s;
  }

  get data(): Readonly<StateData> {
    return this.db.data;
  }

  /** Change the state and write it; writes happen one at a time, in order. */
  update(fn: (s: StateData) => void): Promise<void> {
    const run = this.queue.then(async () => {
      fn(this.db.data);
      await this.db.write();
    });
    this.queue = run.catch(() => undefined);
    return run;
  }
}
