/**
 * Node-use policy, in one place for v1 and v2: who may use the node and
 * when (licence, reservation, busy, online), what counts as a use (the last
 * use is recorded here, not by each handler) and when the owner of an
 * interrupted reservation is told. HTTP handlers validate, make one call
 * here and present what it returns. Choices are in docs/reservations.md.
 */
import { FarmError } from './errors.js';
import type { EventSink } from './events.js';
import type { JobService } from './jobs.js';
import type { JobRecord } from './model.js';
import type { NodeService, NodeState } from './node.js';
import type { CaptureHealth, FrameSource, TestPack } from './ports.js';
import { chooseRemote } from './remoteControl.js';
import { inMaintenance, parseMaintenanceRequest, type MaintenanceService, type MaintenanceState } from './maintenance.js';
import { formatNotice, type InterruptionNotice, type ReservationRecord, type ReservationService, type ReserveBody } from './reservations.js';
import type { RunRequest } from './runRequest.js';

/** Who is asking, and through which API. */
export interface Caller {
  /** The authenticated user; undefined for an anonymous (v1) client. */
  user: string | undefined;
  /** v1 and v2 differ in the remote-control rule, and only v2 answers carry notices. */
  api: 'v1' | 'v2';
}

/** An answer plus the interruption notices the caller is shown with it (each once). */
export interface Noticed<T> {
  value: T;
  notices: InterruptionNotice[];
}

export interface NodePolicyDeps {
  nodeId: string;
  jobs: Pick<JobService, 'runTests' | 'startedWithKey' | 'stop' | 'current' | 'isRunning'>;
  reservations: ReservationService;
  node: Pick<NodeService, 'licenceExpired' | 'recordUse' | 'licenceExpiry' | 'stateOf'>;
  /** The node is online when it has a picture (or has no capture configured). */
  health: () => CaptureHealth;
  /** Why the failed health check holds the node back; null when it does not (core/healthCheck.ts). */
  healthProblem?: () => string | null;
  testPack: Pick<TestPack, 'resolve' | 'config' | 'remoteControls'>;
  keys: { press(key: string, opts: { remote: string; testPackSha: string }): Promise<void> };
  frames: Pick<FrameSource, 'screenshotPng' | 'thumbnailJpeg'>;
  /** `key.pressed` for manual presses goes here (docs/events.md). */
  events?: EventSink;
  /** The node's maintenance (core/maintenance.ts); absent: never in maintenance. */
  maintenance?: MaintenanceService;
}

export class NodePolicy {
  constructor(private readonly d: NodePolicyDeps) {}

  /**
   * Start a job. 403 licence expired or reserved by another, 409 busy, 503 offline, 503 health check failed
   * (in that order), then the test pack's 400/404. With an Idempotency-Key `key` the caller already started a job
   * with (or is starting it now): that job, whatever the node's state, and nothing started.
   */
  async runTests(caller: Caller, req: RunRequest, key?: string): Promise<Noticed<JobRecord>> {
    const prior = key === undefined ? undefined : this.d.jobs.startedWithKey(caller.user ?? 'anonymous', key);
    if (prior) return this.used(caller, await prior);
    if (this.d.node.licenceExpired()) {
      throw new FarmError('forbidden', `the licence of node ${this.d.nodeId} expired on ${this.d.node.licenceExpiry}; renew it (node.licence_expiry in the config)`);
    }
    const maintenance = this.d.maintenance?.current() ?? null;
    if (maintenance !== null) throw inMaintenance(this.d.nodeId, maintenance);
    this.assertFree(caller, 'run tests');
    const running = this.d.jobs.isRunning();
    if (running) {
      const uid = this.d.jobs.current()?.job_uid ?? 'starting';
      throw new FarmError('conflict', `a test job is already running (${uid}); stop it or wait for it to end`);
    }
    const health = this.d.health();
    if (!health.online) throw new FarmError('device_unavailable', `the node is offline: ${health.reason ?? 'unknown reason'}`);
    const unhealthy = this.d.healthProblem?.() ?? null;
    if (unhealthy !== null) {
      throw new FarmError('device_unavailable', `the node is not available: ${unhealthy}; it is checked again until the health check passes (docs/health-checks.md)`);
    }
    const job = await this.d.jobs.runTests(req, caller.user ?? 'anonymous', caller.api, key);
    return this.used(caller, job);
  }

  /** Stop a job (200 stopped / 202 stopping). 403 when another user holds the node. */
  async stop(caller: Caller, jobUid: string): Promise<Noticed<{ job: JobRecord; stopped: boolean }>> {
    this.assertFree(caller, 'stop jobs');
    return this.used(caller, await this.d.jobs.stop(jobUid));
  }

