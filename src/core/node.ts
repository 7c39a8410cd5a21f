/**
 * The state behind the v2 Node object (spec "Node (v2)") for this one node:
 * availability and its reason, capture health, the node's own config file
 * from the test pack's main branch, addresses, the current or last job and
 * the result whose log it links, last use, the active reservation. URLs and
 * HTML are added by the HTTP presenter (http/presenters.ts). Everything it
 * reads comes in as a function or a port, so this module stays pure; the
 * reason strings are listed in docs/reservations.md.
 */
import { maintenanceDetail, type MaintenanceState } from './maintenance.js';
import { AVAILABLE, availabilityText, type Availability } from './availability.js';
import { notFound } from './errors.js';
import type { JobRecord } from './model.js';
import type { CaptureHealth, IniConfig, Logger, TestPack } from './ports.js';
import { systemClock, type Clock, type ReservationRecord } from './reservations.js';

/** The node's last use, persisted. */
export interface NodeUsage {
  user: string;
  /** ISO 8601. */
  time: string;
}

export interface NodeUsageStore {
  load(): NodeUsage | null;
  save(usage: NodeUsage): Promise<void>;
}

/** The config's `node` section. */
export interface NodeSettings {
  /** `YYYY-MM-DD`; the licence is valid through the end of that day, UTC. */
  licence_expiry: string;
  external_ip_address: string | null;
  geoip_city: string | null;
  geoip_country: string | null;
}

/** One address as `os.networkInterfaces()` lists it (family is a number on some Node versions). */
export interface InterfaceAddress {
  address: string;
  family: string | number;
  internal: boolean;
  scopeid?: number;
}

/** The node as the domain knows it; http/presenters.ts makes the spec's Node object of it. */
export interface NodeState {
  node_id: string;
  available: boolean;
  not_available_reason: string | null;
  /** Not in the v2 Node object (presenters leave it out): the reason as a kind and a detail, for the portal. */
  availability: Availability;
  online: boolean;
  config: IniConfig;
  device_type: string | null;
  friendly_name: string | null;
  external_ip_address: string | null;
  local_ip_address: string | null;
  geoip_city: string | null;
  geoip_country: string | null;
  /** The current job, or the last one; null if the node never ran one. */
  job: JobRecord | null;
  /** The result whose log the job links: the run in progress, else the job's latest; null before its first run starts. */
  job_result_id: string | null;
  last_used_by: string | null;
  last_used_time: string | null;
  licence_expiry: string;
  reservation: ReservationRecord | null;
  /** Not in the spec: present only while the test pack cannot be fetched (docs/robustness.md). */
  test_pack_problem?: string;
  /** Not in the spec: present only while runs are not recorded on video though it is configured ("no video: disk full"). */
  video_problem?: string;
  /** Not in the spec: present only while an administrator holds the node in maintenance (core/maintenance.ts). */
  maintenance?: MaintenanceState;
}

export interface NodeServiceOptions {
  nodeId: string;
  settings: NodeSettings;
  /** Capture health: the node is online when it has a picture. */
  health: () => CaptureHealth;
  jobs: { current(): JobRecord | undefined; isRunning(): boolean };
  /** The id of the job's latest recorded result; undefined before its first is recorded. */
  latestResultId: (job: JobRecord) => string | undefined;
  testPack: Pick<TestPack, 'resolve' | 'readFile' | 'problem'>;
  /** INI text to `{ section: { key: value } }` (runner/iniConfig.ts). */
  parseIni: (text: string) => IniConfig;
  networkInterfaces: () => Record<string, InterfaceAddress[] | undefined>;
  reservations: { active(nodeId: string): ReservationRecord | undefined };
  usage: NodeUsageStore;
  /** Why the node's health check holds it back ("health check failed: ..."); null when it does not. */
  healthProblem?: () => string | null;
  /** The node's maintenance (core/maintenance.ts); null or absent: in service. */
  maintenance?: () => MaintenanceState | null;
  clock?: Clock;
  logger?: Logger;
  /** How long status waits for the test pack before answering with the last config it read; default 3 s. */
  configWaitMs?: number;
}

