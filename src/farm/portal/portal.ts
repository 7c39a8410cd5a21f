/**
 * The portal's composition root (`farmhand portal`): the pg pool, the schema
 * migrations, the HTTP server, the hub on it, the jobs table and the Koa app.
 * Parts built by other modules (identity, reservations, uploads, events) are
 * passed in as factories of the pool, so each is constructed here and nowhere
 * else.
 */
import { createServer } from 'node:http';
import { Drain } from './drain.js';
import type { AddressInfo } from 'node:net';
import type Router from '@koa/router';
import type Koa from 'koa';
import type pg from 'pg';
import type { TokenVerifier } from '../../core/auth.js';
import type { Logger } from '../../core/ports.js';
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
import { FarmWakeups } from '../wakeups.js';
import { PgSessionStore } from '../webSessions.js';
import { createPortalApp } from './app.js';
import { PgAuditLog } from '../audit.js';
import { auditRouter, auditTrail, type AuditTrail } from '../../http/audit.js';
import { ResourceStack } from '../../service/resources.js';
import { auditPageRouter } from '../../web/pages/audit.js';
import { portalOps, type PortalOpsSources } from './ops.js';
import type { PortalConfig } from './config.js';
import { AWAIT_JOIN_MS, portalRouter } from './routes.js';
import { SharedForwards } from './sharedForward.js';
import { NodePlaces, placeNodeRequests } from './nodePlace.js';
import { ReplicaProxy } from './replicaProxy.js';
import { randomBytes } from 'node:crypto';
import { portalWebRouters, storedJobPageRouter } from './web.js';
import { atOtherReplicas, closeServer, listen, portalOidc, readOidcSecret, readReplicaSecret, sweeperOf, toAnyNodeElsewhere } from './portalParts.js';

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
  /**
   * The stack the portal's resources join (src/service/resources.ts), for a caller whose own parts must close
   * among them (the farm's, opened in the factories above); default: the portal's own. `stop` closes it all.
   */
  stack?: ResourceStack;
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
  const stack = parts.stack ?? new ResourceStack({ logger });
  try {
    return await openPortal(cfg, logger, parts, stack);
  } catch (e) {
    await stack.close();
    throw e;
  }
}

/** What is built after what reads it (the lease's loss, from the hub and the sweeper). */
interface Late {
  hub?: PortalHub;
  sweeper?: Sweeper;
}

async function openPortal(cfg: PortalConfig, logger: Logger, parts: PortalParts, stack: ResourceStack): Promise<Portal> {
  // A config problem before anything starts: the OIDC client secret's file (ConfigError: `farmhand portal` exits 78).
  const oidcSecret = cfg.oidc && (await readOidcSecret(cfg.oidc));
  const replicaSecret = cfg.replicas.mode === 'many' ? await readReplicaSecret(cfg.replicas.secret_file!) : undefined;
  const late: Late = {};
  const db = await openDatabase(cfg, logger, parts, stack, late);
  const identity = await openIdentity(cfg, logger, parts, stack, db);
  const farm = buildFarm(cfg, logger, db, identity.credentials, late);
  const web = openApp({ cfg, logger, parts, stack, replicaSecret, oidcSecret }, db, identity, farm);
  return serve(cfg, logger, stack, { ...db, ...identity, ...farm, ...web });
}

/**
 * First of all, before a migration or a node row: one portal per database (replicas "single"). Another one's lock is
 * a PortalLockHeld (`farmhand portal` exits 78 with its one line); a database away is thrown as it is. Replicas
 * "many" take it shared (they never contend; a "single" portal and they refuse each other), then a lease.
 */
async function openDatabase(cfg: PortalConfig, logger: Logger, parts: PortalParts, stack: ResourceStack, late: Late) {
  const lock = await stack.open('portal lock', async () => {
    const l = await PortalLock.acquire({
      connectionString: cfg.database,
      logger: logger.child({ part: 'portal-lock' }),
      shared: cfg.replicas.mode === 'many',
      onLost: parts.onLockLost ?? ((holder) => logger.error({ holder }, 'the portal lock is held by another portal: this portal is not ready; stop it')),
    });
    return { value: l, close: () => l.release() };
  });
  // A client losing its server (PostgreSQL restarted) must not crash the process; the next query reconnects.
  const pool = newPool({ connectionString: cfg.database, max: cfg.database_pool_size, queryTimeoutMs: cfg.database_query_timeout_secs * 1000, logger: logger.child({ part: 'database' }) });
  stack.defer('database pool', () => pool.end());
  await migrate(pool);
  const lease = cfg.replicas.mode === 'many' ? await openLease(cfg, logger, parts, stack, late) : undefined;
  const wakeups = await stack.open('wake-ups', async () => {
    const w = new FarmWakeups({ pool, logger: logger.child({ part: 'wakeups' }) });
    await w.start();
    return { value: w, close: () => w.close() };
  });
  return { lock, pool, lease, wakeups };
}

