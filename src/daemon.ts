/**
 * The composition root: the one place that builds concrete classes and wires
 * them together. `startDaemon` returns once the HTTP server listens and every
 * service is ready; `stop` shuts everything down in order (HTTP, the running
 * job, capture, storage, the data-directory lock).
 */
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { EX_CONFIG } from './config/load.js';
import type { FarmConfig } from './config/schema.js';
import { HEALTH_CHECK_CATEGORY, HEALTH_CHECK_USER, HealthCheckService, healthCheckTestCase } from './core/healthCheck.js';
import { JobService } from './core/jobs.js';
import { NodeService } from './core/node.js';
import { NodePolicy } from './core/nodePolicy.js';
import type { Logger } from './core/ports.js';
import { parseResultQuery } from './core/query.js';
import { ReservationService, systemClock } from './core/reservations.js';
import { createCapture } from './hardware/capture/index.js';
import { KeyPresser } from './hardware/ir/keys.js';
import { createIrTransport } from './hardware/ir/transports/index.js';
import { createVirtualStb } from './hardware/virtual/index.js';
import { createApp } from './http/app.js';
import type { Services } from './http/context.js';
import { ControlServer } from './runner/control.js';
import { checkTestPackSource, GitTestPack, TestPackConfigError } from './runner/gitTestPack.js';
import { parseIniConfig } from './runner/iniConfig.js';
import { endStaleTestProcess } from './runner/processGroup.js';
import { ProcessTestRunner } from './runner/testRunner.js';
import { lockDataDir, LockHeldError } from './storage/dataDirLock.js';
import { FileJobRepository } from './storage/jobStore.js';
import { FileResultRepository } from './storage/results/index.js';
import { StateNodeUsageStore, StateReservationStore, StateStore } from './storage/state.js';
import { FileTokenVerifier, tokensFile } from './storage/tokens.js';
import { projectRoot, version } from './version.js';

export interface Daemon {
  /** `http://host:port` the server listens on. */
  url: string;
  server: Server;
  services: Services;
  /** The node's health check (docs/health-checks.md). */
  healthCheck: HealthCheckService;
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
 * port answers 503. Any failure stops what had started and throws a
 * StartupError.
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
  // First of all: a second daemon on this data directory would "recover" the live one's runs.
  const lock = await lockDataDir(dataDir);
  undo.push(() => lock.release());
  await checkTestPackSource(cfg.test_pack.url);

  // The port next, so a port in use fails before capture or recovery start; until the
  // services exist every request gets a 503.
  let handler: RequestListener = answerStarting;
  const server = await listen((req, res) => handler(req, res), cfg.listen);
  undo.push(() => closeServer(server));

  const state = await StateStore.open(dataDir, { logger: logger.child({ module: 'state' }), nodeId: cfg.node_id });
  const jobsRepo = new FileJobRepository(dataDir, state, cfg.node_id);

  const results = new FileResultRepository({
    dir: path.join(dataDir, 'results'),
    retention: cfg.retention,
    logger,
  });
  await results.open();
  undo.push(() => results.close());

  const testPack = new GitTestPack({
    url: cfg.test_pack.url,
    dir: path.join(dataDir, 'test-pack.git'),
    worktreesDir: path.join(dataDir, 'checkouts'),
    refreshAfterSecs: cfg.test_pack.refresh_secs,
    logger: logger.child({ module: 'test-pack' }),
  });
  undo.push(() => testPack.close());
  // An unreachable URL is not fatal: open() logs it and keeps retrying in the background.
  await testPack.open();

  const runner = new ProcessTestRunner({
    python: cfg.runner.python,
    pythonPath: path.join(projectRoot, 'python'),
    killGraceSecs: cfg.runner.kill_grace_secs,
    maxOutputBytes: cfg.runner.max_output_bytes,
    version,
    logger: logger.child({ module: 'runner' }),
  });

