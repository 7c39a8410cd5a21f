/**
 * The daemon's domain services over its state (src/daemon.ts wires the rest):
 * the state file and the job store, the jobs, maintenance, reservations, the
 * node and its health check; and the recovery of the run a crash
 * interrupted, whose resource is the running job.
 */
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import type { FarmConfig } from '../config/schema.js';
import type { EventHub } from '../core/events.js';
import { HEALTH_CHECK_CATEGORY, HEALTH_CHECK_USER, HealthCheckService, healthCheckTestCase } from '../core/healthCheck.js';
import { JobService } from '../core/jobs.js';
import { maintenanceDetail, MaintenanceService } from '../core/maintenance.js';
import { NodeService } from '../core/node.js';
import type { CaptureHealth, FrameSource, Logger, RunControl, TestRunner, VideoRecorder } from '../core/ports.js';
import { parseResultQuery } from '../core/query.js';
import { ReservationService, systemClock } from '../core/reservations.js';
import type { GitTestPack } from '../runner/gitTestPack.js';
import { parseIniConfig } from '../runner/iniConfig.js';
import { endStaleTestProcess } from '../runner/processGroup.js';
import type { TestUser } from '../runner/testUser.js';
import type { ResourceStack } from '../service/resources.js';
import { FileJobRepository } from '../storage/jobStore.js';
import type { FileResultRepository } from '../storage/results/index.js';
import { StateMaintenanceStore, StateNodeUsageStore, StateReservationStore, StateStore } from '../storage/state.js';
import { reclaimInterruptedRuns } from './testUser.js';

/** What the domain services are built from. */
export interface CoreParts {
  cfg: FarmConfig;
  logger: Logger;
  stack: ResourceStack;
  testUser: TestUser | undefined;
  hub: EventHub;
  results: FileResultRepository;
  testPack: GitTestPack;
  runner: TestRunner;
  frames: FrameSource;
  video: VideoRecorder | undefined;
  control: RunControl;
  online: () => CaptureHealth;
}

export type Core = Awaited<ReturnType<typeof openCore>>;

/**
 * The state file and the job store (each closed once its writes landed: the next daemon on this data directory
 * reads them whole), the services over them, the node's last use (written when stopping) and the reservations'
 * timers.
 */
export async function openCore(p: CoreParts) {
  const { cfg, logger, stack } = p;
  const state = await stack.open('state', async () => {
    const s = await StateStore.open(cfg.data_dir, { logger: logger.child({ module: 'state' }), nodeId: cfg.node_id });
    return { value: s, close: () => s.close() };
  });
  const jobsRepo = await stack.open('job store', () => {
    const r = new FileJobRepository(cfg.data_dir, state, cfg.node_id);
    return { value: r, close: () => r.close() };
  });
  const late: { checks?: HealthCheckService } = {};
  const jobs = jobService(p, state, jobsRepo, late);
  const { maintenance, reservations } = reservationService(p, state, jobs);
  const node = nodeService(p, state, jobs, reservations, maintenance, late);
  // Watched from the end of the recovery (recoverRuns): runs recorded before (the interrupted one) are not counted.
  const checks = healthCheck(p, jobs, node, reservations, maintenance);
  stack.defer('node usage', () => node.flush());
  await stack.open('reservations', async () => {
    await reservations.start();
    return { value: reservations, close: () => reservations.stop() };
  });
  return { state, jobsRepo, jobs, maintenance, reservations, node, checks, watched: late };
}

function jobService(p: CoreParts, state: StateStore, jobsRepo: FileJobRepository, late: { checks?: HealthCheckService }): JobService {
  return new JobService({
    nodeId: p.cfg.node_id,
    installationHex: state.data.installation_hex,
    jobs: jobsRepo,
    results: p.results,
    testPack: p.testPack,
    runner: p.runner,
    frames: p.frames,
    video: p.video,
    control: p.control,
    logger: p.logger.child({ module: 'jobs' }),
    events: p.hub,
    settings: { defaultTimeoutSecs: p.cfg.runner.default_timeout_secs, stopResponseSecs: p.cfg.runner.stop_response_secs },
    // Runs recorded before the health check exists (the recovery) are not counted.
    onRecorded: (r) => late.checks?.observe(r),
  });
}

