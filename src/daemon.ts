/**
 * The composition root: the one place that builds concrete classes and wires
 * them together. `startDaemon` returns once the HTTP server listens and every
 * service is ready; `stop` shuts everything down in order (HTTP, the running
 * job, capture, storage, the data-directory lock).
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces, tmpdir } from 'node:os';
import path from 'node:path';
import { EX_CONFIG } from './config/load.js';
import type { FarmConfig } from './config/schema.js';
import { EventHub, HealthWatcher } from './core/events.js';
import { HEALTH_CHECK_CATEGORY, HEALTH_CHECK_USER, HealthCheckService, healthCheckTestCase } from './core/healthCheck.js';
import { JobService } from './core/jobs.js';
import { NodeService } from './core/node.js';
import { NodePolicy } from './core/nodePolicy.js';
import type { FrameSource, Logger, TidyReport } from './core/ports.js';
import { parseResultQuery } from './core/query.js';
import { announcePresses } from './core/remoteControl.js';
import { ReservationService, systemClock } from './core/reservations.js';
import { createCapture, FfmpegFrameSource } from './hardware/capture/index.js';
import { KeyPresser } from './hardware/ir/keys.js';
import { createIrTransport } from './hardware/ir/transports/index.js';
import { createVirtualStb, type VirtualStb } from './hardware/virtual/index.js';
import { PortalLink } from './farm/link/index.js';
import type Koa from 'koa';
import { createApp } from './http/app.js';
import { EventStream } from './http/events.js';
import type { Services } from './http/context.js';
import { WebhookDispatcher } from './notify/webhooks.js';
import { healthBody } from './http/opsRoutes.js';
import { presentNode } from './http/presenters.js';
import { FarmMetrics, httpMetrics, observeIrTransport, observeResults } from './metrics/index.js';
import { ControlServer } from './runner/control.js';
import { OidcSignIn, readClientSecret } from './http/oidc.js';
import type { OidcConfig } from './config/oidc.js';
import { checkTestPackSource, GitTestPack, TestPackConfigError } from './runner/gitTestPack.js';
import { parseIniConfig } from './runner/iniConfig.js';
import { endStaleTestProcess } from './runner/processGroup.js';
import { ProcessTestRunner } from './runner/testRunner.js';
import { killTestUserProcesses, prepareDataDir, probeTestUser, reclaimResultDir, resolveTestUser, sweepAfterRun, unsweptRunDirs, type TestUser } from './runner/testUser.js';
import { lockDataDir, LockHeldError } from './storage/dataDirLock.js';
import { EVENTS_DIR, FileEventJournal } from './storage/eventJournal.js';
import { FileAuditLog } from './storage/auditLog.js';
import { auditTrail } from './http/audit.js';
import { FileJobRepository } from './storage/jobStore.js';
import { FileResultRepository } from './storage/results/index.js';
import { ResultUploader, UPLOAD_QUEUE_FILE } from './farm/uploader.js';
import { StateMaintenanceStore, StateNodeUsageStore, StateReservationStore, StateStore } from './storage/state.js';
import { maintenanceDetail, MaintenanceService } from './core/maintenance.js';
import { runTempPrefixes, sweepTemps, type TempSweepReport } from './storage/sweep.js';
import { FileTokenVerifier, tokensFile } from './storage/tokens.js';
import { describeReadiness, ReadinessChecks, statfsFreeBytes, type Readiness } from './service/readiness.js';
import { projectRoot, version } from './version.js';
import { SECURITY_HEADERS } from './http/securityHeaders.js';

export interface Daemon {
  /** `http://host:port` the server listens on. */
  url: string;
  server: Server;
  /** The Koa app (its routers are the node's routes: the table of endpoints is checked against them). */
  app: Koa;
  services: Services;
  /** Every readiness check now (what `/readyz` answers). */
  readiness(): Promise<Readiness>;
  /** The node's health check (docs/health-checks.md). */
  healthCheck: HealthCheckService;
  /** Uploads finished results to the farm's portal; only with a `portal` config section. */
  uploader?: ResultUploader;
  /** The connection to the farm portal; undefined when no `portal` is configured. */
  portalLink?: PortalLink;
  /** The background sweep after start (what a crash left); its report, or undefined if it failed. */
  swept: Promise<SweepReport | undefined>;
  /** The virtual set-top box, when capture or IR is `virtual:` (tests read its state and record). */
  virtualStb?: VirtualStb;
  stop(): Promise<void>;
}

