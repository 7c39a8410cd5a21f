/**
 * The composition root: the one place that builds concrete classes and wires
 * them together. Every part that must be closed is a resource of one stack
 * (src/service/resources.ts), opened in the order below and closed in reverse:
 * the same list undoes a start that failed and stops a running daemon, so the
 * data-directory lock, opened first, is released last, after every write
 * (docs/robustness.md, "Start-up and stopping").
 */
import path from 'node:path';
import type Koa from 'koa';
import type { FarmConfig } from './config/schema.js';
import { EventHub, HealthWatcher } from './core/events.js';
import type { HealthCheckService } from './core/healthCheck.js';
import type { Logger } from './core/ports.js';
import { NodePolicy } from './core/nodePolicy.js';
import { systemClock } from './core/reservations.js';
import type { VirtualStb } from './hardware/virtual/index.js';
import type { PortalLink } from './farm/link/index.js';
import { ResultUploader, UPLOAD_QUEUE_FILE } from './farm/uploader.js';
import { createApp } from './http/app.js';
import { auditTrail } from './http/audit.js';
import type { Services } from './http/context.js';
import { EventStream } from './http/events.js';
import { FarmMetrics, httpMetrics, observeResults } from './metrics/index.js';
import { WebhookDispatcher } from './notify/webhooks.js';
import { checkTestPackSource } from './runner/gitTestPack.js';
import { describeReadiness, ReadinessChecks, statfsFreeBytes, type Readiness } from './service/readiness.js';
import { ResourceStack, type ResourceEvent } from './service/resources.js';
import { FileAuditLog } from './storage/auditLog.js';
import { lockDataDir } from './storage/dataDirLock.js';
import { EVENTS_DIR, FileEventJournal } from './storage/eventJournal.js';
import { FileResultRepository } from './storage/results/index.js';
import { FileTokenVerifier, tokensFile } from './storage/tokens.js';
import { version } from './version.js';
import { sweepAfterStart, waitForFirstFrame, type SweepReport } from './daemon/background.js';
import { openCore, recoverRuns, type Core } from './daemon/core.js';
import { openDevices, type Base, type Devices, type Late } from './daemon/devices.js';
import { portalLink } from './daemon/portalLink.js';
import { asStartupError, HttpServer, readSecrets } from './daemon/startup.js';
import { setUpTestUser } from './daemon/testUser.js';

export { StartupError } from './daemon/startup.js';
export type { SweepReport } from './daemon/background.js';

export interface Daemon {
  /** `http://host:port` the server listens on. */
  url: string;
  server: import('node:http').Server;
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
  /** Close every resource, last opened first (the portal link, new requests, the running job, ..., the lock). */
  stop(): Promise<void>;
}

export interface StartOptions {
  /**
   * Told of every resource opened and closed, in order (src/service/resources.ts). What it throws when told
   * a resource opened fails the start at that step: the tests' seam for a start that fails half-way.
   */
  onResource?: (e: ResourceEvent) => void;
}

/**
 * Start the daemon. Order (docs/robustness.md, "Start-up"): lock the data
 * directory, check the test pack, bind the port, and only then open storage,
 * start capture and recover the interrupted run; until those are ready the
 * port answers 503. Last, start-up waits (at most `capture.first_frame_wait_secs`)
 * for the first frame, so a client that calls as soon as the daemon is up
 * (or systemd says READY) finds the node online; past the bound it starts
 * anyway, offline, and logs why. Any failure closes what had opened, in
 * reverse, and throws a StartupError. What must look at every result folder
 * (what a crash left half-done) and the temporaries a crash left run after
 * that, in the background (`Daemon.swept`): start-up time does not grow with the history.
 */
export async function startDaemon(cfg: FarmConfig, logger: Logger, opts: StartOptions = {}): Promise<Daemon> {
  const stack = new ResourceStack({ logger, ...(opts.onResource && { onEvent: opts.onResource }) });
  try {
    return await start(cfg, logger, stack);
  } catch (e) {
    await stack.close();
    throw asStartupError(e, cfg);
  }
}