/** An administrator's maintenance switch (docs/api-notes.md, "Maintenance"), kept in state.json, and the reservations. */
function reservationService(p: CoreParts, state: StateStore, jobs: JobService) {
  const nodeId = p.cfg.node_id;
  const maintenance = new MaintenanceService({ store: new StateMaintenanceStore(state) });
  const maintained = (): string | null => {
    const m = maintenance.current();
    return m && maintenanceDetail(m);
  };
  const reservations = new ReservationService({
    store: new StateReservationStore(state),
    knownNodes: () => [nodeId],
    isBusy: (id) => id === nodeId && jobs.isRunning(),
    maintenance: (id) => (id === nodeId ? maintained() : null),
    logger: p.logger.child({ module: 'reservations' }),
    events: p.hub,
  });
  return { maintenance, reservations };
}

function nodeService(p: CoreParts, state: StateStore, jobs: JobService, reservations: ReservationService, maintenance: MaintenanceService, late: { checks?: HealthCheckService }): NodeService {
  return new NodeService({
    nodeId: p.cfg.node_id,
    settings: p.cfg.node,
    health: p.online,
    jobs,
    latestResultId: (j) => p.results.query(parseResultQuery({ filter: `job:${j.job_uid}` }, { limit: 1 }))[0]?.result_id,
    testPack: p.testPack,
    parseIni: parseIniConfig,
    networkInterfaces,
    reservations,
    usage: new StateNodeUsageStore(state),
    healthProblem: () => late.checks?.problem() ?? null,
    maintenance: () => maintenance.current(),
    logger: p.logger.child({ module: 'node' }),
  });
}

function healthCheck(p: CoreParts, jobs: JobService, node: NodeService, reservations: ReservationService, maintenance: MaintenanceService): HealthCheckService {
  const cfg = p.cfg;
  return new HealthCheckService({
    testCase: () => healthCheckTestCase(p.testPack, node.configPath, parseIniConfig),
    start: async (testCase) => {
      const req = { test_pack_revision: 'HEAD', test_cases: [testCase], category: HEALTH_CHECK_CATEGORY, soak: 'run once' as const, shuffle: false, remote_control: null, tags: {} };
      return (await jobs.runTests(req, HEALTH_CHECK_USER, 'v1')).job_uid;
    },
    whenEnded: (uid) => jobs.whenEnded(uid),
    // A node in maintenance is not checked either: it is under an administrator's hands.
    busy: () => jobs.isRunning() || reservations.active(cfg.node_id) !== undefined || !p.online().online || maintenance.current() !== null,
    settings: {
      afterInfrastructureErrors: cfg.health_check.after_infrastructure_errors,
      intervalSecs: cfg.health_check.interval_secs,
      retrySecs: cfg.health_check.retry_secs,
    },
    clock: systemClock,
    logger: p.logger.child({ module: 'health-check' }),
  });
}

/**
 * The run a crash interrupted, recorded as such, its test process ended if still alive and, when it ran as another
 * user, its folder taken back. Its resource is the running job: stopping waits for it (bounded: the runner's own
 * stop, grace and SIGKILL, plus room for the run's record to be written), the health check's with it. Resolves with
 * the result ids that were in flight (the sweep after start keeps them).
 */
export async function recoverRuns(p: CoreParts & Core): Promise<string[]> {
  const { cfg, jobs } = p;
  return p.stack.open('running job', async () => {
    const inFlight = p.jobsRepo.running().flatMap((j) => (j.current_run ? [j.current_run.result_id] : []));
    await Promise.all((await jobs.recover()).map((pid) => endStaleTestProcess(pid, cfg.runner.kill_grace_secs * 1000)));
    if (p.testUser) await reclaimInterruptedRuns(path.join(cfg.data_dir, 'results'), p.testUser, cfg.runner.python, p.logger);
    p.watched.checks = p.checks;
    const close = async () => {
      const checksStopped = p.checks.stop(); // resolves once its job ends: after the shutdown below
      const ended = await jobs.shutdown((cfg.runner.stop_response_secs + cfg.runner.kill_grace_secs + 30) * 1000);
      if (ended) await checksStopped; // a health check's job that did not end would hold it too
    };
    return { value: inFlight, close };
  });
}
