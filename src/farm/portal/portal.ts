/**
 * The portal's composition root (`farmhand portal`): the pg pool, the schema
 * migrations, the HTTP server, the hub on it, the jobs table and the Koa app.
 * Parts built by other modules (identity, reservations, uploads, events) are
 * passed in as factories of the pool, so each is constructed here and nowhere
 * else.
 */
import { createServer, type Server } from 'node:http';
import { Drain } from './drain.js';
import type { AddressInfo } from 'node:net';
import type Router from '@koa/router';
import type Koa from 'koa';
import type { Context } from 'koa';
import type pg from 'pg';
import type { TokenVerifier } from '../../core/auth.js';
import type { Logger } from '../../core/ports.js';
import type { Role } from '../../core/roles.js';
import type { FarmReservations, FarmTokenVerifier, NodeCredentials } from '../contract.js';
import { migrate } from '../db/migrate.js';
import { newPool } from '../db/pool.js';
import { PortalLock, type LockHolder } from '../db/portalLock.js';
import { PortalHub } from '../hub/index.js';
import { ReplicaLease } from '../replicas/lease.js';
import { Sweeper } from '../replicas/sweeper.js';
import { PgNodeFold } from '../fold.js';
import { FarmJobs } from '../jobs.js';
import { FarmResults } from '../results.js';
import { ConfigError } from '../../config/load.js';
import type { OidcConfig } from '../../config/oidc.js';
import { OidcSignIn, readClientSecret } from '../../http/oidc.js';
import type { OnOidcSignIn } from '../../web/pages/oidcSignIn.js';
import { PgUsers } from '../users.js';
import { FarmWakeups } from '../wakeups.js';
import { PgSessionStore } from '../webSessions.js';
import { PgFlowStore } from '../oidcFlows.js';
import { createPortalApp } from './app.js';
import { PgAuditLog } from '../audit.js';
import { auditRouter, auditTrail } from '../../http/audit.js';
import { auditPageRouter } from '../../web/pages/audit.js';
import { portalOps, type PortalOpsSources } from './ops.js';
import type { PortalConfig } from './config.js';
import { AWAIT_JOIN_MS, portalRouter } from './routes.js';
import { SharedForwards } from './sharedForward.js';
import { NodePlaces, placeNodeRequests } from './nodePlace.js';
import { ReplicaProxy } from './replicaProxy.js';
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { portalWebRouters, storedJobPageRouter } from './web.js';