/**
 * Start-up failed: the message is one line for a person, `exitCode` what the
 * process exits with (78 = EX_CONFIG for a configuration that can never
 * work, 1 otherwise). Whatever had started is stopped again.
 */
export class StartupError extends Error {
  override readonly name = 'StartupError';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/**
 * Start the daemon. Order (docs/robustness.md, "Start-up"): lock the data
 * directory, check the test pack, bind the port, and only then open storage,
 * start capture and recover the interrupted run; until those are ready the
 * port answers 503. Last, start-up waits (at most `capture.first_frame_wait_secs`)
 * for the first frame, so a client that calls as soon as the daemon is up
 * (or systemd says READY) finds the node online; past the bound it starts
 * anyway, offline, and logs why. Any failure stops what had started and
 * throws a StartupError. What must look at every result folder (what a
 * crash left half-done) and the temporaries a crash left run after that, in
 * the background (`Daemon.swept`): start-up time does not grow with the history.
 */
export async function startDaemon(cfg: FarmConfig, logger: Logger): Promise<Daemon> {
  const undo: Array<() => unknown> = [];
  try {
    return await start(cfg, logger, undo);
  } catch (e) {
    for (const step of undo.reverse()) {
      await Promise.resolve()
        .then(step)
        .catch((err: unknown) => logger.warn({ err }, 'error while undoing a failed start'));
    }
    throw asStartupError(e, cfg);
  }
}

async function start(cfg: FarmConfig, logger: Logger, undo: Array<() => unknown>): Promise<Daemon> {
  const dataDir = cfg.data_dir;
  // A node that is to join a farm and cannot read its credential is misconfigured: say so before anything starts.
  const portalCredential = cfg.portal && (await readCredential(cfg.portal.node_credential_file));
  // Likewise the OIDC client secret; the provider itself is asked only at the first sign-in (docs/auth.md).
  const oidc = cfg.oidc && new OidcSignIn(cfg.oidc, { publicUrl: cfg.public_url, clientSecret: await oidcClientSecret(cfg.oidc), logger: logger.child({ module: 'oidc' }) });
  // Lets the portal link's requests to this server act for the portal's user (http/auth.ts); never logged.
  const delegateSecret = cfg.portal && randomBytes(32).toString('base64url');
  // First of all: a second daemon on this data directory would "recover" the live one's runs.
  const lock = await lockDataDir(dataDir);
  undo.push(() => lock.release());
  await checkTestPackSource(cfg.test_pack.url);
  // Before anything writes into the data directory: what is written from here on is the daemon's alone.
  let restoreUmask: (() => void) | undefined;
  const testUser = cfg.runner.run_tests_as ? await setUpTestUser(cfg, logger, undo, (f) => (restoreUmask = f)) : undefined;
  if (cfg.portal && !testUser) {
    logger.warn(
      { node_credential_file: cfg.portal.node_credential_file },
      "tests run as the daemon's own user, so any test can read the node's portal credential and act as the node: set runner.run_tests_as (docs/configuration.md, \"Running tests as another user\")",
    );
  }

  // The port next, so a port in use fails before capture or recovery start; until the
  // services exist every request gets a 503.
  let handler: RequestListener = answerStarting;
  const server = await listen((req, res) => handler(req, res), cfg.listen);
  undo.push(() => closeServer(server));

  // Events first, so what recovery records (an interrupted run) is published too. The journal keeps them across
  // restarts: the hub starts with the events of earlier runs, so the portal or a client resuming gets what it missed.
  const eventsLogger = logger.child({ module: 'events' });
  const { journal, history } = await FileEventJournal.open({ dir: path.join(dataDir, EVENTS_DIR), keep: cfg.events.buffer_size, nodeId: cfg.node_id, logger: eventsLogger });
  undo.push(() => journal.close());
  const hub = new EventHub({ nodeId: cfg.node_id, bufferSize: cfg.events.buffer_size, logger: eventsLogger, journal, history });
  // The audit trail (docs/auth.md): who did what, in <data_dir>/audit/, kept audit.keep_days.
  const auditLog = await FileAuditLog.open({ dataDir, keepDays: cfg.audit.keep_days, logger: logger.child({ module: 'audit' }) });
  undo.push(() => auditLog.close());
  const audit = auditTrail({ log: auditLog, nodeId: cfg.node_id, idleMs: cfg.audit.manual_idle_secs * 1000, logger: logger.child({ module: 'audit' }) });
  const webhooks = new WebhookDispatcher({ settings: cfg.webhooks, userAgent: `farmhand/${version}`, logger: logger.child({ module: 'webhooks' }) });
  webhooks.attach(hub);
  undo.push(() => webhooks.close());

  // Counts what passes through the wrapped ports below; states are read at scrape time (sources).
  const metrics: FarmMetrics = new FarmMetrics({
    version,
    nodeId: cfg.node_id,
    irTransport: cfg.ir.uri,
    webhookOutcomes: ['delivered', 'failed_attempts', 'abandoned', 'dropped'],
    sources: {
      node: () => node.availability(),
      ...(cfg.capture.uri !== 'none:' && { capture: () => captureStats?.() }),
      resultsStored: () => results.size,
      diskFreeBytes: () => statfsFreeBytes(dataDir),
      eventClients: () => stream.clientsConnected,
      webhookDeliveries: () => ({ ...webhooks.deliveries() }),
      ...(cfg.portal && { portalConnected: () => late.portalLink?.connected ?? false }),
    },
  });

  const state = await StateStore.open(dataDir, { logger: logger.child({ module: 'state' }), nodeId: cfg.node_id });
  const jobsRepo = new FileJobRepository(dataDir, state, cfg.node_id);

  const results: FileResultRepository = observeResults(
    new FileResultRepository({
      dir: path.join(dataDir, 'results'),
      retention: cfg.retention,
      logger,
    }),
    metrics,
  );
  await results.open();
  undo.push(() => results.close());

  // ---- farm: upload each finished result to the portal (docs/farm.md, "Results: uploads and the farm
  // index"). Only with a `portal` section; follows run.finished from here on, before recovery records
  // anything, and delivers from its own queue file in its own loop (never in a run's way).
  let uploader: ResultUploader | undefined;
  if (cfg.portal) {
    uploader = new ResultUploader({
      nodeId: cfg.node_id,
      portalUrl: cfg.portal.url,
      credential: portalCredential!,
      results,
      events: hub,
      queueFile: path.join(dataDir, UPLOAD_QUEUE_FILE),
      logger,
    });
    await uploader.start();
    undo.push(() => uploader?.stop());
  }
  // ---- end farm uploads

  const testPack = new GitTestPack({
    url: cfg.test_pack.url,
    dir: path.join(dataDir, 'test-pack.git'),
    worktreesDir: path.join(dataDir, 'checkouts'),
    refreshAfterSecs: cfg.test_pack.refresh_secs,
    pollSecs: cfg.test_pack.poll_secs,
    logger: logger.child({ module: 'test-pack' }),
  });
  undo.push(() => testPack.close());
  // An unreachable URL is not fatal: open() logs it and keeps retrying in the background.
  await testPack.open();

  // Named with the data directory's tag, so the sweep after start finds what a crash left of this node's runs.
  const tempPrefixes = runTempPrefixes(dataDir);
  const runner = new ProcessTestRunner({
    tmpPrefix: tempPrefixes.run,
    python: cfg.runner.python,
    pythonPath: path.join(projectRoot, 'python'),
    killGraceSecs: cfg.runner.kill_grace_secs,
    maxOutputBytes: cfg.runner.max_output_bytes,
    version,
    logger: logger.child({ module: 'runner' }),
    ...(testUser && { testUser }),
    nodeId: cfg.node_id,
  });

  // The virtual set-top box is both the picture (capture virtual:) and what the IR reaches (ir virtual:).
  const stb =
    cfg.capture.uri === 'virtual:' || cfg.ir.uri === 'virtual:'
      ? createVirtualStb({ width: cfg.capture.width, height: cfg.capture.height, fps: cfg.capture.fps, animations: cfg.capture.virtual_animations, logger: logger.child({ module: 'virtual-stb' }) })
      : undefined;
  undo.push(() => stb?.stop());
  const { record_video: recordVideo, first_frame_wait_secs: firstFrameWaitSecs, virtual_animations: _animations, ...captureCfg } = cfg.capture;
  const { frames, video } = createCapture(captureCfg, logger.child({ module: 'capture' }), {
    ...(stb && { feed: stb.feed }),
    ...(recordVideo && { recording: { dir: path.join(dataDir, 'recording') } }),
  });
  undo.push(() => frames.stop());
  await frames.start();
  const captureStats = frames instanceof FfmpegFrameSource ? () => frames.stats() : undefined;
  const ir = observeIrTransport(createIrTransport(cfg.ir.uri, { logger: logger.child({ module: 'ir' }), ...(stb && { onVirtualEvent: stb.transportListener }) }), metrics);
  undo.push(() => ir.close());
  const keys = new KeyPresser({ testPack, transport: ir, logger: logger.child({ module: 'keys' }) });
  let runningResult = (): string | null => null;
  // A test script's presses are announced as key.pressed, with the run that pressed them.
  const scriptKeys = {
    press: announcePresses(keys.press.bind(keys), hub, () => ({ source: 'script', username: null, result_id: runningResult() })),
    transportUri: keys.transportUri,
  };
  const control = new ControlServer({
    keys: scriptKeys,
    logger,
    // A test script's frames at `capture.preview_fps`, whatever rate the live view gets (`live_fps`).
    latestFrame: () => (frames instanceof FfmpegFrameSource ? frames.latestPreviewFrame() : frames.latestFrame?.()),
    ...(testUser && { group: testUser.gid }),
    tmpPrefix: tempPrefixes.control,
    ...(frames instanceof FfmpegFrameSource && { onFrames: (listener: () => void) => frames.onPreviewFrames(listener) }),
  });
  undo.push(() => control.close());
  const noCapture = cfg.capture.uri === 'none:';
  const online = () => (noCapture ? { online: true, reason: null } : frames.health());
  // Built once the node exists (below); runs recorded before that (the recovery) are not counted.
  const late: { healthCheck?: HealthCheckService; portalLink?: PortalLink } = {};
  const jobs = new JobService({
    nodeId: cfg.node_id,
    installationHex: state.data.installation_hex,
    jobs: jobsRepo,
    results,
    testPack,
    runner,
    frames,
    video,
    control,
    logger: logger.child({ module: 'jobs' }),
    events: hub,
    settings: { defaultTimeoutSecs: cfg.runner.default_timeout_secs, stopResponseSecs: cfg.runner.stop_response_secs },
    onRecorded: (r) => late.healthCheck?.observe(r),
  });
  runningResult = () => jobs.current()?.current_run?.result_id ?? null;
  // A test process of the run the crash interrupted may still be alive: end it.
  const inFlight = jobsRepo.running().flatMap((j) => (j.current_run ? [j.current_run.result_id] : []));
  await Promise.all((await jobs.recover()).map((pid) => endStaleTestProcess(pid, cfg.runner.kill_grace_secs * 1000)));
  // Its folder, when it ran as another user: the test's files given back, the folder taken back (as after every run).
  if (testUser) await reclaimInterruptedRuns(path.join(dataDir, 'results'), testUser, cfg.runner.python, logger);

  // An administrator's maintenance switch (docs/api-notes.md, "Maintenance"), kept in state.json.
  const maintenance = new MaintenanceService({ store: new StateMaintenanceStore(state) });
  const maintained = (): string | null => {
    const m = maintenance.current();
    return m && maintenanceDetail(m);
  };
  const reservations = new ReservationService({
    store: new StateReservationStore(state),
    knownNodes: () => [cfg.node_id],
    isBusy: (id) => id === cfg.node_id && jobs.isRunning(),
    maintenance: (id) => (id === cfg.node_id ? maintained() : null),
    logger: logger.child({ module: 'reservations' }),
    events: hub,
  });
  await reservations.start();
  undo.push(() => reservations.stop());
  const node = new NodeService({
    nodeId: cfg.node_id,
    settings: cfg.node,
    health: online,
    jobs,
    latestResultId: (j) => results.query(parseResultQuery({ filter: `job:${j.job_uid}` }, { limit: 1 }))[0]?.result_id,
    testPack,
    parseIni: parseIniConfig,
    networkInterfaces,
    reservations,
    usage: new StateNodeUsageStore(state),
    healthProblem: () => late.healthCheck?.problem() ?? null,
    maintenance: () => maintenance.current(),
    logger: logger.child({ module: 'node' }),
  });
  const checks = new HealthCheckService({
    testCase: () => healthCheckTestCase(testPack, node.configPath, parseIniConfig),
    start: async (testCase) => {
      const req = { test_pack_revision: 'HEAD', test_cases: [testCase], category: HEALTH_CHECK_CATEGORY, soak: 'run once' as const, shuffle: false, remote_control: null, tags: {} };
      return (await jobs.runTests(req, HEALTH_CHECK_USER, 'v1')).job_uid;
    },
    whenEnded: (uid) => jobs.whenEnded(uid),
    // A node in maintenance is not checked either: it is under an administrator's hands.
    busy: () => jobs.isRunning() || reservations.active(cfg.node_id) !== undefined || !online().online || maintenance.current() !== null,
    settings: {
      afterInfrastructureErrors: cfg.health_check.after_infrastructure_errors,
      intervalSecs: cfg.health_check.interval_secs,
      retrySecs: cfg.health_check.retry_secs,
    },
    clock: systemClock,
    logger: logger.child({ module: 'health-check' }),
  });
  late.healthCheck = checks;

  const health = new HealthWatcher({ health: online, sink: hub, clock: systemClock, intervalMs: cfg.events.health_poll_secs * 1000 });
  health.start();
  undo.push(() => health.stop());
  const stream = new EventStream(hub, {
    maxClients: cfg.events.max_clients,
    maxPerCaller: cfg.events.max_clients_per_caller,
    heartbeatMs: cfg.events.heartbeat_secs * 1000,
    maxBacklogBytes: cfg.events.max_client_backlog_bytes,
    logger: logger.child({ module: 'event-stream' }),
  });
  undo.push(() => stream.close());

  const services: Services = {
    nodeId: cfg.node_id,
    version,
    jobs,
    results,
    testPack,
    frames,
    logger,
    publicUrl: cfg.public_url,
    awaitCompletionSecs: cfg.api.await_completion_secs,
    policy: new NodePolicy({ nodeId: cfg.node_id, jobs, reservations, node, health: online, healthProblem: () => checks.problem(), testPack, keys, frames, events: hub, maintenance }),
    events: { hub, stream, webhooks },
    audit: auditLog,
  };
  const readiness = new ReadinessChecks({
    capture: noCapture ? undefined : () => frames.health(),
    testPackProblem: () => testPack.problem(),
    dataDir,
    minFreeMb: cfg.retention.min_free_mb,
  });
  const tokenVerifier = new FileTokenVerifier(tokensFile(dataDir), logger.child({ module: 'auth' }));
  if (!cfg.auth.v1_requires_token && tokenVerifier.status().roles > 0) {
    // docs/auth.md, "Roles": roles bind callers with a token or a session; v1's open door lets anyone else in as before.
    logger.warn(
      { roles: tokenVerifier.status().roles },
      'users have roles, but auth.v1_requires_token is false: callers without a token may still use v1 (run tests too) and the pages; set it to true to hold everyone to roles',
    );
  }
  const app = createApp(services, {
    maxBodyBytes: cfg.api.max_body_bytes,
    tokens: tokenVerifier,
    rateLimit: cfg.rate_limit,
    v1RequiresToken: cfg.auth.v1_requires_token,
    ops: { version, readiness: () => readiness.check(), metrics },
    observe: httpMetrics(metrics),
    audit,
    ...(delegateSecret && { delegate: { secret: delegateSecret } }),
    ...(oidc && { oidc }),
  });
  const callback = app.callback();
  if (!noCapture) await waitForFirstFrame(frames, readiness, firstFrameWaitSecs, logger);
  handler = (req, res) => void callback(req, res); // Koa answers its own errors; the promise only tells when it did
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${addr.port}`;
  logger.info({ url, node_id: cfg.node_id, data_dir: dataDir, readiness: describeReadiness(await readiness.check()) }, 'farmhand is listening');
  checks.start();
  // What must look at every result folder (and the temporaries a crash left) runs now, in the background:
  // start-up does not grow with the history, and requests and runs go on meanwhile (docs/operations.md).
  const swept = sweepAfterStart({ results, dataDir, nodeId: cfg.node_id, keep: inFlight, prefixes: [tempPrefixes.run, tempPrefixes.control], logger });

  // Last: the portal sees the node only once it answers requests.
  let portalLink: PortalLink | undefined;
  if (cfg.portal && portalCredential && delegateSecret) {
    // Links in the Node objects sent unasked point at the portal (a forwarded request names its own base URL).
    const portalBase = new URL(cfg.portal.url.replace(/^ws/i, 'http')).origin;
    portalLink = new PortalLink({
      portalUrl: cfg.portal.url,
      credential: portalCredential,
      nodeId: cfg.node_id,
      version,
      localUrl: url,
      delegateSecret,
      state: async () => {
        const state = await node.stateOf(cfg.node_id);
        return { snapshot: presentNode(state, undefined, portalBase), availability: state.availability };
      },
      job: () => {
        const j = jobs.current();
        return j ? { job_uid: j.job_uid, status: j.status } : null;
      },
      stopJob: (uid) => jobs.stop(uid),
      events: hub,
      record: (id) => {
        const r = results.get(id);
        return r === undefined || r === 'deleted' ? undefined : r;
      },
      logger: logger.child({ module: 'portal-link' }),
      ...(cfg.portal.reconnect_max_secs !== undefined && { backoff: { capMs: cfg.portal.reconnect_max_secs * 1000 } }),
      // The portal is back: deliver the results waiting for it now, not at the end of the uploader's back-off (up to 60 s).
      onState: (connected) => {
        if (connected) uploader?.nudge();
      },
    });
    late.portalLink = portalLink;
    portalLink.start();
  }

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      // Each step is logged (debug): a stop that hangs says where.
      const step = (what: string) => logger.debug({ step: what }, 'stopping');
      step('the portal link');
      // First: the portal forwards nothing more and hears nothing of the shutdown's own events.
      await portalLink?.stop();
      const closed = new Promise<void>((res) => server.close(() => res()));
      server.closeIdleConnections();
      step('the running job');
      const checksStopped = checks.stop(); // resolves once its job ends: after the shutdown below
      // Bounded: the runner's own stop (grace, SIGKILL) plus room for the run's record to be written.
      const ended = await jobs.shutdown((cfg.runner.stop_response_secs + cfg.runner.kill_grace_secs + 30) * 1000);
      if (ended) await checksStopped; // a health check's job that did not end would hold it too
      step('farm uploads'); // after the job: its last run.finished is queued (the queue file keeps it for the next start)
      await uploader?.stop();
      step('HTTP connections');
      // After the job's last events went out: end the event streams, so they do not hold the close.
      stream.close();
      health.stop();
      server.closeAllConnections();
      await closed;
      step('capture');
      await frames.stop();
      step('stores');
      reservations.stop();
      await node.flush();
      // Every job and state write lands before stop resolves: the next daemon on this data directory reads them whole.
      await jobsRepo.close();
      await state.close();
      await control.close();
      stb?.stop();
      await ir.close();
      testPack.close();
      await results.close(); // stops the sweep
      await swept;
      webhooks.close();
      await journal.close(); // every event on disk before the next daemon may start
      audit.close(); // the open manual control sessions end here
      await auditLog.close();
      await lock.release();
      restoreUmask?.();
      step('done');
    })());
  return { url, server, app, services, readiness: () => readiness.check(), healthCheck: checks, uploader, ...(portalLink && { portalLink }), ...(stb && { virtualStb: stb }), swept, stop };
}

/** What the sweep after start found and removed. */
export type SweepReport = TidyReport & TempSweepReport;

/**
 * The background pass after start: every result folder (results.sweep), the
 * atomic temporaries of the data directory and the per-run temporary folders
 * a crash left, all older than this process. Never rejects; logs what it
 * did (`start-up sweep done`, info) once done.
 */
async function sweepAfterStart(o: {
  results: FileResultRepository;
  dataDir: string;
  nodeId: string;
  keep: string[];
  prefixes: string[];
  logger: Logger;
}): Promise<SweepReport | undefined> {
  // The process's start: anything older is a previous daemon's (this one holds the data directory's lock).
  const before = Math.floor(performance.timeOrigin);
  const t0 = Date.now();
  try {
    const folders = await o.results.sweep({ nodeId: o.nodeId, keep: o.keep, before });
    const temps = await sweepTemps({ dirs: [o.dataDir, path.join(o.dataDir, 'jobs'), path.join(o.dataDir, 'results')], tmpDir: tmpdir(), prefixes: o.prefixes, before });
    const report = { ...folders, ...temps };
    if (temps.atomicTemps + temps.tempFolders > 0) o.logger.warn({ ...temps }, 'deleted the temporary files and folders a crash left');
    o.logger.info({ ...report, ms: Date.now() - t0 }, 'start-up sweep done');
    return report;
  } catch (e) {
    o.logger.error({ err: e }, 'start-up sweep failed (what a crash left stays until the next start)');
    return undefined;
  }
}

/**
 * Hold start-up until capture delivers its first frame, at most `secs`: a
 * run_tests sent the moment the daemon is up must not meet "offline: waiting
 * for the first frame". Past the bound the daemon starts anyway (offline;
 * the API, /readyz and the node status say why) rather than never.
 */
async function waitForFirstFrame(frames: FrameSource, readiness: ReadinessChecks, secs: number, logger: Logger): Promise<void> {
  if (secs <= 0 || !(frames instanceof FfmpegFrameSource)) return;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), secs * 1000)));
  try {
    if ((await Promise.race([frames.online(), late])) !== 'late') return;
  } finally {
    clearTimeout(timer);
  }
  logger.warn({ wait_secs: secs, reason: readiness.capture().detail }, `no frame within ${secs} s of start (capture.first_frame_wait_secs): starting anyway, offline`);
}

/** Run folders a crash left shared with the test user: swept and taken back, as the runner does after a run. */
async function reclaimInterruptedRuns(resultsDir: string, user: TestUser, python: string, logger: Logger): Promise<void> {
  const dirs = await unsweptRunDirs(resultsDir, user.gid);
  if (dirs.length === 0) return;
  try {
    const r = await sweepAfterRun(user, python, dirs);
    for (const d of dirs) await reclaimResultDir(d);
    logger.warn({ folders: dirs.length, errors: r.errors }, `took back ${dirs.length} run folder(s) a crash left shared with ${user.name}`);
  } catch (err) {
    logger.error({ err, folders: dirs }, `could not take back the run folders a crash left shared with ${user.name}`);
  }
}

/** Capability numbers (linux/capability.h) a daemon that is not root needs to run tests as another user. */
const NEEDED_CAPS = { CAP_KILL: 5, CAP_SETGID: 6, CAP_SETUID: 7 } as const;

/**
 * `runner.run_tests_as` (src/runner/testUser.ts): the user exists and is not
 * the daemon's; a daemon that is not root holds the capabilities setpriv needs
 * (ambient, so they reach it) and is in the user's group; the daemon's umask
 * becomes 027; the data directory is laid out for the test user; processes
 * a crash left of that user are killed; and, as that user, the portal
 * credential, tokens.json and state.json are unreadable and the farmhand
 * package importable. Anything else is a StartupError (EX_CONFIG).
 */
async function setUpTestUser(cfg: FarmConfig, logger: Logger, undo: Array<() => unknown>, onUmask: (restore: () => void) => void): Promise<TestUser> {
  const name = cfg.runner.run_tests_as!;
  const bad = (why: string) => new StartupError(`runner.run_tests_as: ${why}`, EX_CONFIG);
  const user = await resolveTestUser(name);
  if (typeof user === 'string') throw bad(user);
  if (process.getuid?.() !== 0) {
    const status = await readFile('/proc/self/status', 'utf8').catch(() => '');
    const ambient = BigInt(`0x${/^CapAmb:\s*([0-9a-f]+)/m.exec(status)?.[1] ?? '0'}`);
    const missing = Object.entries(NEEDED_CAPS).filter(([, bit]) => (ambient & (1n << BigInt(bit))) === 0n).map(([n]) => n);
    if (missing.length) throw bad(`the daemon is not root and lacks ${missing.join(', ')} as ambient capabilities (systemd: AmbientCapabilities=CAP_SETUID CAP_SETGID CAP_KILL)`);
    if (!process.getgroups?.().includes(user.gid)) throw bad(`the daemon's user must be in ${name}'s group (gid ${user.gid}) to share the run folders with it (systemd: SupplementaryGroups=${name})`);
  }
  // The daemon's umask, put back when it stops (tests start several daemons in one process).
  const old = process.umask(0o027);
  const restore = () => process.umask(old);
  onUmask(restore);
  undo.push(restore);
  const open = await prepareDataDir(cfg.data_dir, user);
  if (open.length) logger.warn({ files: open }, `files in the data directory that ${name} may read and the daemon may not change (not its own): give them to the daemon's user or remove them`);
  await killTestUserProcesses(user, cfg.runner.python).catch((e: unknown) => {
    throw bad(`cannot run ${cfg.runner.python} as ${name} through setpriv: ${(e as Error).message}`);
  });
  const secrets = [...(cfg.portal ? [cfg.portal.node_credential_file] : []), ...(cfg.oidc?.client_secret_file ? [cfg.oidc.client_secret_file] : []), tokensFile(cfg.data_dir), path.join(cfg.data_dir, 'state.json')];
  const probe = await probeTestUser(user, cfg.runner.python, path.join(projectRoot, 'python'), secrets);
  if (probe.pythonError) throw bad(`${name} cannot run ${cfg.runner.python} with farmhand's Python package (${path.join(projectRoot, 'python')}): ${probe.pythonError}`);
  if (probe.readable.length) throw bad(`${name} can read ${probe.readable.join(', ')}: make it readable by the daemon's user only (e.g. chmod 0600, or 0640 with a group ${name} is not in)`);
  logger.info({ user: name, uid: user.uid, gid: user.gid }, 'tests run as another user');
  return user;
}

/** The OIDC client secret (`oidc.client_secret_file` or `client_secret`); unreadable: a config error. */
async function oidcClientSecret(o: OidcConfig): Promise<string> {
  try {
    return await readClientSecret(o);
  } catch (e) {
    throw new StartupError((e as Error).message, EX_CONFIG);
  }
}

/** The node credential `farmhand farm node add` printed, from `portal.node_credential_file`. */
async function readCredential(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? String(e);
    throw new StartupError(`portal.node_credential_file: cannot read ${file} (${code}); put there the credential 'farmhand farm node add <node_id>' printed on the portal`, EX_CONFIG);
  }
  const credential = text.trim();
  if (!credential || /\s/.test(credential)) {
    throw new StartupError(`portal.node_credential_file: ${file} must hold the node credential alone, on one line (it is ${credential ? 'more than one word' : 'empty'})`, EX_CONFIG);
  }
  return credential;
}