function openLease(cfg: PortalConfig, logger: Logger, parts: PortalParts, stack: ResourceStack, late: Late): Promise<ReplicaLease> {
  return stack.open('replica lease', async () => {
    const lease = await ReplicaLease.take({
      connectionString: cfg.database,
      ...(cfg.replicas.replica_id !== undefined && { replicaId: cfg.replicas.replica_id }),
      url: cfg.replicas.advertise_url!,
      leaseSecs: cfg.replicas.lease_secs,
      logger: logger.child({ part: 'replica-lease' }),
      onLost: (why) => {
        // Stop acting: no node is ours any more, no sweep; /readyz answers 503 (ops.ts reads the lease).
        late.hub?.abandon('this portal replica lost its lease');
        void late.sweeper?.stop();
        (parts.onLeaseLost ?? (() => logger.error('this portal replica lost its lease: it is not ready; restart it')))(why);
      },
    });
    return { value: lease, close: () => lease.release() };
  });
}

type Database = Awaited<ReturnType<typeof openDatabase>>;

/** Who calls: v2 tokens and people's sessions. */
async function openIdentity(cfg: PortalConfig, logger: Logger, parts: PortalParts, stack: ResourceStack, db: Database) {
  if (!parts.tokens) logger.warn('no token verifier is wired: every v2 call is refused');
  if (!parts.credentials) logger.warn('no node credentials are wired: no node can connect');
  if (cfg.max_buffered_response_bytes !== undefined) {
    logger.warn('max_buffered_response_bytes is retired and ignored: a forwarded answer waits for a slow client within its HTTP/2 window (256 KiB); remove the key');
  }
  const tokens = await stack.open('tokens', async () => {
    const t = parts.tokens?.(db.pool) ?? NO_TOKENS;
    if (!isFarmTokenVerifier(t)) return { value: t, close: () => undefined };
    await t.start();
    return { value: t, close: () => t.close() };
  });
  const sessions = await stack.open('sessions', async () => {
    const s = new PgSessionStore({ pool: db.pool, tokens, wakeups: db.wakeups, logger: logger.child({ part: 'sessions' }) });
    await s.start();
    return { value: s, close: () => s.close() };
  });
  return { tokens, sessions, credentials: parts.credentials?.(db.pool) ?? NO_NODES };
}

/** The results, the jobs, the fold of the nodes' streams and the hub they connect to; the sweeper of a replica's lease. */
function buildFarm(cfg: PortalConfig, logger: Logger, db: Database, credentials: NodeCredentials, late: Late) {
  const { pool, wakeups, lease } = db;
  // Replicas "many": the results stored here are told to the others (their read-your-writes listeners).
  const results = new FarmResults(pool, cfg.replicas.mode === 'many' ? wakeups : undefined);
  // The fault rule's events (the lost run, the ended job) go out through the hub, made just below.
  const jobs = new FarmJobs({ pool, logger, onRunLost: (r) => results.put([r]), emit: (type, nodeId, data) => late.hub?.emitPortalEvent(type, nodeId, data) });
  const fold = new PgNodeFold({ pool, jobs, results, logger: logger.child({ part: 'fold' }) });
  const hub = (late.hub = new PortalHub({
    pool,
    fold,
    credentials,
    logger: logger.child({ part: 'hub' }),
    heartbeatSecs: cfg.heartbeat_secs,
    flushSecs: cfg.flush_secs,
    ...(cfg.restart_grace_secs !== undefined && { restartGraceMs: cfg.restart_grace_secs * 1000 }),
    maxInboxEvents: cfg.max_node_inbox_events,
    maxInboxBytes: cfg.max_node_inbox_bytes,
    jobs,
    ...(lease && { replicaId: lease.replicaId }),
  }));
  const sweeper = lease && (late.sweeper = sweeperOf(pool, lease, hub, jobs, logger));
  return { results, jobs, fold, hub, sweeper };
}
type Identity = Awaited<ReturnType<typeof openIdentity>>;
interface Routing {
  replicaId: string;
  places: NodePlaces;
  proxy: ReplicaProxy | undefined;
  awaits: SharedForwards;
  reservations: FarmReservations | undefined;
  audit: PgAuditLog;
  trail: AuditTrail;
}
type Farm = ReturnType<typeof buildFarm>;
interface AppInput {
  cfg: PortalConfig;
  logger: Logger;
  parts: PortalParts;
  stack: ResourceStack;
  replicaSecret: Buffer | undefined;
  oidcSecret: string | undefined;
}

