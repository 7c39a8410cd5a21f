/**
 * The portal's composition root (`farmhand portal`): the pg pool, the schema
 * migrations, the HTTP server, the hub on it, the jobs table and the Koa app.
 * Parts built by other modules (identity, reservations, uploads, events) are
 * passed in as factories of the pool, so each is constructed here and nowhere
 * else.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type Router from '@koa/router';
import type Koa from 'koa';
import type { Context } from 'koa';
import type pg from 'pg';
import type { TokenVerifier } from '../../core/auth.js';
import type { Logger } from '../../core/ports.js';
import type { FarmReservations, FarmTokenVerifier, NodeCredentials } from '../contract.js';
import { migrate } from '../db/migrate.js';
import { newPool } from '../db/pool.js';
import { PortalLock, type LockHolder } from '../db/portalLock.js';
import { PortalHub } from '../hub/index.js';
import { PgNodeFold } from '../fold.js';
import { FarmJobs } from '../jobs.js';
import { FarmResults } from '../results.js';
import { ConfigError } from '../../config/load.js';
import type { OidcConfig } from '../../config/oidc.js';
import { OidcSignIn, readClientSecret } from '../../http/oidc.js';
import type { OnOidcSignIn } from '../../web/pages/oidcSignIn.js';
import { PgUsers } from '../users.js';
import { createPortalApp } from './app.js';
import { farmRoleOf, PgAuditLog } from '../audit.js';
import { auditRouter, auditTrail } from '../../http/audit.js';
import { userOf } from '../../http/auth.js';
import { auditPageRouter } from '../../web/pages/audit.js';
import { portalOps, type PortalOpsSources } from './ops.js';
import type { PortalConfig } from './config.js';
import { AWAIT_JOIN_MS, portalRouter } from './routes.js';
import { SharedForwards } from './sharedForward.js';
import { portalWebRouters, storedJobPageRouter } from './web.js';

/** What the portal is built from, beyond its config. */
export interface PortalParts {
  /** v2 tokens (hB's PgTokenVerifier). Default: none accepted, every v2 call is a 403. */
  tokens?: (pool: pg.Pool) => TokenVerifier | FarmTokenVerifier;
  /** Node credentials (hB's PgNodeCredentials). Default: no node may connect. */
  credentials?: (pool: pg.Pool) => NodeCredentials;
  /** Reservations (hC). Default: none, nodes are never reserved. */
  reservations?: (pool: pg.Pool, hub: PortalHub) => FarmReservations;
  /** More routers, mounted before the portal's own (results storage, events, reservations). */
  routers?: (p: { pool: pg.Pool; hub: PortalHub; jobs: FarmJobs; results: FarmResults; fold: PgNodeFold }) => Router[];
  /** Routers with their own authentication and bodies, mounted before the API's middleware (the nodes' uploads); made after `routers`. */
  early?: (p: { pool: pg.Pool; hub: PortalHub; jobs: FarmJobs; results: FarmResults }) => Router[];
  /**
   * The portal lock was lost and another portal took it (src/farm/db/portalLock.ts): this portal must stop
   * without another database write. `farmhand portal` exits; the default only logs (and /readyz answers 503).
   */
  onLockLost?: (holder: LockHolder | undefined) => void;
  /** What /metrics reads beyond the hub, the pool and the lock (the farm's uploads and reservations); read at each scrape. */
  opsSources?: Pick<PortalOpsSources, 'uploadsInFlight' | 'reservedNodes' | 'busyReason'>;
}

export interface Portal {
  /** `http://host:port` the portal listens on. */
  url: string;
  /** The Koa app (its routers are the portal's routes: the table of endpoints is checked against them). */
  app: Koa;
  pool: pg.Pool;
  hub: PortalHub;
  jobs: FarmJobs;
  results: FarmResults;
  /** Where the nodes' streams are folded, a batch per transaction (docs/farm.md, "The node stream"). */
  fold: PgNodeFold;
  /** Identical await_completion long polls sharing one forward to their node. */
  awaits: SharedForwards;
  /** The portal lock: one portal per database (src/farm/db/portalLock.ts). */
  lock: PortalLock;
  stop(): Promise<void>;
}

