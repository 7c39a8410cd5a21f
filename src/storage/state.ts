/**
 * The small, bounded state of the node (DESIGN.md "Data on disk"): lowdb over
 * `<data_dir>/state.json`. Nothing unbounded goes in here: lowdb rewrites the
 * whole file on every write. Writes are serialised and atomic.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Low } from 'lowdb';
import type { Adapter } from 'lowdb';
import { FarmError } from '../core/errors.js';
import type { JobRecord } from '../core/model.js';
import type { MaintenanceState, MaintenanceStore } from '../core/maintenance.js';
import type { NodeUsage, NodeUsageStore } from '../core/node.js';
import type { Logger } from '../core/ports.js';
import type { ReservationRecord, ReservationState, ReservationStore } from '../core/reservations.js';
import { writeFileAtomic } from './atomic.js';
import { keepCorrupt, rebuildJob, scanDiskIdentity } from './recover.js';
import { silentLogger } from '../logger.js';

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
  /** The node's maintenance (core/maintenance.ts); null: in service. An older version ignores the field. */
  maintenance: MaintenanceState | null;
}

/** Fields a state file written by an older version lacks. */
const defaults = (): StateData => ({
  installation_hex: randomBytes(2).toString('hex'),
  last_job_number: 0,
  last_reservation_id: 0,
  reservations: [],
  node_usage: null,
  maintenance: null,
});

/** Why a state file was not usable as it was read. */
class StateFileProblem extends Error {}

/**
 * The lowdb adapter of state.json. Reads parse and check the file (a torn or
 * wrong-shaped one throws StateFileProblem, for StateStore.open to recover);
 * writes are atomic and durable (temporary file, fsync, rename, fsync dir).
 */
class AtomicStateFile implements Adapter<StateData> {
  constructor(private readonly file: string) {}
  async read(): Promise<StateData | null> {
    let text: string;
    try {
      text = await readFile(this.file, 'utf8');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw e;
    }
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (e) {
      throw new StateFileProblem(`not valid JSON (${(e as Error).message})`);
    }
    const problem = problemOf(raw);
    if (problem) throw new StateFileProblem(problem);
    // Fields a state file written by an older version lacks take their defaults.
    return Object.assign(defaults(), raw as Partial<StateData>);
  }
  async write(data: StateData): Promise<void> {
    await writeFileAtomic(this.file, JSON.stringify(data, null, 2));
  }
}

export interface StateOpenOptions {
  /** Where a corrupt or recovered state is reported (error level). */
  logger?: Logger;
  /** Needed to rebuild a corrupt latest job file (its job_uid names the node). */
  nodeId?: string;
  now?: () => Date;
}

export class StateStore {
  private readonly db: Low<StateData>;
  private queue: Promise<void> = Promise.resolve();
  private closed = false;

  private constructor(file: string) {
    this.db = new Low<StateData>(new AtomicStateFile(file), defaults());
  }

  /**
   * Open `<dataDir>/state.json`. A torn or corrupt file is reported, kept as
   * `state.json.corrupt-<timestamp>` and recovered from jobs/ and results/
   * (never silently replaced by an empty state); so is a missing file when
   * jobs or results exist. Then a corrupt latest job file is rebuilt.
   */
  static async open(dataDir: string, opts: StateOpenOptions = {}): Promise<StateStore> {
    const file = path.join(dataDir, 'state.json');
    const log = opts.logger ?? silentLogger;
    const now = opts.now ?? (() => new Date());
    const s = new StateStore(file);
    const fresh = s.db.data;
    let problem: string | undefined;
    try {
      await s.db.read();
    } catch (e) {
      if (!(e instanceof StateFileProblem)) throw e;
      problem = e.message;
    }
    const found = problem === undefined && s.db.data !== fresh;
    if (!found) {
      s.db.data = recoverState(file, dataDir, log, now(), problem);
      try {
        await s.db.write();
      } catch (e) {
        // A full disk must not stop the daemon (under systemd: a restart loop); the state is written on its next change.
        if (!isDiskFull(e)) throw e;
        log.error({ file, err: e }, 'no space left to write state.json at start; going on with the state in memory');
      }
    }
    if (opts.nodeId) await recoverLatestJob(dataDir, opts.nodeId, s.db.data, log, now());
    return s;
  }
  get data(): Readonly<StateData> {
    return this.db.data;
  }

