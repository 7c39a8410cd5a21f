/**
 * The whole portal: `startPortal` (pool, migrations, hub, jobs, the v2 routes
 * of nodes and forwarding) built with every real part of the farm - identity
 * from PostgreSQL, reservations, result uploads and the farm-wide results,
 * the events outbox with its SSE stream and webhooks. `farmhand portal` and
 * the tests start the portal through here, so both run the same thing.
 */
import type Router from '@koa/router';
import { availabilityText } from '../../core/availability.js';
import type { Logger } from '../../core/ports.js';
import { EventStream } from '../../http/events.js';
import { version } from '../../version.js';
import type { FarmHub, NodeLink } from '../contract.js';
import { farmStreamSource, OutboxListener, PgEventLog } from '../events.js';
import { PgNodeCredentials } from '../nodeCredentials.js';
import { farmNodeStates, hubJobStarter } from '../queue/adapters.js';
import { PoolHealthChecks } from '../queue/health.js';
import { PoolMaintenance } from '../queue/pool.js';
import { QueueDispatcher, type DispatchEvent, type QueueDispatcherOptions } from '../queue/dispatcher.js';
import type { NodeStates } from '../queue/ports.js';
import { queueRouter } from '../queue/routes.js';
import { PgJobQueue } from '../queue/store.js';
import { farmReservationRouter } from '../reservationRoutes.js';
import { PgReservations } from '../reservations.js';
import { farmResultRouter, forwardThroughHub } from '../resultRoutes.js';
import { StoredResults } from '../storedResults.js';
import { uploadRouter } from '../uploadRoutes.js';
import { PgUploadLocks } from '../uploadLocks.js';
import { whenJobExited, type FarmWakeups } from '../wakeups.js';
import { FarmUploads } from '../uploads.js';
import { PgTokenVerifier } from '../users.js';
import { FarmWebhooks } from '../webhooks.js';
import { linkAvailability } from './availability.js';
import type { PortalConfig } from './config.js';
import { NODE_COLUMNS, remoteLink, type NodeRow } from './nodeViews.js';
import { startPortal, type Portal, type PortalParts } from './portal.js';
import { ResourceStack, type ResourceEvent } from '../../service/resources.js';
import { storedResultPageRouter } from './web.js';
import { insertAuditEntries } from '../audit.js';
import type { NewAuditEntry } from '../../core/audit.js';
import type pg from 'pg';

export interface FarmPortal extends Portal {
  reservations: PgReservations;
  events: { log: PgEventLog; listener: OutboxListener; stream: EventStream; webhooks: FarmWebhooks };
  store: StoredResults;
  uploads: FarmUploads;
  /** The job queue (docs/queue.md): its store, where each node stands, and this process's dispatcher (none with `queue.dispatch: false`). */
  queue: { store: PgJobQueue; nodes: NodeStates; dispatcher: QueueDispatcher | undefined };
}

/**
 * Why a node cannot be reserved now, from what its connection says (the reservation itself is the
 * database's business): not connected, running a job, or the node's own reason (licence, capture, health
 * check), decided by the kinds (availability.ts linkAvailability), never by the reason's text.
 * Whether it runs a job is its ordered events' word (NodeLink.job), not the snapshot's, which lags: a
 * node whose stop has just answered is free at once (docs/farm.md, "A stopped job through the portal").
 */
export function busyReason(link: NodeLink | undefined): string | null {
  return availabilityText(linkAvailability(link));
}

export interface FarmPortalOptions extends Pick<PortalParts, 'onLockLost' | 'onLeaseLost'> {
  /** How often waiting reservation requests look again without a wake-up (default 500 ms; tests make it long). */
  reservationRecheckMs?: number;
  /**
   * Told of every resource opened and closed, in order (src/service/resources.ts). What it throws when told a
   * resource opened fails the start at that step: the tests' seam for a start that fails half-way.
   */
  onResource?: (e: ResourceEvent) => void;
  /** The queue's dispatcher: `dispatch: false` starts none (a test that runs its own); its timings; told of each of its events. */
  queue?: QueuePortalOptions;
}