/**
 * The audit trail, the replicas' proxy, the HTTP server and the Koa app with every router. The parts' routers are
 * made here, so what they open closes after the hub (opened later: its last events reach them) and before the server.
 */
function openApp(o: AppInput, db: Database, identity: Identity, farm: Farm) {
  const { cfg, logger, stack } = o;
  const many = cfg.replicas.mode === 'many';
  const reservations = o.parts.reservations?.(db.pool, farm.hub, db.wakeups, db.lease?.replicaId);
  // The farm's audit trail (docs/auth.md): the portal's requests, in PostgreSQL.
  const audit = new PgAuditLog({ pool: db.pool, keepDays: cfg.audit.keep_days, logger: logger.child({ part: 'audit' }) });
  stack.defer('audit log', () => audit.close());
  const trail = auditTrail({ log: audit, idleMs: cfg.audit.manual_idle_secs * 1000, logger: logger.child({ part: 'audit' }) });
  stack.defer('audit sessions', () => trail.close()); // open manual control sessions end here
  // One id for the replica: its lease's (configured or random), so the proxy's loop guard and the lease agree.
  const replicaId = db.lease?.replicaId ?? cfg.replicas.replica_id ?? randomBytes(6).toString('hex');
  const places = new NodePlaces({ pool: db.pool, hub: farm.hub, ...(many && { replicaId, wakeups: db.wakeups }) });
  const proxy = o.replicaSecret ? new ReplicaProxy({ secret: o.replicaSecret, replicaId, retryAfterSecs: Math.ceil(cfg.replicas.lease_secs), ...(cfg.public_url && { publicUrl: cfg.public_url }) }) : undefined;
  if (proxy) stack.defer('replica proxy', () => proxy.close());
  const server = createServer();
  server.headersTimeout = 30_000;
  server.requestTimeout = 120_000; // forwarded long polls hold 55 s
  stack.defer('HTTP server', () => closeServer(server));
  const awaits = new SharedForwards({ joinMs: AWAIT_JOIN_MS });
  const routing = { replicaId, places, proxy, awaits, reservations, audit, trail };
  return { ...routing, server, app: portalApp(o, db, identity, farm, routing) };
}

function portalApp(o: AppInput, db: Database, identity: Identity, farm: Farm, r: Routing): Koa {
  const { cfg, logger } = o;
  const { pool, lease, lock } = db;
  const ops = portalOps({
    pool,
    lock,
    ...(lease && { lease, sweeps: () => farm.sweeper?.sweeps ?? 0 }),
    links: () => farm.hub.links(),
    forwards: () => ({ inFlight: farm.hub.forwardsInFlight(), total: farm.hub.stats.forwards }),
    inbox: () => farm.hub.stats,
    ...(r.proxy && { replicaProxy: () => r.proxy!.stats }),
    logger: logger.child({ part: 'ops' }),
    ...o.parts.opsSources,
  });
  const oidc = cfg.oidc && o.oidcSecret !== undefined ? portalOidc(cfg.oidc, cfg.public_url, pool, o.oidcSecret, logger.child({ part: 'oidc' })) : undefined;
  return createPortalApp({
    ...(oidc && { oidc }),
    ...(o.replicaSecret && { replicaSecret: o.replicaSecret }),
    ...(r.proxy && { nodePlaces: placeNodeRequests({ places: r.places, proxy: r.proxy, holdMs: cfg.replicas.hold_secs * 1000, logger: logger.child({ part: 'replicas' }) }) }),
    ops: ops.router,
    logger,
    tokens: identity.tokens,
    sessions: identity.sessions,
    rateLimit: cfg.rate_limit,
    maxBodyBytes: cfg.api.max_body_bytes,
    publicUrl: cfg.public_url,
    v1RequiresToken: cfg.auth.v1_requires_token,
    audit: r.trail,
    admins: async () => (await pool.query<{ username: string }>("SELECT username FROM users WHERE role = 'admin' ORDER BY username LIMIT 5")).rows.map((u) => u.username),
    routers: routers(o, db, farm, r),
    early: o.parts.early?.({ pool, hub: farm.hub, jobs: farm.jobs, results: farm.results, wakeups: db.wakeups }) ?? [],
  });
}