const NO_TOKENS: TokenVerifier = { verify: () => undefined };
const NO_NODES: NodeCredentials = { verify: () => Promise.resolve(false) };

const isFarmTokenVerifier = (t: TokenVerifier): t is FarmTokenVerifier => typeof (t as Partial<FarmTokenVerifier>).start === 'function';

export async function startPortal(cfg: PortalConfig, logger: Logger, parts: PortalParts = {}): Promise<Portal> {
  // A config problem before anything starts: the OIDC client secret's file (ConfigError: `farmhand portal` exits 78).
  const oidcSecret = cfg.oidc && (await readOidcSecret(cfg.oidc));
  // First of all, before a migration or a node row: one portal per database. Another one's lock is a
  // PortalLockHeld (`farmhand portal` exits 78 with its one line); a database away is thrown as it is.
  const lock = await PortalLock.acquire({
    connectionString: cfg.database,
    logger: logger.child({ part: 'portal-lock' }),
    onLost: parts.onLockLost ?? ((holder) => logger.error({ holder }, 'the portal lock is held by another portal: this portal is not ready; stop it')),
  });
  // A client losing its server (PostgreSQL restarted) must not crash the process; the next query reconnects.
  const pool = newPool({
    connectionString: cfg.database,
    max: cfg.database_pool_size,
    queryTimeoutMs: cfg.database_query_timeout_secs * 1000,
    logger: logger.child({ part: 'database' }),
  });
  let server: Server | undefined;
  let hub: PortalHub | undefined;
  let tokens: TokenVerifier | undefined;
  let audit: PgAuditLog | undefined;
  try {
    await migrate(pool);
    if (!parts.tokens) logger.warn('no token verifier is wired: every v2 call is refused');
    if (!parts.credentials) logger.warn('no node credentials are wired: no node can connect');
    tokens = parts.tokens?.(pool) ?? NO_TOKENS;
    if (isFarmTokenVerifier(tokens)) await tokens.start();
    const results = new FarmResults(pool);
    // The fault rule's events (the lost run, the ended job) go out through the hub, made just below.
    const jobs = new FarmJobs({ pool, logger, onRunLost: (r) => results.put([r]), emit: (type, nodeId, data) => hub?.emitPortalEvent(type, nodeId, data) });
    const fold = new PgNodeFold({ pool, jobs, results, logger: logger.child({ part: 'fold' }) });
    hub = new PortalHub({
      pool,
      fold,
      credentials: parts.credentials?.(pool) ?? NO_NODES,
      logger: logger.child({ part: 'hub' }),
      heartbeatSecs: cfg.heartbeat_secs,
      flushSecs: cfg.flush_secs,
      ...(cfg.restart_grace_secs !== undefined && { restartGraceMs: cfg.restart_grace_secs * 1000 }),
      maxBufferedBytes: cfg.max_buffered_response_bytes,
      maxInboxEvents: cfg.max_node_inbox_events,
      maxInboxBytes: cfg.max_node_inbox_bytes,
      jobs,
    });
    const reservations = parts.reservations?.(pool, hub);
    const awaits = new SharedForwards({ joinMs: AWAIT_JOIN_MS });
    // The farm's audit trail (docs/auth.md): the portal's requests, in PostgreSQL.
    audit = new PgAuditLog({ pool, keepDays: cfg.audit.keep_days, logger: logger.child({ part: 'audit' }) });
    const trail = auditTrail({ log: audit, idleMs: cfg.audit.manual_idle_secs * 1000, logger: logger.child({ part: 'audit' }) });
    const roles = farmRoleOf(pool);
    const roleOf = (ctx: Context) => roles(userOf(ctx)?.login ?? '');
    const h0 = hub;
    const ops = portalOps({
      pool,
      lock,
      links: () => h0.links(),
      forwards: () => ({ inFlight: h0.forwardsInFlight(), total: h0.stats.forwards }),
      logger: logger.child({ part: 'ops' }),
      ...parts.opsSources,
    });
    const oidc = cfg.oidc && oidcSecret !== undefined ? portalOidc(cfg.oidc, cfg.public_url, pool, oidcSecret, logger.child({ part: 'oidc' })) : undefined;
    const app = createPortalApp({
      ...(oidc && { oidc }),
      ops: ops.router,
      logger,
      tokens,
      rateLimit: cfg.rate_limit,
      maxBodyBytes: cfg.api.max_body_bytes,
      publicUrl: cfg.public_url,
      v1RequiresToken: cfg.auth.v1_requires_token,
      audit: trail,
      routers: [
        auditRouter(audit, roleOf),
        auditPageRouter(audit, { farm: true, roleOf }),
        ...(parts.routers?.({ pool, hub, jobs, results, fold }) ?? []),
        // In front of the forwarding: an offline node's job page, from the jobs table and the index.
        storedJobPageRouter({ hub, jobs, results }),
        portalRouter({ pool, hub, jobs, reservations, results, awaits, publicUrl: cfg.public_url, settleMs: cfg.read_your_writes_max_secs * 1000 }),
        ...portalWebRouters({ pool, hub, reservations, results, publicUrl: cfg.public_url }),
      ],
      early: parts.early?.({ pool, hub, jobs, results }) ?? [],
    });
    server = createServer(app.callback());
    server.headersTimeout = 30_000;
    server.requestTimeout = 120_000; // forwarded long polls hold 55 s
    await hub.start(server);
    await listen(server, cfg.listen);
    const addr = server.address() as AddressInfo;
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    const url = `http://${host}:${addr.port}`;
    logger.info({ url, heartbeat_secs: cfg.heartbeat_secs }, 'farmhand portal is listening');
    const s = server;
    const h = hub;
    const t = tokens;
    const a = audit;
    let stopping: Promise<void> | undefined;
    return {
      url,
      app,
      pool,
      hub: h,
      jobs,
      results,
      fold,
      awaits,
      lock,
      stop: () =>
        (stopping ??= (async () => {
          await h.close();
          await new Promise<void>((resolve) => {
            s.close(() => resolve());
            s.closeAllConnections();
          });
          trail.close(); // open manual control sessions end here
          await a.close();
          if (isFarmTokenVerifier(t)) await t.close();
          await pool.end();
          await lock.release();
          logger.info('farmhand portal stopped');
        })()),
    };
  } catch (e) {
    await audit?.close().catch(() => undefined);
    await hub?.close().catch(() => undefined);
    server?.close();
    if (tokens && isFarmTokenVerifier(tokens)) await tokens.close().catch(() => undefined);
    await pool.end().catch(() => undefined);
    await lock.release();
    throw e;
  }
}

/** Sign-in with OpenID Connect, when configured: people are recorded in `users` (PgUsers.signedInWithOidc). */
async function readOidcSecret(o: OidcConfig): Promise<string> {
  try {
    return await readClientSecret(o);
  } catch (e) {
    throw new ConfigError([(e as Error).message]);
  }
}

function portalOidc(o: OidcConfig, publicUrl: string | undefined, pool: pg.Pool, clientSecret: string, logger: Logger): { signIn: OidcSignIn; onSignIn: OnOidcSignIn } {
  const users = new PgUsers(pool);
  const providerDecides = o.role_claim !== undefined;
  return {
    signIn: new OidcSignIn(o, { publicUrl, clientSecret, logger }),
    onSignIn: (who) => users.signedInWithOidc(who.login, who.role, providerDecides),
  };
}

async function listen(server: Server, listenOn: string): Promise<void> {
  const i = listenOn.lastIndexOf(':');
  const host = listenOn.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(listenOn.slice(i + 1));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}