export type QueuePortalOptions = Pick<QueueDispatcherOptions, 'startTimeoutMs' | 'pollMs' | 'cooldownMs' | 'settleMs' | 'lostNodeMs' | 'onEvent'> & { dispatch?: boolean };

/** The farm's parts, made in the portal's factories (so they close among its resources), started once it listens. */
interface FarmParts {
  reservations?: PgReservations;
  log?: PgEventLog;
  listener?: OutboxListener;
  stream?: EventStream;
  store?: StoredResults;
  uploads?: FarmUploads;
  locks?: PgUploadLocks | undefined;
  webhooks?: FarmWebhooks;
  queue?: PgJobQueue;
  nodes?: NodeStates;
  dispatcher?: QueueDispatcher;
  pool?: pg.Pool;
  wakeups?: FarmWakeups;
  replicaId?: string | undefined;
  hub?: Pick<FarmHub, 'forward' | 'link'>;
  /** The hub as the pools' health checks and maintenance read it (link, links, events, folds, forwards). */
  nodeHub?: Pick<FarmHub, 'link' | 'links' | 'onEvent' | 'folded' | 'forward'>;
  /** The pools' health checks (docs/health-checks.md): the queue's node states read their verdicts. */
  health?: PoolHealthChecks;
  /** The portal's base URL for links in the nodes' answers (its public URL, else where it listens). */
  baseUrl?: string;
}

/**
 * Start the whole portal. Its resources and the farm's are one stack (src/service/resources.ts): a failed start and
 * `stop` close the same list in reverse. The farm's parts are made in the portal's factories, so they close after the
 * hub (its last events go into the outbox) and the requests under way, and before the pool.
 */
export async function startFarmPortal(cfg: PortalConfig, logger: Logger, opts: FarmPortalOptions = {}): Promise<FarmPortal> {
  const { reservationRecheckMs, onResource, queue, ...o } = opts;
  const stack = new ResourceStack({ logger, ...(onResource && { onEvent: onResource }) });
  const f: FarmParts = {};
  const portal = await startPortal(cfg, logger, { ...o, ...farmFactories(cfg, logger, stack, f, reservationRecheckMs), stack });
  try {
    await startParts(cfg, logger, stack, f);
    if (queue?.dispatch !== false) startDispatcher(cfg, logger, stack, f, portal.url, queue);
  } catch (e) {
    await portal.stop();
    throw e;
  }
  return {
    ...portal,
    reservations: f.reservations!,
    events: { log: f.log!, listener: f.listener!, stream: f.stream!, webhooks: f.webhooks! },
    store: f.store!,
    uploads: f.uploads!,
    queue: { store: f.queue!, nodes: f.nodes!, dispatcher: f.dispatcher },
  };
}

const partsLogger = (logger: Logger, part: string): Logger => logger.child({ part });

function farmFactories(cfg: PortalConfig, logger: Logger, stack: ResourceStack, f: FarmParts, reservationRecheckMs: number | undefined): Partial<PortalParts> {
  return {
    opsSources: {
      uploadsInFlight: () => f.uploads?.inFlight ?? 0,
      reservedNodes: async () => (f.reservations ? (await f.reservations.activeAll()).keys() : []),
      busyReason,
    },
    jobExited: (uid, signal) => whenJobExited(f.listener!, uid, signal),
    tokens: (pool) => new PgTokenVerifier(pool, { logger: partsLogger(logger, 'tokens') }),
    credentials: (pool) => new PgNodeCredentials(pool),
    reservations: (pool, hub, wakeups, replicaId) => {
      Object.assign(f, { pool, hub, wakeups, replicaId });
      const log = (f.log = new PgEventLog({ pool, logger: partsLogger(logger, 'events'), keepRows: cfg.events.buffer_size }));
      stack.defer('outbox log', () => log.close());
      const r = (f.reservations = new PgReservations({
        pool,
        // Replicas "many": a node connected to another replica is read from the database, as the node list reads it.
        isBusy: async (id, db) => {
          const link = hub.link(id);
          if (link?.online || replicaId === undefined) return busyReason(link);
          const row = (await db.query<NodeRow>(`SELECT ${NODE_COLUMNS} WHERE n.node_id = $1`, [id])).rows[0];
          return busyReason((row && remoteLink(row, replicaId)) ?? link);
        },
        events: log,
        logger: partsLogger(logger, 'reservations'),
        wakeups,
        ...(reservationRecheckMs !== undefined && { recheckMs: reservationRecheckMs }),
      }));
      stack.defer('reservations', () => r.close());
      return r;
    },
    routers: (p) => eventRouters(cfg, logger, stack, f, p),
    early: ({ pool }) => {
      // Replicas share storage_dir: one writer per partial file among them, by a lease in PostgreSQL (docs/farm.md, "Many portals").
      f.locks = cfg.replicas.mode === 'many' ? new PgUploadLocks(pool, { ...(cfg.replicas.replica_id && { holder: cfg.replicas.replica_id }) }) : undefined;
      f.uploads = new FarmUploads(f.store!, { maxPartialBytesPerNode: cfg.max_partial_upload_bytes_per_node, ...(f.locks && { locks: f.locks }) });
      return [uploadRouter({ uploads: f.uploads, store: f.store!, credentials: new PgNodeCredentials(pool) })];
    },
  };
}