  /**
   * Manual remote control: press `key` on the remote `remote` (v2 rule) of the
   * test pack at `revision` (default: the current job's commit, else HEAD).
   */
  async press(caller: Caller, key: string, opts: { revision: string | undefined; remote: string | null }): Promise<Noticed<void>> {
    this.assertFree(caller, 'use the remote control');
    const sha = (await this.d.testPack.resolve(opts.revision ?? this.d.jobs.current()?.test_pack_sha ?? 'HEAD')).sha;
    const remote = (await chooseRemote(this.d.testPack, sha, opts.remote, 'v2')) as string; // v2 never answers null
    await this.d.keys.press(key, { remote, testPackSha: sha });
    this.d.events?.publish('key.pressed', { key, remote, hold_ms: 0, source: 'api', username: caller.user ?? null, result_id: null });
    return this.used(caller, undefined);
  }

  /** A screenshot (PNG) or thumbnail (JPEG) of the device under test; a use of the node. */
  async picture(caller: Caller, kind: 'screenshot' | 'thumbnail'): Promise<Buffer> {
    const image = kind === 'screenshot' ? await this.d.frames.screenshotPng() : await this.d.frames.thumbnailJpeg();
    this.recordUse(caller);
    return image;
  }

  /** Reserve nodes (all or none); a use of each. */
  async reserve(caller: Caller, body: ReserveBody): Promise<Noticed<ReservationRecord[]>> {
    const made = await this.d.reservations.reserve(this.authenticated(caller), body);
    this.recordUse(caller);
    return { value: made, notices: this.notices(caller, {}) };
  }

  /** Extend a reservation; a refusal tells the owner why it ended if it was interrupted. */
  async extend(caller: Caller, id: number, durationSecs: number): Promise<void> {
    try {
      await this.d.reservations.extend(this.authenticated(caller), id, durationSecs);
    } catch (e) {
      throw this.withNotices(e, caller, { reservationId: id });
    }
  }

  async endReservation(caller: Caller, id: number): Promise<void> {
    await this.d.reservations.end(this.authenticated(caller), id);
  }

  async interrupt(caller: Caller, id: number, message: string): Promise<void> {
    await this.d.reservations.interrupt(this.authenticated(caller), id, message);
  }

  /**
   * Put the node in maintenance or take it out (`{"on": true, "message": "..."}` / `{"on": false}`); the
   * role check (admin) is the HTTP layer's. Answers the maintenance now (null: in service).
   */
  async setMaintenance(caller: Caller, body: unknown): Promise<MaintenanceState | null> {
    if (!this.d.maintenance) throw new FarmError('not_found', 'this node has no maintenance switch');
    const req = parseMaintenanceRequest(body);
    const { after } = await this.d.maintenance.set(req, caller.user ?? 'anonymous');
    return after;
  }

  /** The node's state (404 for another node id), with the caller's notices about it. */
  async status(caller: Caller, nodeId: string = this.d.nodeId): Promise<Noticed<NodeState>> {
    const state = await this.d.node.stateOf(nodeId);
    return { value: state, notices: this.notices(caller, { nodeId: this.d.nodeId }) };
  }

  // ------------------------------------------------------------ internals

  /** 403 when another user holds the node; the caller's own pending notices go into the message. */
  private assertFree(caller: Caller, what: string): void {
    try {
      this.d.reservations.assertCanUse(caller.user, this.d.nodeId, what);
    } catch (e) {
      throw this.withNotices(e, caller, { nodeId: this.d.nodeId });
    }
  }

  private withNotices(e: unknown, caller: Caller, about: { nodeId?: string; reservationId?: number }): unknown {
    if (!(e instanceof FarmError)) return e;
    const notices = caller.user ? this.d.reservations.takeNotice(caller.user, about) : [];
    return notices.length ? new FarmError(e.code, `${e.message} ${notices.map(formatNotice).join(' ')}`, e.details) : e;
  }

  /** Record the use and attach the caller's notices about the node. */
  private used<T>(caller: Caller, value: T): Noticed<T> {
    this.recordUse(caller);
    return { value, notices: this.notices(caller, { nodeId: this.d.nodeId }) };
  }

  /** An anonymous caller is nobody in particular: nothing to record. */
  private recordUse(caller: Caller): void {
    if (caller.user) this.d.node.recordUse(caller.user);
  }

  /** v1 answers have no place for notices: leave them pending for the owner's next v2 call. */
  private notices(caller: Caller, about: { nodeId?: string; reservationId?: number }): InterruptionNotice[] {
    return caller.user && caller.api === 'v2' ? this.d.reservations.takeNotice(caller.user, about) : [];
  }

  /** Reservations are v2 only, behind the token guard: there is always a user. */
  private authenticated(caller: Caller): string {
    if (!caller.user) throw new FarmError('forbidden', 'reservations need a v2 access token');
    return caller.user;
  }
}