function routers(o: AppInput, db: Database, farm: Farm, r: Routing): Router[] {
  const { cfg, logger } = o;
  const many = cfg.replicas.mode === 'many';
  const { pool } = db;
  const { hub, jobs, results } = farm;
  return [
    auditRouter(r.audit),
    auditPageRouter(r.audit, { farm: true }),
    ...(o.parts.routers?.({ pool, hub, jobs, results, fold: farm.fold, wakeups: db.wakeups }) ?? []),
    // In front of the forwarding: an offline node's job page, from the jobs table and the index.
    storedJobPageRouter({ hub, jobs, results }),
    portalRouter({
      pool,
      hub,
      jobs,
      reservations: r.reservations,
      results,
      awaits: r.awaits,
      publicUrl: cfg.public_url,
      settleMs: cfg.read_your_writes_max_secs * 1000,
      ...(many && { replicaId: r.replicaId }),
      ...(many && r.proxy && { atOtherReplicas: atOtherReplicas(pool, r.proxy, r.replicaId, logger.child({ part: 'replicas' })) }),
      ...(many && r.proxy && { toAnyNodeElsewhere: toAnyNodeElsewhere(pool, r.proxy, r.replicaId) }),
      ...(many && o.parts.jobExited && { jobExited: o.parts.jobExited, awaitHoldMs: cfg.api.await_completion_secs * 1000 }),
    }),
    ...portalWebRouters({ pool, hub, reservations: r.reservations, results, publicUrl: cfg.public_url, ...(many && { replicaId: r.replicaId }) }),
  ];
}

/**
 * The hub on the server, the sweeper, then the port. Last opened, so first closed: the requests under way end
 * first, while the nodes are still connected (drain.ts), so a replica's rolling restart resets no request; a single
 * portal has no other to send the next request to, so it does not wait.
 */
async function serve(cfg: PortalConfig, logger: Logger, stack: ResourceStack, p: Database & Identity & Farm & ReturnType<typeof openApp>): Promise<Portal> {
  const many = cfg.replicas.mode === 'many';
  const { server, app } = p;
  const drain = new Drain(server, app.callback(), (o) => logger.info(o, 'stopping: the requests under way drained'));
  await stack.open('hub', async () => {
    await p.hub.start(server);
    return { value: p.hub, close: () => p.hub.close() };
  });
  if (p.lease?.lost) p.hub.abandon('this portal replica lost its lease'); // lost before the hub was there to drop
  const sweeper = p.sweeper;
  if (sweeper) {
    sweeper.start();
    stack.defer('replica sweeper', () => sweeper.stop());
  }
  await listen(server, cfg.listen);
  const addr = server.address() as AddressInfo;
  const url = `http://${addr.family === 'IPv6' ? `[${addr.address}]` : addr.address}:${addr.port}`;
  logger.info({ url, heartbeat_secs: cfg.heartbeat_secs, ...(p.lease && { replica: p.lease.replicaId }) }, 'farmhand portal is listening');
  let draining: Promise<void> | undefined;
  const drained = () =>
    (draining ??= (async () => {
      const answered = await drain.run(many ? DRAIN_MS : 0, many ? DRAIN_UNSAFE_MS : 0, many ? Math.ceil(cfg.replicas.lease_secs) : 5);
      if (answered > 0) logger.info({ answered }, 'stopping: requests still unanswered were answered 503 with Retry-After');
    })());
  stack.defer('requests under way', drained);
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= stack.close().then(() => logger.info('farmhand portal stopped')));
  const { pool, hub, jobs, results, fold, awaits, lock, replicaId, places, proxy, lease, sessions, wakeups } = p;
  return { url, app, pool, hub, jobs, results, fold, awaits, lock, replicaId, places, proxy, lease, sessions, wakeups, drain: drained, stop };
}