/** Every node's events (in the fold's transaction), and the hub's own (online/offline, the lost run), go into the outbox. */
function eventRouters(cfg: PortalConfig, logger: Logger, stack: ResourceStack, f: FarmParts, p: Parameters<NonNullable<PortalParts['routers']>>[0]): Router[] {
  const { pool, hub, results, fold } = p;
  f.log!.attach(hub, fold);
  const listener = (f.listener = new OutboxListener({ pool, logger: partsLogger(logger, 'outbox') }));
  stack.defer('outbox listener', () => listener.close());
  const webhooks = (f.webhooks = new FarmWebhooks({ pool, listener, settings: cfg.webhooks, userAgent: `farmhand-portal/${version}`, logger: partsLogger(logger, 'webhooks') }));
  stack.defer('webhooks', () => webhooks.close());
  const stream = (f.stream = new EventStream(farmStreamSource(listener), {
    maxClients: cfg.events.max_clients,
    maxPerCaller: cfg.events.max_clients_per_caller,
    heartbeatMs: cfg.events.heartbeat_secs * 1000,
    maxBacklogBytes: cfg.events.max_client_backlog_bytes,
    logger: partsLogger(logger, 'event-stream'),
  }));
  stack.defer('event stream', () => stream.close());
  const store = (f.store = new StoredResults({ storageDir: cfg.storage_dir, index: results, pool }));
  const r = f.reservations!;
  return [
    storedResultPageRouter({ store, hub, pool, ...(cfg.public_url && { publicUrl: cfg.public_url }) }),
    farmResultRouter({ store, forward: forwardThroughHub(hub, cfg.public_url), ...(cfg.public_url && { publicUrl: cfg.public_url }) }),
    farmReservationRouter({ reservations: r, notices: (u, a) => r.takeNotices(u, a) }),
    queueRouter({ queue: (f.queue = new PgJobQueue(pool)), nodes: queueNodeStates(logger, f, pool, hub) }),
    stream.router(),
  ];
}

/**
 * Where each node stands for the queue: the hub's and the reservations' word, with the pools' health checks' verdicts
 * laid over it (a node whose check failed is `unhealthy`; one whose check is due or running is busy).
 */
function queueNodeStates(logger: Logger, f: FarmParts, pool: pg.Pool, hub: NonNullable<FarmParts['nodeHub']>): NodeStates {
  const base = { pool, hub, reservations: f.reservations!, replicaId: f.replicaId };
  f.nodeHub = hub;
  f.health = new PoolHealthChecks({
    pool,
    hub,
    // The portal's URL is known once it listens (startDispatcher), before any check starts.
    starter: { start: (req, signal) => hubJobStarter({ hub, baseUrl: f.baseUrl! }).start(req, signal) },
    wakeups: f.wakeups,
    audit: auditTo(pool, logger),
    logger: partsLogger(logger, 'health'),
    base: farmNodeStates(base),
  });
  return (f.nodes = farmNodeStates({ ...base, health: f.health }));
}