async function start(cfg: FarmConfig, logger: Logger, stack: ResourceStack): Promise<Daemon> {
  const secrets = await readSecrets(cfg, logger);
  // First of all: a second daemon on this data directory would "recover" the live one's runs.
  await stack.open('data-directory lock', async () => {
    const lock = await lockDataDir(cfg.data_dir);
    return { value: lock, close: () => lock.release() };
  });
  await checkTestPackSource(cfg.test_pack.url);
  // Before anything writes into the data directory: what is written from here on is the daemon's alone.
  const testUser = await setUpTestUser(cfg, logger, stack);
  // The port next, so a port in use fails before capture or recovery start; until the services exist every request gets a 503.
  const http = await stack.open('HTTP server', async () => {
    const h = await HttpServer.listen(cfg.listen);
    return { value: h, close: () => h.cutConnections() };
  });
  const late: Late = {};
  const base: Base = { cfg, logger, stack, late, secrets, testUser, http, metrics: farmMetrics(cfg, late) };
  const records = { ...base, ...(await openRecords(base)) };
  const devices = { ...records, ...(await openDevices(records)) };
  const core = { ...devices, ...(await openCore(devices)) };
  late.node = core.node;
  late.runningResult = () => core.jobs.current()?.current_run?.result_id ?? null;
  const live = { ...core, ...(await openLive(core)) };
  return serve(live, await recoverRuns(live));
}

/** Counts what passes through the wrapped ports; states are read at scrape time (sources), from what is built later. */
function farmMetrics(cfg: FarmConfig, late: Late): FarmMetrics {
  return new FarmMetrics({
    version,
    nodeId: cfg.node_id,
    irTransport: cfg.ir.uri,
    webhookOutcomes: ['delivered', 'failed_attempts', 'abandoned', 'dropped'],
    sources: {
      node: () => late.node!.availability(),
      ...(cfg.capture.uri !== 'none:' && { capture: () => late.captureStats?.() }),
      resultsStored: () => late.results?.size ?? 0,
      diskFreeBytes: () => statfsFreeBytes(cfg.data_dir),
      eventClients: () => late.stream?.clientsConnected ?? 0,
      webhookDeliveries: () => ({ ...late.webhooks?.deliveries() }),
      ...(cfg.portal && { portalConnected: () => late.portalLink?.connected ?? false }),
    },
  });
}

/** The records: the audit trail, the events (journal, hub, webhooks) and the results. */
async function openRecords(b: Base) {
  const { cfg, logger, stack } = b;
  // The audit trail (docs/auth.md): who did what, in <data_dir>/audit/, kept audit.keep_days.
  const auditLog = await stack.open('audit log', async () => {
    const log = await FileAuditLog.open({ dataDir: cfg.data_dir, keepDays: cfg.audit.keep_days, logger: logger.child({ module: 'audit' }) });
    return { value: log, close: () => log.close() };
  });
  const audit = await stack.open('audit sessions', () => {
    const trail = auditTrail({ log: auditLog, nodeId: cfg.node_id, idleMs: cfg.audit.manual_idle_secs * 1000, logger: logger.child({ module: 'audit' }) });
    return { value: trail, close: () => trail.close() }; // the open manual control sessions end here
  });
  // Events before what records any, so what recovery records (an interrupted run) is published too. The journal keeps
  // them across restarts: the hub starts with the events of earlier runs, so the portal or a client resuming gets what it missed.
  const hub = await stack.open('event journal', async () => {
    const eventsLogger = logger.child({ module: 'events' });
    const { journal, history } = await FileEventJournal.open({ dir: path.join(cfg.data_dir, EVENTS_DIR), keep: cfg.events.buffer_size, nodeId: cfg.node_id, logger: eventsLogger });
    const hub = new EventHub({ nodeId: cfg.node_id, bufferSize: cfg.events.buffer_size, logger: eventsLogger, journal, history });
    return { value: hub, close: () => journal.close() }; // every event on disk before the next daemon may start
  });
  const webhooks = await stack.open('webhooks', () => {
    const w = new WebhookDispatcher({ settings: cfg.webhooks, userAgent: `farmhand/${version}`, logger: logger.child({ module: 'webhooks' }) });
    w.attach(hub);
    return { value: w, close: () => w.close() };
  });
  const results = await stack.open('results', async () => {
    const r = observeResults(new FileResultRepository({ dir: path.join(cfg.data_dir, 'results'), retention: cfg.retention, logger }), b.metrics);
    await r.open();
    const close = async () => {
      await r.close(); // stops the sweep after start
      await b.late.swept;
    };
    return { value: r, close };
  });
  Object.assign(b.late, { webhooks, results });
  return { auditLog, audit, hub, webhooks, results };
}