  /** Change the state and write it; writes happen one at a time, in order. Rejects after close. */
  update(fn: (s: StateData) => void): Promise<void> {
    if (this.closed) return Promise.reject(new Error('state store closed: change not saved'));
    const run = this.queue.then(async () => {
      fn(this.db.data);
      try {
        await this.db.write();
      } catch (e) {
        // The client hears "disk full" (507), not an internal error; the old file stays whole (atomic write).
        if (isDiskFull(e)) throw new FarmError('storage_full', 'no space left on the data disk to save the node state; free some space');
        throw e;
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  /** Wait for the writes under way, then refuse new ones (daemon stop). */
  async close(): Promise<void> {
    this.closed = true;
    await this.queue;
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

/** The node's maintenance, persisted in the state file (a restart keeps a node under repair out of service). */
export class StateMaintenanceStore implements MaintenanceStore {
  constructor(private readonly state: StateStore) {}
  load(): MaintenanceState | null {
    return this.state.data.maintenance;
  }
  save(m: MaintenanceState | null): Promise<void> {
    return this.state.update((s) => {
      s.maintenance = m && { ...m };
    });
  }
}

const isHex4 = (v: unknown): v is string => typeof v === 'string' && /^[0-9a-f]{4}$/.test(v);
const isCount = (v: unknown): v is number => typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;

const isMaintenance = (v: unknown): boolean => {
  const m = v as Partial<Record<string, unknown>> | null;
  return typeof m === 'object' && m !== null && typeof m.message === 'string' && typeof m.by === 'string' && typeof m.since === 'string';
};

/** Why a parsed state file cannot be trusted as it is, or undefined when it can. */
function problemOf(raw: unknown): string | undefined {
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return 'not a JSON object';
  const r = raw as Record<string, unknown>;
  if (!isHex4(r.installation_hex)) return 'installation_hex is missing or not 4 hex digits';
  if (!isCount(r.last_job_number)) return 'last_job_number is missing or not a count';
  if (r.last_reservation_id !== undefined && !isCount(r.last_reservation_id)) return 'last_reservation_id is not a count';
  if (r.reservations !== undefined && !Array.isArray(r.reservations)) return 'reservations is not a list';
  if (r.node_usage !== undefined && r.node_usage !== null && typeof r.node_usage !== 'object') return 'node_usage is not an object';
  if (r.maintenance !== undefined && r.maintenance !== null && !isMaintenance(r.maintenance)) return 'maintenance is not {message, by, since}';
  return undefined;
}

/**
 * The state when state.json was missing (`problem` undefined) or unusable:
 * defaults for a new installation, else rebuilt from jobs/ and results/
 * (and reported), the bad file kept aside.
 */
function recoverState(file: string, dataDir: string, log: Logger, now: Date, problem: string | undefined): StateData {
  const disk = scanDiskIdentity(dataDir);
  if (problem === undefined && disk.installation_hex === undefined && disk.max_job_number === 0) return defaults(); // a new installation
  const kept = problem === undefined ? undefined : keepCorrupt(file, now);
  const fresh = defaults();
  const recovered: StateData = {
    ...fresh,
    installation_hex: disk.installation_hex ?? fresh.installation_hex,
    last_job_number: disk.max_job_number,
    // Reservation ids were never above the count of reservations ever made; seconds since 1970 are far above it and keep growing.
    last_reservation_id: Math.floor(now.getTime() / 1000),
  };
  log.error(
    {
      file,
      problem: problem ?? 'missing while jobs or results exist',
      kept_as: kept ?? null,
      recovered: { installation_hex: recovered.installation_hex, last_job_number: recovered.last_job_number, ...disk.evidence },
      reset: ['reservations', 'node_usage'],
    },
    'state.json was unusable: rebuilt it from jobs/ and results/; reservations and node usage were reset',
  );
  return recovered;
}

/** A corrupt `jobs/<last>.json` is kept aside and rebuilt from the job's result folders. */
async function recoverLatestJob(dataDir: string, nodeId: string, st: StateData, log: Logger, now: Date): Promise<void> {
  const n = st.last_job_number;
  const file = path.join(dataDir, 'jobs', `${n}.json`);
  if (n === 0 || !existsSync(file)) return;
  let problem: string | undefined;
  try {
    const raw = JSON.parse(readFileSync(file, 'utf8')) as Partial<JobRecord> | null;
    if (typeof raw !== 'object' || raw === null || raw.number !== n || typeof raw.job_uid !== 'string' || !raw.result_counts) problem = 'not a job record';
  } catch (e) {
    problem = `not valid JSON (${(e as Error).message})`;
  }
  if (!problem) return;
  const kept = keepCorrupt(file, now);
  const rebuilt = rebuildJob(dataDir, nodeId, st.installation_hex, n, now);
  await writeFileAtomic(file, JSON.stringify(rebuilt.job));
  log.error(
    { file, problem, kept_as: kept, job: rebuilt.job.job_uid, results: rebuilt.results, in_flight: rebuilt.inFlight ?? null },
    'the latest job file was unusable: rebuilt it from its result folders',
  );
}

/** A write that failed for want of space (or quota) on the data disk. */
export function isDiskFull(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException).code;
  return code === 'ENOSPC' || code === 'EDQUOT';
}