/** Audit entries written as they come (a failed write is logged, never the caller's failure). */
const auditTo = (pool: pg.Pool, logger: Logger) => ({
  record: (e: NewAuditEntry): void => void insertAuditEntries(pool, [e]).catch((err: unknown) => logger.warn({ err, action: e.action }, 'an audit entry was not written')),
});

/** Once the portal listens: the stored results, the reservations' timers, the outbox and its webhooks, the sweeps. */
async function startParts(cfg: PortalConfig, logger: Logger, stack: ResourceStack, f: FarmParts): Promise<void> {
  await f.store!.open();
  if (cfg.replicas.replica_id) await f.locks?.releaseMine();
  await f.reservations!.start();
  f.log!.start();
  await f.listener!.start();
  await f.webhooks!.start();
  // Uploads a node gave up on leave partial files behind: swept at start and every 6 hours.
  const sweep = (): void => {
    f.uploads!.sweepPartials().then(
      (n) => n > 0 && logger.info({ removed: n }, 'removed partial upload files untouched for 7 days'),
      (e: unknown) => logger.warn({ err: e }, 'sweeping partial upload files failed'),
    );
  };
  sweep();
  const sweeper = setInterval(sweep, 6 * 3600_000).unref();
  stack.defer('partial uploads sweep', () => clearInterval(sweeper));
  const retain = (): void => {
    f.store!.enforceRetention(cfg.retention).then(
      (n) => n > 0 && logger.info({ deleted: n }, 'retention deleted old results from the portal'),
      (e: unknown) => logger.warn({ err: e }, 'retention of the portal`s results failed; tried again at the next interval'),
    );
  };
  retain();
  const retainer = setInterval(retain, cfg.retention.interval_secs * 1000).unref();
  stack.defer('retention', () => clearInterval(retainer));
}

/**
 * The queue's dispatcher (docs/queue.md, "Dispatching"), once the portal listens: after the hub, the reservations and
 * the wake-ups, so closed before them. A queued job it starts is in the audit trail as `job.run` by the user who
 * queued it (via `portal`: the portal acted for them), with its queue id.
 */
function startDispatcher(cfg: PortalConfig, logger: Logger, stack: ResourceStack, f: FarmParts, url: string, o: QueuePortalOptions = {}): void {
  const { dispatch: _dispatch, onEvent, ...timings } = o;
  f.baseUrl = cfg.public_url ?? url;
  const log = partsLogger(logger, 'queue');
  const pool = f.pool!;
  const audit = (e: DispatchEvent): void => {
    if (e.type !== 'started') return;
    const { job } = e;
    const detail = { queue_id: job.queue_id, test_cases: job.request.test_cases.length, revision: job.request.test_pack_revision, api: 'queue' };
    const entry = { at: new Date().toISOString(), who: job.username, via: 'portal' as const, token_id: null, from: null, action: 'job.run' as const, node: job.node_id, target: job.job_uid, detail, outcome: 200 };
    insertAuditEntries(pool, [entry]).catch((err: unknown) => log.warn({ err, queue_id: job.queue_id }, 'queue: the audit entry of a started job was not written'));
  };
  const dispatcher = (f.dispatcher = new QueueDispatcher({
    pool,
    queue: f.queue!,
    nodes: f.nodes!,
    wakeups: f.wakeups,
    logger: log,
    starter: hubJobStarter({ hub: f.hub!, baseUrl: f.baseUrl }),
    ...timings,
    onEvent: (e) => {
      audit(e);
      if (e.type === 'started') log.info({ queue_id: e.job.queue_id, node: e.job.node_id, job_uid: e.job.job_uid, user: e.job.username }, 'queue: started a queued job');
      onEvent?.(e);
    },
  }));
  // The pools' health checks and maintenance first, so they close after the dispatcher.
  f.health!.start();
  stack.defer('pool health checks', () => f.health!.close());
  const maintenance = new PoolMaintenance({ pool, hub: f.nodeHub!, baseUrl: f.baseUrl, wakeups: f.wakeups, audit: auditTo(pool, log), logger: partsLogger(logger, 'pool-maintenance') });
  maintenance.start();
  stack.defer('pool maintenance', () => maintenance.close());
  dispatcher.start();
  stack.defer('queue dispatcher', () => dispatcher.close());
}