/** What the portal is built from, beyond its config. */
export interface PortalParts {
  /** v2 tokens (hB's PgTokenVerifier). Default: none accepted, every v2 call is a 403. */
  tokens?: (pool: pg.Pool) => TokenVerifier | FarmTokenVerifier;
  /** Node credentials (hB's PgNodeCredentials). Default: no node may connect. */
  credentials?: (pool: pg.Pool) => NodeCredentials;
  /** Reservations (hC). Default: none, nodes are never reserved. */
  /** `replicaId`: replicas "many", this replica's id (a node of another replica is read from the database). */
  reservations?: (pool: pg.Pool, hub: PortalHub, wakeups: FarmWakeups, replicaId: string | undefined) => FarmReservations;
  /** More routers, mounted before the portal's own (results storage, events, reservations). */
  routers?: (p: { pool: pg.Pool; hub: PortalHub; jobs: FarmJobs; results: FarmResults; fold: PgNodeFold; wakeups: FarmWakeups }) => Router[];
  /** Routers with their own authentication and bodies, mounted before the API's middleware (the nodes' uploads); made after `routers`. */
  early?: (p: { pool: pg.Pool; hub: PortalHub; jobs: FarmJobs; results: FarmResults; wakeups: FarmWakeups }) => Router[];
  /**
   * The portal lock was lost and another portal took it (src/farm/db/portalLock.ts): this portal must stop
   * without another database write. `farmhand portal` exits; the default only logs (and /readyz answers 503).
   */
  onLockLost?: (holder: LockHolder | undefined) => void;
  /**
   * Replicas "many": this replica lost its lease (src/farm/replicas/lease.ts) and stopped acting (its nodes'
   * connections closed, nothing more written). `farmhand portal` exits 1; the default only logs (/readyz 503).
   */
  onLeaseLost?: (why: string) => void;
  /**
   * Replicas "many": resolves when a job exited, folded on any replica (the events outbox: src/farm/wakeups.ts
   * whenJobExited); await_completion of a job whose node is not connected here waits on it.
   */
  jobExited?: (uid: string, signal: AbortSignal) => Promise<void>;
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
  /** The portal lock: one portal per database (src/farm/db/portalLock.ts); shared by replicas "many". */
  lock: PortalLock;
  /** This replica's id (`replicas.replica_id`, or random per start). */
  replicaId: string;
  /** Where node-scoped requests are answered (nodePlace.ts). */
  places: NodePlaces;
  /** Requests passed to other replicas (mode "many"). */
  proxy: ReplicaProxy | undefined;
  /** The replica's lease (src/farm/replicas/lease.ts); replicas "many" only. */
  lease: ReplicaLease | undefined;
  /** People's sign-in sessions, in PostgreSQL (src/farm/webSessions.ts). */
  sessions: PgSessionStore;
  /** The farmhand channel: wake-ups from the other replicas (src/farm/wakeups.ts). */
  wakeups: FarmWakeups;
  /**
   * Let the requests under way end (drain.ts; replicas "many": up to 3 s, 30 s for those that change something),
   * answer the rest 503 with Retry-After, take no more. The node connections stay. `stop` does it first.
   */
  drain(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * How long a replica's stop waits for the requests under way (docs/farm.md, "Many portals: faults and figures"): a
 * CI client's calls take well under a second; a long poll held by a node (55 s) is answered 503 with Retry-After
 * after this. Shorter than HAProxy takes to mark a stopped replica down with the documented checks (`inter 2s fall 3`:
 * at least 4 s), whose `on-marked-down shutdown-sessions` would cut what is still under way.
 */
const DRAIN_MS = 3000;
/**
 * How long it waits for a request under way that is not a GET or HEAD (a `run_tests` the node is starting): answered
 * 503, its client would send it again while the node runs the first one.
 */
const DRAIN_UNSAFE_MS = 30_000;
const NO_TOKENS: TokenVerifier = { verify: () => undefined };
const NO_NODES: NodeCredentials = { verify: () => Promise.resolve(false) };

const isFarmTokenVerifier = (t: TokenVerifier): t is FarmTokenVerifier => typeof (t as Partial<FarmTokenVerifier>).start === 'function';

export async function startPortal(cfg: PortalConfig, logger: Logger, parts: PortalParts = {}): Promise<Portal> {
  // A config problem before anything starts: the OIDC client secret's file (ConfigError: `farmhand portal` exits 78).
  const oidcSecret = cfg.oidc && (await readOidcSecret(cfg.oidc));
  const many = cfg.replicas.mode === 'many';
  const replicaSecret = many ? await readReplicaSecret(cfg.replicas.secret_file!) : undefined;
  // First of all, before a migration or a node row: one portal per database (replicas "single"). Another one's
  // lock is a PortalLockHeld (`farmhand portal` exits 78 with its one line); a database away is thrown as it is.
  // Replicas "many" take it shared (they never contend; a "single" portal and they refuse each other), then a lease.
  const lock = await PortalLock.acquire({
    connectionString: cfg.database,
    logger: logger.child({ part: 'portal-lock' }),
    shared: many,
    onLost: parts.onLockLost ?? ((holder) => logger.error({ holder }, 'the portal lock is held by another portal: this portal is not ready; stop it')),
  });
  let lease: ReplicaLease | undefined;
  let sweeper: Sweeper | undefined;
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
  let wakeups: FarmWakeups | undefined;
  let sessions: PgSessionStore | undefined;
  try {
    await migrate(pool);
    if (many) {
      lease = await ReplicaLease.take({
        connectionString: cfg.database,
        ...(cfg.replicas.replica_id !== undefined && { replicaId: cfg.replicas.replica_id }),
        url: cfg.replicas.advertise_url!,
        leaseSecs: cfg.replicas.lease_secs,
        logger: logger.child({ part: 'replica-lease' }),
        onLost: (why) => {
          // Stop acting: no node is ours any more, no sweep; /readyz answers 503 (ops.ts reads the lease).
          hub?.abandon('this portal replica lost its lease');
          void sweeper?.stop();
          (parts.onLeaseLost ?? (() => logger.error('this portal replica lost its lease: it is not ready; restart it')))(why);
        },
      });
    }
    wakeups = new FarmWakeups({ pool, logger: logger.child({ part: 'wakeups' }) });
    await wakeups.start();
    if (!parts.tokens) logger.warn('no token verifier is wired: every v2 call is refused');
    if (!parts.credentials) logger.warn('no node credentials are wired: no node can connect');
    if (cfg.max_buffered_response_bytes !== undefined) {
      logger.warn('max_buffered_response_bytes is retired and ignored: a forwarded answer waits for a slow client within its HTTP/2 window (256 KiB); remove the key');
    }
    tokens = parts.tokens?.(pool) ?? NO_TOKENS;
    if (isFarmTokenVerifier(tokens)) await tokens.start();
    sessions = new PgSessionStore({ pool, tokens, wakeups, logger: logger.child({ part: 'sessions' }) });
    await sessions.start();
    const w = wakeups;
    // Replicas "many": the results stored here are told to the others (their read-your-writes listeners).
    const results = new FarmResults(pool, cfg.replicas.mode === 'many' ? wakeups : undefined);
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
      maxInboxEvents: cfg.max_node_inbox_events,
      maxInboxBytes: cfg.max_node_inbox_bytes,
      jobs,
      ...(lease && { replicaId: lease.replicaId }),
    });
    if (lease) {
      const h1 = hub;
      const l1 = lease;
      sweeper = new Sweeper({
        pool,
        replicaId: lease.replicaId,
        periodMs: lease.leaseMs,
        graceMs: hub.restartGraceMs,
        logger: logger.child({ part: 'replica-sweeper' }),
        held: () => l1.held,
        fault: (nodeId, reason, t) => jobs.nodeOffline(nodeId, reason, t),
        onOffline: (nodeId, reason) => h1.emitPortalEvent('node.offline', nodeId, { online: false, reason }),
      });
    }
    const reservations = parts.reservations?.(pool, hub, w, lease?.replicaId);
    const awaits = new SharedForwards({ joinMs: AWAIT_JOIN_MS });
    // The farm's audit trail (docs/auth.md): the portal's requests, in PostgreSQL.
    audit = new PgAuditLog({ pool, keepDays: cfg.audit.keep_days, logger: logger.child({ part: 'audit' }) });
    const trail = auditTrail({ log: audit, idleMs: cfg.audit.manual_idle_secs * 1000, logger: logger.child({ part: 'audit' }) });
    const h0 = hub;
    // One id for the replica: its lease's (configured or random), so the proxy's loop guard and the lease agree.
    const replicaId = lease?.replicaId ?? cfg.replicas.replica_id ?? randomBytes(6).toString('hex');
    const places = new NodePlaces({ pool, hub, ...(many && { replicaId, wakeups: w }) });
    const proxy = replicaSecret
      ? new ReplicaProxy({ secret: replicaSecret, replicaId, retryAfterSecs: Math.ceil(cfg.replicas.lease_secs), ...(cfg.public_url && { publicUrl: cfg.public_url }) })
      : undefined;
    const ops = portalOps({
      pool,
      lock,
      ...(lease && { lease, sweeps: () => sweeper?.sweeps ?? 0 }),
      links: () => h0.links(),
      forwards: () => ({ inFlight: h0.forwardsInFlight(), total: h0.stats.forwards }),
      inbox: () => h0.stats,
      ...(proxy && { replicaProxy: () => proxy.stats }),
      logger: logger.child({ part: 'ops' }),
      ...parts.opsSources,
    });
    const oidc = cfg.oidc && oidcSecret !== undefined ? portalOidc(cfg.oidc, cfg.public_url, pool, oidcSecret, logger.child({ part: 'oidc' })) : undefined;
    const app = createPortalApp({
      ...(oidc && { oidc }),
      ...(replicaSecret && { replicaSecret }),
      ...(proxy && { nodePlaces: placeNodeRequests({ places, proxy, holdMs: cfg.replicas.hold_secs * 1000, logger: logger.child({ part: 'replicas' }) }) }),
      ops: ops.router,
      logger,
      tokens,
      sessions,
      rateLimit: cfg.rate_limit,
      maxBodyBytes: cfg.api.max_body_bytes,
      publicUrl: cfg.public_url,
      v1RequiresToken: cfg.auth.v1_requires_token,
      audit: trail,
      admins: async () => (await pool.query<{ username: string }>("SELECT username FROM users WHERE role = 'admin' ORDER BY username LIMIT 5")).rows.map((r) => r.username),
      routers: [
        auditRouter(audit),
        auditPageRouter(audit, { farm: true }),
        ...(parts.routers?.({ pool, hub, jobs, results, fold, wakeups: w }) ?? []),
        // In front of the forwarding: an offline node's job page, from the jobs table and the index.
        storedJobPageRouter({ hub, jobs, results }),
        portalRouter({
          pool,
          hub,
          jobs,
          reservations,
          results,
          awaits,
          publicUrl: cfg.public_url,
          settleMs: cfg.read_your_writes_max_secs * 1000,
          ...(many && { replicaId }),
          ...(many && proxy && { atOtherReplicas: atOtherReplicas(pool, proxy, replicaId, logger.child({ part: 'replicas' })) }),
          ...(many && proxy && { toAnyNodeElsewhere: toAnyNodeElsewhere(pool, proxy, replicaId) }),
          ...(cfg.replicas.mode === 'many' && parts.jobExited && { jobExited: parts.jobExited, awaitHoldMs: cfg.api.await_completion_secs * 1000 }),
        }),
        ...portalWebRouters({ pool, hub, reservations, results, publicUrl: cfg.public_url, ...(many && { replicaId }) }),
      ],
      early: parts.early?.({ pool, hub, jobs, results, wakeups: w }) ?? [],
    });
    server = createServer();
    const drain = new Drain(server, app.callback(), (o) => logger.info(o, 'stopping: the requests under way drained'));
    server.headersTimeout = 30_000;
    server.requestTimeout = 120_000; // forwarded long polls hold 55 s
    await hub.start(server);
    if (lease?.lost) hub.abandon('this portal replica lost its lease'); // lost before the hub was there to drop
    sweeper?.start();
    await listen(server, cfg.listen);
    const addr = server.address() as AddressInfo;
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    const url = `http://${host}:${addr.port}`;
    logger.info({ url, heartbeat_secs: cfg.heartbeat_secs, ...(lease && { replica: lease.replicaId }) }, 'farmhand portal is listening');
    const s = server;
    const h = hub;
    const t = tokens;
    const a = audit;
    const sess = sessions;
    let stopping: Promise<void> | undefined;
    let draining: Promise<void> | undefined;
    // Requests under way end first, while the nodes are still connected (drain.ts): a replica's rolling restart
    // resets no request. A single portal has no other to send the next request to: it does not wait.
    const drained = () =>
      (draining ??= (async () => {
        const answered = await drain.run(many ? DRAIN_MS : 0, many ? DRAIN_UNSAFE_MS : 0, many ? Math.ceil(cfg.replicas.lease_secs) : 5);
        if (answered > 0) logger.info({ answered }, 'stopping: requests still unanswered were answered 503 with Retry-After');
      })());
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
      replicaId,
      places,
      proxy,
      lease,
      sessions: sess,
      wakeups: w,
      drain: drained,
      stop: () =>
        (stopping ??= (async () => {
          await drained();
          await sweeper?.stop();
          await h.close();
          proxy?.close();
          await new Promise<void>((resolve) => {
            s.close(() => resolve());
            s.closeAllConnections();
          });
          trail.close(); // open manual control sessions end here
          await a.close();
          if (isFarmTokenVerifier(t)) await t.close();
          sess.close();
          await w.close();
          await pool.end();
          await lock.release();
          await lease?.release();
          logger.info('farmhand portal stopped');
        })()),
    };
  } catch (e) {
    await audit?.close().catch(() => undefined);
    await hub?.close().catch(() => undefined);
    server?.close();
    if (tokens && isFarmTokenVerifier(tokens)) await tokens.close().catch(() => undefined);
    await sweeper?.stop();
    sessions?.close();
    await wakeups?.close();
    await pool.end().catch(() => undefined);
    await lock.release();
    await lease?.release();
    throw e;
  }
}