  // The virtual set-top box is both the picture (capture virtual:) and what the IR reaches (ir virtual:).
  const stb =
    cfg.capture.uri === 'virtual:' || cfg.ir.uri === 'virtual:'
      ? createVirtualStb({ width: cfg.capture.width, height: cfg.capture.height, fps: cfg.capture.fps, logger: logger.child({ module: 'virtual-stb' }) })
      : undefined;
  undo.push(() => stb?.stop());
  const { record_video: recordVideo, ...captureCfg } = cfg.capture;
  const { frames, video } = createCapture(captureCfg, logger.child({ module: 'capture' }), {
    ...(stb && { feed: stb.feed }),
    ...(recordVideo && { recording: { dir: path.join(dataDir, 'recording') } }),
  });
  undo.push(() => frames.stop());
  await frames.start();
  const ir = createIrTransport(cfg.ir.uri, { logger: logger.child({ module: 'ir' }), ...(stb && { onVirtualEvent: stb.transportListener }) });
  undo.push(() => ir.close());
  const keys = new KeyPresser({ testPack, transport: ir, logger: logger.child({ module: 'keys' }) });
  const control = new ControlServer({ keys, logger, latestFrame: () => frames.latestFrame?.() });
  undo.push(() => control.close());
  const noCapture = cfg.capture.uri === 'none:';
  const online = () => (noCapture ? { online: true, reason: null } : frames.health());
  // Built once the node exists (below); runs recorded before that (the recovery) are not counted.
  const late: { healthCheck?: HealthCheckService } = {};
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
    settings: { defaultTimeoutSecs: cfg.runner.default_timeout_secs, stopResponseSecs: cfg.runner.stop_response_secs },
    onRecorded: (r) => late.healthCheck?.observe(r),
  });
  // A test process of the run the crash interrupted may still be alive: end it.
  await Promise.all((await jobs.recover()).map((pid) => endStaleTestProcess(pid, cfg.runner.kill_grace_secs * 1000)));

  const reservations = new ReservationService({
    store: new StateReservationStore(state),
    knownNodes: () => [cfg.node_id],
    isBusy: (id) => id === cfg.node_id && jobs.isRunning(),
    logger: logger.child({ module: 'reservations' }),
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
    logger: logger.child({ module: 'node' }),
  });
  const checks = new HealthCheckService({
    testCase: () => healthCheckTestCase(testPack, node.configPath, parseIniConfig),
    start: async (testCase) => {
      const req = { test_pack_revision: 'HEAD', test_cases: [testCase], category: HEALTH_CHECK_CATEGORY, soak: 'run once' as const, shuffle: false, remote_control: null, tags: {} };
      return (await jobs.runTests(req, HEALTH_CHECK_USER, 'v1')).job_uid;
    },
    whenEnded: (uid) => jobs.whenEnded(uid),
    busy: () => jobs.isRunning() || reservations.active(cfg.node_id) !== undefined || !online().online,
    settings: {
      afterInfrastructureErrors: cfg.health_check.after_infrastructure_errors,
      intervalSecs: cfg.health_check.interval_secs,
      retrySecs: cfg.health_check.retry_secs,
    },
    clock: systemClock,
    logger: logger.child({ module: 'health-check' }),
  });
  late.healthCheck = checks;

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
    policy: new NodePolicy({ nodeId: cfg.node_id, jobs, reservations, node, health: online, healthProblem: () => checks.problem(), testPack, keys, frames }),
  };
  const app = createApp(services, {
    maxBodyBytes: cfg.api.max_body_bytes,
    tokens: new FileTokenVerifier(tokensFile(dataDir), logger.child({ module: 'auth' })),
    rateLimit: cfg.rate_limit,
    v1RequiresToken: cfg.auth.v1_requires_token,
  });
  const callback = app.callback();
  handler = (req, res) => void callback(req, res); // Koa answers its own errors; the promise only tells when it did
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${addr.port}`;
  logger.info({ url, node_id: cfg.node_id, data_dir: dataDir }, 'farmhand is listening');
  checks.start();

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      const closed = new Promise<void>((res) => server.close(() => res()));
      server.closeIdleConnections();
      const checksStopped = checks.stop(); // resolves once its job ends: after the shutdown below
      await jobs.shutdown();
      await checksStopped;
      server.closeAllConnections();
      await closed;
      await frames.stop();
      reservations.stop();
      await node.flush();
      // Every job and state write lands before stop resolves: the next daemon on this data directory reads them whole.
      await jobsRepo.close();
      await state.close();
      await control.close();
      stb?.stop();
      await ir.close();
      testPack.close();
      await results.close();
      await lock.release();
    })());
  return { url, server, services, healthCheck: checks, stop };
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

/** The answer while the services are still starting (crash recovery, capture). */
function answerStarting(_req: IncomingMessage, res: ServerResponse): void {
  const body = JSON.stringify({ error: 'device_unavailable', message: 'farmhand is starting up (recovering the last run, starting capture); try again in a few seconds' });
  res.writeHead(503, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body), 'Retry-After': '1' });
  res.end(body);
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
