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
import type { NodeUsage, NodeUsageStore } from '../core/node.js';
import type { ReservationRecord, ReservationState, ReservationStore } from '../core/reservations.js';
import { writeFileAtomic } from './atomic.js';

export interface StateData {
  /** 4 hex digits chosen once per installation; part of every job_uid. */
  installation_hex: string;
  last_job_number: number;
  /** The reservation id counter: ids are never reused. */
  last_reservation_id: number;
  /** Active reservations and the most recently ended ones (bounded by the service). */
  reservations: ReservationRecord[];
  /** Who used the node last, and when; null if nobody ever did. */
  node_usage: NodeUsage | null;
}

/** Fields a state file written by an older version lacks. */
const defaults = (): StateData => ({
  installation_hex: randomBytes(2).toString('hex'),
  last_job_number: 0,
  last_reservation_id: 0,
  reservations: [],
  node_usage: null,
});

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
    this.db = new Low<StateData>(new DurableJsonFile<StateData>(file), defaults());
  }

  static async open(dataDir: string): Promise<StateStore> {
    const s = new StateStore(path.join(dataDir, 'state.json'));
    await s.db.read();
    s.db.data = Object.assign(defaults(), s.db.data);
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

/** Reservations persisted in the state file (the service keeps them bounded). */
export class StateReservationStore implements ReservationStore {
  constructor(private readonly state: StateStore) {}
  load(): ReservationState {
    const d = this.state.data;
    return { last_reservation_id: d.last_reservation_id, reservations: structuredClone(d.reservations) };
  }
  save(next: ReservationState): Promise<void> {
    return this.state.update((s) => {
      s.last_reservation_id = next.last_reservation_id;
      s.reservations = next.reservations;
    });
  }
}

/** The node's last use, persisted in the state file. */
export class StateNodeUsageStore implements NodeUsageStore {
  constructor(private readonly state: StateStore) {}
  load(): NodeUsage | null {
    return this.state.data.node_usage;
  }
  save(usage: NodeUsage): Promise<void> {
    return this.state.update((s) => {
      s.node_usage = { ...usage };
    });
  }
}