/** The parts that run from here on: capture, the health watcher, the event stream, the farm uploads. */
async function openLive(b: Base & Records & Devices & Core) {
  const { cfg, logger, stack } = b;
  stack.defer('capture', () => b.frames.stop());
  await b.frames.start();
  // When stopping: after the running job and the event streams (below), the requests still open are cut.
  stack.defer('HTTP connections', () => b.http.cutConnections());
  const health = await stack.open('health watcher', () => {
    const h = new HealthWatcher({ health: b.online, sink: b.hub, clock: systemClock, intervalMs: cfg.events.health_poll_secs * 1000 });
    h.start();
    return { value: h, close: () => h.stop() };
  });
  const stream = await stack.open('event stream', () => {
    const s = new EventStream(b.hub, {
      maxClients: cfg.events.max_clients,
      maxPerCaller: cfg.events.max_clients_per_caller,
      heartbeatMs: cfg.events.heartbeat_secs * 1000,
      maxBacklogBytes: cfg.events.max_client_backlog_bytes,
      logger: logger.child({ module: 'event-stream' }),
    });
    return { value: s, close: () => s.close() }; // after the job's last events went out, so they do not hold the close
  });
  b.late.stream = stream;
  return { health, stream, uploader: cfg.portal && (await openUploader(b, cfg.portal)) };
}

/**
 * Farm uploads (docs/farm.md, "Results: uploads and the farm index"): only with a `portal` section; follows
 * run.finished from here on, before recovery records anything, and delivers from its own queue file in its own
 * loop (never in a run's way). Stopped after the running job: its last run.finished is queued (the queue file
 * keeps it for the next start).
 */
async function openUploader(b: Base & Records, portal: NonNullable<FarmConfig['portal']>): Promise<ResultUploader> {
  return b.stack.open('farm uploads', async () => {
    const u = new ResultUploader({
      nodeId: b.cfg.node_id,
      portalUrl: portal.url,
      credential: b.secrets.portalCredential!,
      results: b.results,
      events: b.hub,
      queueFile: path.join(b.cfg.data_dir, UPLOAD_QUEUE_FILE),
      ...(portal.upload_delay_secs !== undefined && { delayMs: portal.upload_delay_secs * 1000 }),
      logger: b.logger,
    });
    await u.start();
    return { value: u, close: () => u.stop() };
  });
}

type Records = Awaited<ReturnType<typeof openRecords>>;
type Live = Base & Records & Devices & Core & Awaited<ReturnType<typeof openLive>>;

