/**
 * A real HTTP server serving the portal's result parts (upload API and v2
 * result routes) over a real PostgreSQL, for the farm's result tests. It can
 * be stopped and started again on the same port (a portal down for a while).
 * The node credentials and the hub's forwarding are small in-test
 * implementations of contract.ts's NodeCredentials and FarmHub.forward (the
 * portal process of src/farm/portal/ composes the real ones). The nodes'
 * connections are the real hub's (PortalHub), with the real fold of their
 * streams (a run's record comes in its node's stream: docs/farm.md, "The node
 * stream"); a pause closes them with the server.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import Koa from 'koa';
import pg from 'pg';
import { FarmError } from '../../src/core/errors.js';
import type { FarmHub, ForwardRequest, ForwardResponse, NodeCredentials } from '../../src/farm/contract.js';
import { migrate } from '../../src/farm/db/migrate.js';
import { PgNodeFold } from '../../src/farm/fold.js';
import { PortalHub } from '../../src/farm/hub/index.js';
import { FarmJobs } from '../../src/farm/jobs.js';
import { FarmResults } from '../../src/farm/results.js';
import { farmResultRouter, forwardThroughHub } from '../../src/farm/resultRoutes.js';
import { StoredResults } from '../../src/farm/storedResults.js';
import { uploadRouter } from '../../src/farm/uploadRoutes.js';
import { FarmUploads } from '../../src/farm/uploads.js';
import { bindEndpoints } from '../../src/http/endpoints/authorize.js';
import { errorHandler } from '../../src/http/errors.js';
import type { Logger } from '../../src/core/ports.js';
import { silentLogger } from '../../src/logger.js';
import { startPostgres, type TestPostgres } from './postgres.js';

/** NodeCredentials from a map (the real one keeps hashes in PostgreSQL). */
export class MapCredentials implements NodeCredentials {
  readonly map = new Map<string, string>();
  verify(nodeId: string, credential: string): Promise<boolean> {
    return Promise.resolve(this.map.get(nodeId) === credential);
  }
}

/** FarmHub.forward over plain HTTP to each node's own URL, with a v2 token (the real hub uses the node's connection). */
export class HttpForwarder implements Pick<FarmHub, 'forward'> {
  readonly nodes = new Map<string, { url: string; token: string }>();
  forwarded = 0;
  async forward(nodeId: string, req: ForwardRequest, signal?: AbortSignal): Promise<ForwardResponse> {
    const n = this.nodes.get(nodeId);
    if (!n) throw new FarmError('device_unavailable', `node ${nodeId} is not connected`);
    this.forwarded++;
    const res = await fetch(`${n.url}${req.path}`, { method: req.method, headers: { ...req.headers, Authorization: `token ${n.token}` }, signal });
    const headers: Record<string, string> = {};
    res.headers.forEach((v, k) => (headers[k] = v));
    return { status: res.status, headers, body: res.body ? Readable.fromWeb(res.body as never) : Readable.from([]) };
  }
}

export interface ResultsPortal {
  url: string;
  pool: pg.Pool;
  index: FarmResults;
  store: StoredResults;
  uploads: FarmUploads;
  fold: PgNodeFold;
  credentials: MapCredentials;
  hub: HttpForwarder;
  storageDir: string;
  /** What the portal logged as errors (an unexpected error is a 500). */
  errors: unknown[];
  /**
   * Hold every file request of the upload API (`/farm/v1/results/.../files/...`) until `release`;
   * `held` counts the requests waiting. Records pass.
   */
  holdFiles(): { readonly held: number; release(): void };
  /** Close the HTTP server (cutting every connection); `start` opens it again on the same port. */
  pause(): Promise<void>;
  start(): Promise<void>;
  close(): Promise<void>;
}

export async function startResultsPortal(o: { maxPartialBytesPerNode?: number } = {}): Promise<ResultsPortal> {
  const cluster: TestPostgres = await startPostgres();
  const pool = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database, max: 4 });
  await migrate(pool);
  const storageDir = await mkdtemp(path.join(os.tmpdir(), 'farm-storage-'));
  const index = new FarmResults(pool);
  const store = new StoredResults({ storageDir, index, pool });
  await store.open();
  const uploads = new FarmUploads(store, o);
  const credentials = new MapCredentials();
  const jobs = new FarmJobs({ pool, logger: silentLogger, onRunLost: (r) => index.put([r]) });
  const fold = new PgNodeFold({ pool, jobs, results: index, logger: silentLogger });
  let nodeHub: PortalHub | undefined;
  const hub = new HttpForwarder();
  const app = new Koa();
  app.silent = true; // a connection cut on purpose is not news
  const errors: unknown[] = [];
  const logger: Logger = { ...silentLogger, error: (obj: unknown) => errors.push(obj), child: () => logger };
  app.use(errorHandler(logger));
  let gate: { promise: Promise<void>; waiting: number } | undefined;
  app.use(async (ctx, next) => {
    const g = gate;
    if (g && ctx.path.startsWith('/farm/v1/results/') && ctx.path.includes('/files/')) {
      g.waiting++;
      await g.promise;
    }
    await next();
  });
  const up = uploadRouter({ uploads, store, credentials });
  const v2 = farmResultRouter({ store, forward: forwardThroughHub(hub) });
  app.use(up.routes()).use(up.allowedMethods());
  app.use(v2.routes()).use(v2.allowedMethods());
  // The requests the portal answers itself are checked by their table entries (portalCheck), as the portal's app
  // binds them; no roles here (the harness has no users).
  bindEndpoints(app, { roles: false, validate: 'portal' });
  const callback = app.callback();
  let server: Server | undefined;
  let port = 0;
  const start = async (): Promise<void> => {
    const s = createServer((req, res) => void callback(req, res));
    await new Promise<void>((resolve, reject) => {
      s.once('error', reject);
      s.listen(port, '127.0.0.1', () => resolve());
    });
    port = (s.address() as AddressInfo).port;
    server = s;
    nodeHub = new PortalHub({ pool, credentials, logger: silentLogger, heartbeatSecs: 1, flushSecs: 1, jobs, fold });
    await nodeHub.start(s);
  };
  const pause = async (): Promise<void> => {
    const s = server;
    server = undefined;
    if (!s) return;
    await nodeHub?.close();
    nodeHub = undefined;
    const closed = new Promise<void>((resolve) => s.close(() => resolve()));
    s.closeAllConnections();
    await closed;
  };
  await start();
  return {
    url: `http://127.0.0.1:${port}`,
    pool,
    index,
    store,
    uploads,
    fold,
    credentials,
    hub,
    storageDir,
    errors,
    holdFiles() {
      let release!: () => void;
      const g = { promise: new Promise<void>((resolve) => (release = resolve)), waiting: 0 };
      gate = g;
      return {
        get held() {
          return g.waiting;
        },
        release() {
          if (gate === g) gate = undefined;
          release();
        },
      };
    },
    pause,
    start,
    async close() {
      await pause();
      await pool.end();
      await cluster.stop();
      await rm(storageDir, { recursive: true, force: true });
    },
  };
}