/** The replicas' shared secret (`replicas.secret_file`): at least 32 bytes, its surrounding whitespace dropped. */
async function readReplicaSecret(file: string): Promise<Buffer> {
  let text: string;
  try {
    text = (await readFile(file, 'utf8')).trim();
  } catch (e) {
    throw new ConfigError([`replicas.secret_file: cannot read ${file} (${(e as NodeJS.ErrnoException).code ?? String(e)})`]);
  }
  if (Buffer.byteLength(text) < 32) throw new ConfigError([`replicas.secret_file: ${file} holds ${Buffer.byteLength(text)} bytes; at least 32 are needed (e.g. openssl rand -hex 32)`]);
  return Buffer.from(text, 'utf8');
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
    // Flows in PostgreSQL: the provider's callback may land on another replica than the start (docs/auth.md).
    signIn: new OidcSignIn(o, { publicUrl, clientSecret, logger, flows: new PgFlowStore(pool) }),
    onSignIn: (who) => users.signedInWithOidc(who.login, who.role, providerDecides, { from: who.from, issuer: o.issuer }),
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

/**
 * Replicas "many": the same request at every other replica with a live lease (routes.ts `atOtherReplicas`), each
 * failure logged. The replicas read now, not cached: a push is rare.
 */
function atOtherReplicas(pool: pg.Pool, proxy: ReplicaProxy, replicaId: string, logger: Logger) {
  return async (method: string, path: string, caller: { user: string; role?: Role | undefined }): Promise<void> => {
    const { rows } = await pool.query<{ replica_id: string; url: string }>(
      `SELECT replica_id, url FROM portal_replicas WHERE lease_until > now() AND replica_id <> $1`,
      [replicaId],
    );
    await Promise.all(
      rows.map(async (r) => {
        const status = await proxy.call({ replicaId: r.replica_id, url: r.url }, method, path, caller).catch((e: Error) => e.message);
        if (status !== 204 && status !== 200) logger.warn({ replica: r.replica_id, path, answer: status }, 'a request passed to every replica failed at one');
      }),
    );
  };
}

/**
 * Replicas "many": a request any node answers (test_case_names) passed to another replica with a live lease that
 * holds an online node, named as that node's (routes.ts `toAnyNodeElsewhere`); false when there is none.
 */
function toAnyNodeElsewhere(pool: pg.Pool, proxy: ReplicaProxy, replicaId: string) {
  return async (ctx: Context): Promise<boolean> => {
    const { rows } = await pool.query<{ node_id: string; replica_id: string; url: string }>(
      `SELECT n.node_id, r.replica_id, r.url FROM nodes n JOIN portal_replicas r ON r.replica_id = n.owner_replica
        WHERE n.online AND r.replica_id <> $1 AND r.lease_until > now() ORDER BY random() LIMIT 1`,
      [replicaId],
    );
    const row = rows[0];
    if (!row) return false;
    await proxy.pass(ctx, row.node_id, { replicaId: row.replica_id, url: row.url });
    return true;
  };
}