/** Writes of the last use are at most this often (a busy client touches the node many times a second). */
export const USAGE_WRITE_INTERVAL_MS = 1000;

export class NodeService {
  private readonly clock: Clock;
  private usage: NodeUsage | null;
  private lastWrite = Number.NEGATIVE_INFINITY;
  private writeTimer: unknown;
  private writing: Promise<void> = Promise.resolve();
  /** The node config of the newest main-branch SHA read, and that SHA. */
  private config: { sha: string; value: IniConfig } | undefined;
  private reading: Promise<IniConfig> | undefined;

  constructor(private readonly o: NodeServiceOptions) {
    this.clock = o.clock ?? systemClock;
    this.usage = o.usage.load();
  }

  /** The node's path in the test pack: `config/test-farm/<node_id>.conf`. */
  get configPath(): string {
    return `config/test-farm/${this.o.nodeId}.conf`;
  }

  /** `node.licence_expiry` of the config: `YYYY-MM-DD`. */
  get licenceExpiry(): string {
    return this.o.settings.licence_expiry;
  }

  /** The node's state now. */
  async state(): Promise<NodeState> {
    const o = this.o;
    const health = o.health();
    const config = await this.nodeConfig();
    const res = o.reservations.active(o.nodeId);
    const availability = this.availabilityNow(health, res);
    const reason = availabilityText(availability);
    const section = (name: string) => config[name] ?? {};
    const job = o.jobs.current() ?? null;
    return {
      node_id: o.nodeId,
      available: reason === null,
      not_available_reason: reason,
      availability,
      online: health.online,
      config,
      device_type: section('device_under_test')['device_type'] ?? null,
      friendly_name: section('node')['friendly_name'] ?? null,
      external_ip_address: o.settings.external_ip_address,
      local_ip_address: localIpAddress(o.networkInterfaces()),
      geoip_city: o.settings.geoip_city,
      geoip_country: o.settings.geoip_country,
      job,
      job_result_id: job ? this.resultOf(job) : null,
      last_used_by: this.usage?.user ?? null,
      last_used_time: this.usage?.time ?? null,
      licence_expiry: o.settings.licence_expiry,
      reservation: res ?? null,
      ...testPackProblem(o.testPack),
      ...(health.video !== undefined && { video_problem: health.video }),
      ...maintenanceOf(o),
    };
  }

  /**
   * Whether the node would take a job now and why not, without reading the
   * test pack's node config (cheap: metrics read it at every scrape).
   */
  availability(): { available: boolean; reason: string | null; online: boolean; reserved: boolean; running: boolean } {
    const health = this.o.health();
    const res = this.o.reservations.active(this.o.nodeId);
    const reason = availabilityText(this.availabilityNow(health, res));
    return { available: reason === null, reason, online: health.online, reserved: res !== undefined, running: this.o.jobs.isRunning() };
  }

  /** GET /api/v2/nodes/<id>: this node's state, or 404 for any other id. */
  async stateOf(nodeId: string): Promise<NodeState> {
    if (nodeId !== this.o.nodeId) throw notFound(`unknown node_id ${JSON.stringify(nodeId)}; this node is ${this.o.nodeId}`);
    return this.state();
  }

  /** True once the licence's expiry day (UTC) has passed; run_tests then answers 403. */
  licenceExpired(): boolean {
    return new Date(this.clock.now()).toISOString().slice(0, 10) > this.o.settings.licence_expiry;
  }

  /**
   * Note a use of the node (run, stop, press, reserve, screenshot, ...).
   * Seen at once in the status; written at most once a second, the latest use winning.
   */
  recordUse(user: string): void {
    this.usage = { user, time: new Date(this.clock.now()).toISOString() };
    if (this.writeTimer !== undefined) return; // a write is already due; it takes the latest use
    const wait = this.lastWrite + USAGE_WRITE_INTERVAL_MS - this.clock.now();
    if (wait <= 0) this.writeUsage();
    else this.writeTimer = this.clock.setTimer(() => this.writeUsage(), wait);
  }

