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
import type { NodeLink } from '../contract.js';
import { farmStreamSource, OutboxListener, PgEventLog } from '../events.js';
import { PgNodeCredentials } from '../nodeCredentials.js';
import { farmReservationRouter } from '../reservationRoutes.js';
import { PgReservations } from '../reservations.js';
import { farmResultRouter, forwardThroughHub } from '../resultRoutes.js';
import { StoredResults } from '../storedResults.js';
import { uploadRouter } from '../uploadRoutes.js';
import { PgUploadLocks } from '../uploadLocks.js';
import { whenJobExited } from '../wakeups.js';
import { FarmUploads } from '../uploads.js';
import { PgTokenVerifier } from '../users.js';
import { FarmWebhooks } from '../webhooks.js';
import { linkAvailability } from './availability.js';
import type { PortalConfig } from './config.js';
import { NODE_COLUMNS, remoteLink, type NodeRow } from './nodeViews.js';
import { startPortal, type Portal, type PortalParts } from './portal.js';
import { storedResultPageRouter } from './web.js';

export interface FarmPortal extends Portal {
  reservations: PgReservations;
  events: { log: PgEventLog; listener: OutboxListener; stream: EventStream; webhooks: FarmWebhooks };
  store: StoredResults;
  uploads: FarmUploads;
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
}

export async function startFarmPortal(cfg: PortalConfig, logger: Logger, opts: FarmPortalOptions = {}): Promise<FarmPortal> {
  const { reservationRecheckMs, ...o } = opts;
  let reservations: PgReservations | undefined;
  let log: PgEventLog | undefined;
  let listener: OutboxListener | undefined;
  let stream: EventStream | undefined;
  let store: StoredResults | undefined;
  let uploads: FarmUploads | undefined;
  let locks: PgUploadLocks | undefined;
  let sweeper: NodeJS.Timeout | undefined;
  let retainer: NodeJS.Timeout | undefined;
  const partsLogger = (part: string): Logger => logger.child({ part });
  const portal = await startPortal(cfg, logger, {
    ...o,
    opsSources: {
      uploadsInFlight: () => uploads?.inFlight ?? 0,
      reservedNodes: async () => (reservations ? (await reservations.activeAll()).keys() : []),
      busyReason,
    },
    jobExited: (uid, signal) => whenJobExited(listener!, uid, signal),
    tokens: (pool) => new PgTokenVerifier(pool, { logger: partsLogger('tokens') }),
    credentials: (pool) => new PgNodeCredentials(pool),
    reservations: (pool, hub, wakeups, replicaId) => {
      log = new PgEventLog({ pool, logger: partsLogger('events'), keepRows: cfg.events.buffer_size });
      reservations = new PgReservations({
        pool,
        // Replicas "many": a node connected to another replica is read from the database, as the node list reads it.
        isBusy: async (id, db) => {
          const link = hub.link(id);
          if (link?.online || replicaId === undefined) return busyReason(link);
          const row = (await db.query<NodeRow>(`SELECT ${NODE_COLUMNS} WHERE n.node_id = $1`, [id])).rows[0];
          return busyReason((row && remoteLink(row, replicaId)) ?? link);
        },
        events: log,
        logger: partsLogger('reservations'),
        wakeups,
        ...(reservationRecheckMs !== undefined && { recheckMs: reservationRecheckMs }),
      });
      return reservations;
    },
    routers: ({ pool, hub, results, fold }): Router[] => {
      // Every node's events (in the fold's transaction), and the hub's own (online/offline, the lost run), go into the outbox.
      log!.attach(hub, fold);
      listener = new OutboxListener({ pool, logger: partsLogger('outbox') });
      stream = new EventStream(farmStreamSource(listener), {
        maxClients: cfg.events.max_clients,
        maxPerCaller: cfg.events.max_clients_per_caller,
        heartbeatMs: cfg.events.heartbeat_secs * 1000,
        maxBacklogBytes: cfg.events.max_client_backlog_bytes,
        logger: partsLogger('event-stream'),
      });
      store = new StoredResults({ storageDir: cfg.storage_dir, index: results, pool });
      const r = reservations!;
      return [
        storedResultPageRouter({ store, hub, pool, ...(cfg.public_url && { publicUrl: cfg.public_url }) }),
        farmResultRouter({ store, forward: forwardThroughHub(hub, cfg.public_url), ...(cfg.public_url && { publicUrl: cfg.public_url }) }),
        farmReservationRouter({ reservations: r, notices: (u, a) => r.takeNotices(u, a) }),
        stream.router(),
      ];
    },
    early: ({ pool }) => {
      // Replicas share storage_dir: one writer per partial file among them, by a lease in PostgreSQL (docs/farm.md, "Many portals").
      locks = cfg.replicas.mode === 'many' ? new PgUploadLocks(pool, { ...(cfg.replicas.replica_id && { holder: cfg.replicas.replica_id }) }) : undefined;
      uploads = new FarmUploads(store!, { maxPartialBytesPerNode: cfg.max_partial_upload_bytes_per_node, ...(locks && { locks }) });
      return [uploadRouter({ uploads, store: store!, credentials: new PgNodeCredentials(pool) })];
    },
  });
  const webhooks = new FarmWebhooks({
    pool: portal.pool,
    listener: listener!,
    settings: cfg.webhooks,
    userAgent: `farmhand-portal/${version}`,
    logger: partsLogger('webhooks'),
  });
  try {
    await store!.open();
    if (cfg.replicas.replica_id) await locks?.releaseMine();
    await reservations!.start();
    log!.start();
    await listener!.start();
    await webhooks.start();
    // Uploads a node gave up on leave partial files behind: swept at start and every 6 hours.
    const sweep = (): void => {
      uploads!.sweepPartials().then(
        (n) => n > 0 && logger.info({ removed: n }, 'removed partial upload files untouched for 7 days'),
        (e: unknown) => logger.warn({ err: e }, 'sweeping partial upload files failed'),
      );
    };
    sweep();
    sweeper = setInterval(sweep, 6 * 3600_000).unref();
    const retain = (): void => {
      store!.enforceRetention(cfg.retention).then(
        (n) => n > 0 && logger.info({ deleted: n }, 'retention deleted old results from the portal'),
        (e: unknown) => logger.warn({ err: e }, 'retention of the portal`s results failed; tried again at the next interval'),
      );
    };
    retain();
    retainer = setInterval(retain, cfg.retention.interval_secs * 1000).unref();
  } catch (e) {
    await closeParts();
    await portal.stop();
    throw e;
  }
  async function closeParts(): Promise<void> {
    clearInterval(sweeper);
    clearInterval(retainer);
    stream?.close();
    await webhooks.close().catch(() => undefined);
    await listener?.close().catch(() => undefined);
    await reservations?.close().catch(() => undefined);
    await log?.close().catch(() => undefined);
  }
  let stopping: Promise<void> | undefined;
  return {
    ...portal,
    reservations: reservations!,
    events: { log: log!, listener: listener!, stream: stream!, webhooks },
    store: store!,
    uploads: uploads!,
    // The requests under way first (while the nodes are connected: drain.ts), then the hub (no more events come
    // in), then what feeds on them, the pool last (portal.stop).
    stop: () =>
      (stopping ??= (async () => {
        await portal.drain();
        await portal.hub.close();
        await closeParts();
        await portal.stop();
      })()),
  };
}