/** What a start-up failure says: one line, no stack. */
function asStartupError(e: unknown, cfg: FarmConfig): StartupError {
  if (e instanceof StartupError) return e;
  if (e instanceof LockHeldError) return new StartupError(e.message);
  if (e instanceof TestPackConfigError) return new StartupError(e.message, EX_CONFIG);
  const err = e as NodeJS.ErrnoException;
  if (err.syscall === 'listen') {
    const why = err.code === 'EADDRINUSE' ? 'the address is already in use (is another farmhand running?)' : err.code === 'EACCES' ? 'permission denied (ports below 1024 need privileges)' : (err.code ?? err.message);
    return new StartupError(`cannot listen on ${cfg.listen}: ${why}`);
  }
  return new StartupError(`start-up failed: ${err instanceof Error ? err.message : String(e)}`);
}

/**
 * The answer while the services are still starting (crash recovery, capture's
 * first frame): 503, except `/healthz` (the process answers) and `/readyz`
 * (not ready: starting).
 */
function answerStarting(req: IncomingMessage, res: ServerResponse): void {
  const route = req.method === 'GET' || req.method === 'HEAD' ? (req.url ?? '').replace(/[?#].*$/s, '').replace(/\/+$/, '') : '';
  const message = 'farmhand is starting up (recovering the last run, waiting for the first frame); try again in a few seconds';
  const [status, body] =
    route === '/healthz'
      ? [200, healthBody(version, true)]
      : route === '/readyz'
        ? [503, { error: 'not_ready', message, ready: false, failed: ['startup'], checks: { startup: { ok: false, detail: 'starting up' } } }]
        : [503, { error: 'device_unavailable', message }];
  const text = JSON.stringify(body);
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store', ...(status === 503 && { 'Retry-After': '1' }) });
  res.end(req.method === 'HEAD' ? undefined : text);
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => resolve());
    server.closeAllConnections();
  });
}

async function listen(handler: RequestListener, listenOn: string): Promise<Server> {
  const { createServer } = await import('node:http');
  const i = listenOn.lastIndexOf(':');
  const host = listenOn.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(listenOn.slice(i + 1));
  const server = createServer(handler);
  server.headersTimeout = 30_000;
  server.requestTimeout = 120_000; // long polls hold 55 s
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** Requests Node rejects before Koa sees them (too-long URL or headers, malformed HTTP) still get a JSON error. */
function answerClientError(err: NodeJS.ErrnoException, socket: import('node:stream').Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const [status, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers_too_large', 'the request line or headers are too large; shorten the URL (a filter of a few KiB is plenty)']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'the request took too long to arrive']
        : [400, 'invalid_request', 'malformed HTTP request'];
  const body = JSON.stringify({ error: code, message });
  socket.end(`HTTP/1.1 ${status} ${code}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