  /** Write a pending last use now (the daemon is stopping). */
  async flush(): Promise<void> {
    if (this.writeTimer !== undefined) this.writeUsage();
    await this.writing;
  }

  private writeUsage(): void {
    if (this.writeTimer !== undefined) this.clock.clearTimer(this.writeTimer);
    this.writeTimer = undefined;
    this.lastWrite = this.clock.now();
    const usage = this.usage;
    if (!usage) return;
    this.writing = this.o.usage.save(usage).catch((e: unknown) => this.o.logger?.error({ err: e }, 'could not save the last use of the node'));
  }

  /** Reasons in order of precedence; exact strings (availabilityText) in docs/reservations.md. */
  private availabilityNow(health: CaptureHealth, res: ReservationRecord | undefined): Availability {
    if (!health.online) return { kind: 'offline', detail: health.reason ?? 'no picture from the device under test' };
    if (this.licenceExpired()) return { kind: 'licence_expired', detail: this.o.settings.licence_expiry };
    const maintenance = this.o.maintenance?.() ?? null;
    if (maintenance !== null) return { kind: 'maintenance', detail: maintenanceDetail(maintenance) };
    const unhealthy = this.o.healthProblem?.() ?? null;
    if (unhealthy !== null) return { kind: 'unhealthy', detail: unhealthy };
    if (res) return { kind: 'reserved', detail: `${res.username} (reservation ${res.reservation_id})` };
    if (this.o.jobs.isRunning()) return { kind: 'running', detail: this.o.jobs.current()?.job_uid ?? 'starting' };
    return AVAILABLE;
  }

  /** The run in progress is the one to watch; between runs and after the job, its latest result. */
  private resultOf(job: JobRecord): string | null {
    return job.current_run?.result_id ?? this.o.latestResultId(job) ?? null;
  }

  /**
   * The node config at the main branch's tip, cached per SHA. A slow or
   * unreachable test pack does not hold the status up: after `configWaitMs`
   * it answers with the last config read (or `{}`), and the read carries on.
   */
  private async nodeConfig(): Promise<IniConfig> {
    this.reading ??= this.readConfig().finally(() => (this.reading = undefined));
    const fallback = () => this.config?.value ?? {};
    let timer: unknown;
    const late = new Promise<IniConfig>((resolve) => (timer = this.clock.setTimer(() => resolve(fallback()), this.o.configWaitMs ?? 3000)));
    try {
      return await Promise.race([this.reading.catch(fallback), late]);
    } finally {
      this.clock.clearTimer(timer);
    }
  }

  private async readConfig(): Promise<IniConfig> {
    try {
      const { sha } = await this.o.testPack.resolve('HEAD');
      if (this.config?.sha === sha) return this.config.value;
      const text = await this.o.testPack.readFile(sha, this.configPath);
      const value = text === undefined ? {} : this.o.parseIni(text);
      this.config = { sha, value };
      return value;
    } catch (e) {
      this.o.logger?.warn({ err: e, path: this.configPath }, 'could not read the node config from the test pack');
      throw e;
    }
  }
}

/** The first non-internal IPv4 address; else the first IPv6 (global before link-local); else null. */
export function localIpAddress(ifaces: Record<string, InterfaceAddress[] | undefined>): string | null {
  const all = Object.values(ifaces).flatMap((list) => list ?? []).filter((a) => !a.internal);
  const v4 = all.find((a) => a.family === 'IPv4' || a.family === 4);
  if (v4) return v4.address;
  const v6 = all.filter((a) => a.family === 'IPv6' || a.family === 6);
  return (v6.find((a) => !a.scopeid) ?? v6[0])?.address ?? null;
}

const maintenanceOf = (o: NodeServiceOptions): { maintenance?: MaintenanceState } => {
  const m = o.maintenance?.() ?? null;
  return m === null ? {} : { maintenance: { ...m } };
};

const testPackProblem = (tp: Pick<TestPack, 'problem'>): { test_pack_problem?: string } => {
  const problem = tp.problem?.();
  return problem === undefined ? {} : { test_pack_problem: problem };
};