/** The app, the first frame, then requests; the sweep after start, the health check and the portal link. */
async function serve(b: Live, inFlight: string[]): Promise<Daemon> {
  const { cfg, logger, stack } = b;
  const readiness = new ReadinessChecks({
    capture: b.noCapture ? undefined : () => b.frames.health(),
    testPackProblem: () => b.testPack.problem(),
    dataDir: cfg.data_dir,
    minFreeMb: cfg.retention.min_free_mb,
  });
  const services = nodeServices(b);
  const app = koaApp(b, services, readiness);
  if (!b.noCapture) await waitForFirstFrame(b.frames, readiness, cfg.capture.first_frame_wait_secs, logger);
  // Stopping begins here: no new connections, the idle ones ended (the open ones once the job has ended).
  await stack.open('requests', () => {
    const callback = app.callback();
    b.http.accept((req, res) => void callback(req, res)); // Koa answers its own errors; the promise only tells when it did
    return { value: callback, close: () => void b.http.stopAccepting() };
  });
  const url = b.http.url;
  logger.info({ url, node_id: cfg.node_id, data_dir: cfg.data_dir, readiness: describeReadiness(await readiness.check()) }, 'farmhand is listening');
  b.checks.start();
  // What must look at every result folder (and the temporaries a crash left) runs now, in the background:
  // start-up does not grow with the history, and requests and runs go on meanwhile (docs/operations.md).
  const swept = (b.late.swept = sweepAfterStart({ results: b.results, dataDir: cfg.data_dir, nodeId: cfg.node_id, keep: inFlight, prefixes: [b.tempPrefixes.run, b.tempPrefixes.control], logger }));
  // Last: the portal sees the node only once it answers requests; the first thing a stop ends (it forwards nothing more
  // and hears nothing of the shutdown's own events).
  const link = cfg.portal && b.secrets.portalCredential && b.secrets.delegateSecret ? await openPortalLink(b, cfg.portal, url) : undefined;
  const { server } = b.http;
  const stop = () => stack.close();
  return { url, server, app, services, readiness: () => readiness.check(), healthCheck: b.checks, uploader: b.uploader, ...(link && { portalLink: link }), ...(b.stb && { virtualStb: b.stb }), swept, stop };
}

function nodeServices(b: Live): Services {
  const { cfg, jobs, frames, hub } = b;
  return {
    nodeId: cfg.node_id,
    version,
    jobs,
    results: b.results,
    testPack: b.testPack,
    frames,
    logger: b.logger,
    publicUrl: cfg.public_url,
    awaitCompletionSecs: cfg.api.await_completion_secs,
    policy: new NodePolicy({ nodeId: cfg.node_id, jobs, reservations: b.reservations, node: b.node, health: b.online, healthProblem: () => b.checks.problem(), testPack: b.testPack, keys: b.keys, frames, events: hub, maintenance: b.maintenance }),
    events: { hub, stream: b.stream, webhooks: b.webhooks },
    audit: b.auditLog,
    ...(b.power && { power: { outlet: b.power, assertCanUse: (user: string | undefined, what: string) => b.reservations.assertCanUse(user, cfg.node_id, what) } }),
  };
}

function koaApp(b: Live, services: Services, readiness: ReadinessChecks): Koa {
  const { cfg, logger } = b;
  const tokens = new FileTokenVerifier(tokensFile(cfg.data_dir), logger.child({ module: 'auth' }));
  if (!cfg.auth.v1_requires_token && tokens.status().roles > 0) {
    // docs/auth.md, "Roles": roles bind callers with a token or a session; v1's open door lets anyone else in as before.
    logger.warn(
      { roles: tokens.status().roles },
      'users have roles, but auth.v1_requires_token is false: callers without a token may still use v1 (run tests too) and the pages; set it to true to hold everyone to roles',
    );
  }
  return createApp(services, {
    maxBodyBytes: cfg.api.max_body_bytes,
    tokens,
    rateLimit: cfg.rate_limit,
    v1RequiresToken: cfg.auth.v1_requires_token,
    ops: { version, readiness: () => readiness.check(), metrics: b.metrics },
    observe: httpMetrics(b.metrics),
    audit: b.audit,
    ...(b.secrets.delegateSecret && { delegate: { secret: b.secrets.delegateSecret } }),
    ...(b.secrets.oidc && { oidc: b.secrets.oidc }),
  });
}

async function openPortalLink(b: Live, portal: NonNullable<FarmConfig['portal']>, localUrl: string): Promise<PortalLink> {
  const parts = { credential: b.secrets.portalCredential!, delegateSecret: b.secrets.delegateSecret!, testUser: b.testUser, localUrl, node: b.node, jobs: b.jobs, hub: b.hub, results: b.results, uploader: b.uploader, logger: b.logger };
  const link = await b.stack.open('portal link', () => {
    const l = portalLink(portal, b.cfg.node_id, parts);
    return { value: l, close: () => l.stop() };
  });
  b.late.portalLink = link;
  link.start();
  return link;
}
