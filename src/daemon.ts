/**
 * The composition root: the one place that builds concrete classes and wires
 * them together. `startDaemon` returns once the HTTP server listens; `stop`
 * shuts everything down in order (HTTP, the running job, capture, storage).
 */
import { mkdir } from 'node:fs/promises';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import type { FarmConfig } from './config/schema.js';
import { JobService } from './core/jobs.js';
import { NodeService } from './core/node.js';
import type { Logger } from './core/ports.js';
import { parseResultQuery } from './core/query.js';
import { ReservationService } from './core/reservations.js';
import { createCapture } from './hardware/capture/index.js';
import { KeyPresser } from './hardware/ir/keys.js';
import { createIrTransport } from './hardware/ir/transports/index.js';
import { createVirtualStb } from './hardware/virtual/index.js';
import { createApp } from './http/app.js';
import type { Services } from './http/context.js';
import { presentJob } from './http/presenters.js';
import { ControlServer } from './runner/control.js';
import { GitTestPack } from './runner/gitTestPack.js';
import { parseIniConfig } from './runner/iniConfig.js';
import { endStaleTestProcess } from './runner/processGroup.js';
import { ProcessTestRunner } from './runner/testRunner.js';
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
  stop(): Promise<void>;
}

export async function startDaemon(cfg: FarmConfig, logger: Logger): Promise<Daemon> {
  const dataDir = cfg.data_dir;
  await mkdir(dataDir, { recursive: true });
  const state = await StateStore.open(dataDir, { logger: logger.child({ module: 'state' }), nodeId: cfg.node_id });
  const jobsRepo = new FileJobRepository(dataDir, state, cfg.node_id);

  const results = new FileResultRepository({
    dir: path.join(dataDir, 'results'),
    retention: cfg.retention,
    logger,
  });
  await results.open();

  const testPack = new GitTestPack({
    url: cfg.test_pack.url,
    dir: path.join(dataDir, 'test-pack.git'),
    worktreesDir: path.join(dataDir, 'checkouts'),
    refreshAfterSecs: cfg.test_pack.refresh_secs,
    logger: logger.child({ module: 'test-pack' }),
  });
  await testPack.open().catch((e: unknown) => {
    // Results stay readable without the test pack; run_tests retries the fetch.
    logger.error({ err: e, url: cfg.test_pack.url }, 'could not mirror the test pack; will retry on use');
  });

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
  const { record_video: recordVideo, ...captureCfg } = cfg.capture;
  const { frames, video } = createCapture(captureCfg, logger.child({ module: 'capture' }), {
    ...(stb && { feed: stb.feed }),
    ...(recordVideo && { recording: { dir: path.join(dataDir, 'recording') } }),
  });
  await frames.start();
  const ir = createIrTransport(cfg.ir.uri, { logger: logger.child({ module: 'ir' }), ...(stb && { onVirtualEvent: stb.transportListener }) });
  const keys = new KeyPresser({ testPack, transport: ir, logger: logger.child({ module: 'keys' }) });
  const control = new ControlServer({ keys, logger, latestFrame: () => frames.latestFrame?.() });
  const noCapture = cfg.capture.uri === 'none:';

  const online = () => (noCapture ? { online: true, reason: null } : frames.health());
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
    online,
    logger: logger.child({ module: 'jobs' }),
    settings: { defaultTimeoutSecs: cfg.runner.default_timeout_secs, stopResponseSecs: cfg.runner.stop_response_secs },
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
  const node = new NodeService({
    nodeId: cfg.node_id,
    settings: cfg.node,
    health: online,
    jobs,
    presentJob: (j, base) => presentJob(j, base, 'v2'),
    latestResultId: (j) => results.query(parseResultQuery({ filter: `job:${j.job_uid}` }, { limit: 1 }))[0]?.result_id,
    testPack,
    parseIni: parseIniConfig,
    networkInterfaces,
    reservations,
    usage: new StateNodeUsageStore(state),
    logger: logger.child({ module: 'node' }),
  });

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
    keys,
    node,
    reservations,
  };
  const app = createApp(services, {
    maxBodyBytes: cfg.api.max_body_bytes,
    tokens: new FileTokenVerifier(tokensFile(dataDir), logger.child({ module: 'auth' })),
    rateLimit: cfg.rate_limit,
    v1RequiresToken: cfg.auth.v1_requires_token,
  });
  const server = await listen(app.callback(), cfg.listen);
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${addr.port}`;
  logger.info({ url, node_id: cfg.node_id, data_dir: dataDir }, 'farmhand is listening');

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      const closed = new Promise<void>((res) => server.close(() => res()));
      server.closeIdleConnections();
      await jobs.shutdown();
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
      await results.close();
    })());
  return { url, server, services, stop };
}

async function listen(handler: Parameters<typeof import('node:http').createServer>[1], listenOn: string): Promise<Server> {
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
