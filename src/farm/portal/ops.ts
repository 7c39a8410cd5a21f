/**
 * The portal's operator contract (docs/farm.md, "Operating the portal"): `GET /healthz` (the process
 * answers), `GET /readyz` (the database answers and this portal holds the portal lock, or its replica lease; 503 with the
 * JSON error otherwise: what a load balancer's health check reads) and `GET /metrics` (Prometheus text,
 * farm-wide figures read at each scrape from the hub's memory, the pool and the lock; one database
 * query per scrape, for the reservations, whose last answer is kept while the database is away).
 *
 * The portal's own prom-client Registry (never the global one: two portals in one test process keep
 * apart). Names start with `farmhand_portal_`; no label carries a node, job or result id.
 */
import Router from '@koa/router';
import type pg from 'pg';
import { Counter, Gauge, Registry } from 'prom-client';
import type { NodeLink } from '../contract.js';
import type { Logger } from '../../core/ports.js';
import { isDatabaseUnavailable } from '../db/pool.js';
import type { PortalLock } from '../db/portalLock.js';
import type { ReplicaLease } from '../replicas/lease.js';
import { healthBody } from '../../http/opsRoutes.js';
import { version } from '../../version.js';
import { mount } from '../../http/endpoints/mount.js';

/** Checks behind /readyz, in this order: portal_lock with replicas "single", replica_lease with "many". */
export const PORTAL_READINESS_CHECKS = ['database', 'portal_lock', 'replica_lease'] as const;
type Check = (typeof PORTAL_READINESS_CHECKS)[number];

export interface PortalOpsSources {
  pool: pg.Pool;
  /** Replicas "single": the portal lock. */
  lock?: PortalLock;
  /** Replicas "many": this replica's lease. */
  lease?: Pick<ReplicaLease, 'held' | 'lost' | 'liveReplicas'>;
  /** Replicas "many": the sweeps this replica has done (src/farm/replicas/sweeper.ts). */
  sweeps?: () => number;
  /** The nodes' links as the hub has them (src/farm/hub/). */
  links: () => NodeLink[];
  /** The nodes' inboxes (src/farm/hub/intake.ts): events deferred since start, the most one inbox held; absent: not exported. */
  inbox?: () => { eventsDeferred: number; inboxPeak: number };
  /** Forwarded requests to nodes: in flight now, and since start. */
  forwards: () => { inFlight: number; total: number };
  /** Requests passed to other replicas (mode "many", nodePlace.ts): in flight now, and since start; absent: not exported. */
  replicaProxy?: () => { inFlight: number; total: number };
  /** Result-file uploads being written now; absent: not exported. */
  uploadsInFlight?: () => number;
  /** The nodes a live reservation holds (a database query); absent: no reservations. */
  reservedNodes?: () => Promise<Iterable<string>>;
  /** Why a connected node cannot take a job now (src/farm/portal/farm.ts busyReason); null: it can. */
  busyReason?: (link: NodeLink) => string | null;
  /** Where /readyz logs why the database probe failed. */
  logger?: Logger;
  /** /readyz's database probe times out after this (default 2 s: a load balancer's check waits about that long). */
  readyTimeoutMs?: number;
}

export interface PortalOps {
  router: Router;
  registry: Registry;
}

export function portalOps(s: PortalOpsSources): PortalOps {
  const registry = new Registry();
  const registers = [registry];
  let reserved = new Set<string>();

  new Gauge({ name: 'farmhand_portal_build_info', help: 'Always 1: the farmhand version and the Node.js version running the portal.', labelNames: ['version', 'nodejs'], registers }).set(
    { version, nodejs: process.versions.node },
    1,
  );
  const online = () => s.links().filter((l) => l.online);
  new Gauge({
    name: 'farmhand_portal_nodes_online',
    help: 'Nodes connected to this portal now.',
    registers,
    collect() {
      this.set(online().length);
    },
  });
  new Gauge({
    name: 'farmhand_portal_nodes_available',
    help: 'Connected nodes that would take a new job now: not running one, not reserved, no reason of their own (licence, capture).',
    registers,
    async collect() {
      if (s.reservedNodes) {
        // The database away: the last answer stands (the scrape still answers).
        reserved = await s.reservedNodes().then((ids) => new Set(ids), () => reserved);
      }
      this.set(online().filter((l) => !reserved.has(l.nodeId) && (s.busyReason?.(l) ?? null) === null).length);
    },
  });
  new Gauge({
    name: 'farmhand_portal_jobs_running',
    help: 'Test jobs running on the connected nodes, as the nodes last said.',
    registers,
    collect() {
      this.set(online().filter((l) => (l.snapshot?.job as { status?: string } | null | undefined)?.status === 'running').length);
    },
  });
  if (s.uploadsInFlight) {
    const uploads = s.uploadsInFlight;
    new Gauge({
      name: 'farmhand_portal_uploads_in_flight',
      help: 'Result-file uploads from nodes being written now.',
      registers,
      collect() {
        this.set(uploads());
      },
    });
  }
  new Gauge({
    name: 'farmhand_portal_forwards_in_flight',
    help: 'Requests forwarded to nodes and not yet answered in full.',
    registers,
    collect() {
      this.set(s.forwards().inFlight);
    },
  });
  // Counters kept by the hub and the lock, read at scrape (as the node's webhook deliveries are).
  if (s.inbox) {
    const inbox = s.inbox;
    new Counter({
      name: 'farmhand_portal_node_events_deferred_total',
      help: "Node events not taken because the node's inbox was full (or a resend was awaited) since the portal started; the node sends them again.",
      registers,
      collect() {
        this.reset();
        this.inc(inbox().eventsDeferred);
      },
    });
    new Gauge({
      name: 'farmhand_portal_node_inbox_peak_events',
      help: "The most events one node's inbox has held since the portal started (bounded by max_node_inbox_events).",
      registers,
      collect() {
        this.set(inbox().inboxPeak);
      },
    });
  }
  new Counter({
    name: 'farmhand_portal_forwards_total',
    help: 'Requests forwarded to nodes since the portal started.',
    registers,
    collect() {
      this.reset();
      this.inc(s.forwards().total);
    },
  });
  if (s.replicaProxy) {
    const proxied = s.replicaProxy;
    new Gauge({
      name: 'farmhand_portal_replica_proxied_in_flight',
      help: 'Requests for nodes of other replicas passed to them and not yet answered in full.',
      registers,
      collect() {
        this.set(proxied().inFlight);
      },
    });
    new Counter({
      name: 'farmhand_portal_replica_proxied_total',
      help: 'Requests for nodes of other replicas passed to them since the portal started.',
      registers,
      collect() {
        this.reset();
        this.inc(proxied().total);
      },
    });
  }
  const pool = s.pool as pg.Pool & { totalCount: number; idleCount: number; waitingCount: number };
  new Gauge({
    name: 'farmhand_portal_database_pool',
    help: "The database pool: connections open (total), of them idle, and callers waiting for one (waiting); at most database_pool_size open.",
    labelNames: ['state'],
    registers,
    collect() {
      this.set({ state: 'total' }, pool.totalCount);
      this.set({ state: 'idle' }, pool.idleCount);
      this.set({ state: 'waiting' }, pool.waitingCount);
    },
  });
  const lock = s.lock;
  if (lock) {
    new Gauge({
      name: 'farmhand_portal_lock_held',
      help: '1 while this portal holds the portal lock (one portal per database); 0 while it is taking it again after its connection dropped.',
      registers,
      collect() {
        this.set(lock.held ? 1 : 0);
      },
    });
    new Counter({
      name: 'farmhand_portal_lock_reacquired_total',
      help: 'Times the portal lock was taken again after its database connection dropped.',
      registers,
      collect() {
        this.reset();
        this.inc(lock.reacquired);
      },
    });
  }
  const lease = s.lease;
  if (lease) {
    let replicas = 0;
    new Gauge({
      name: 'farmhand_portal_replica_lease_held',
      help: '1 while this portal replica holds its lease (replicas "many"); 0 once it lost it and stopped acting.',
      registers,
      collect() {
        this.set(lease.held ? 1 : 0);
      },
    });
    new Gauge({
      name: 'farmhand_portal_replicas',
      help: 'Portal replicas with a live lease on this database, this one included (the last answer while the database is away).',
      registers,
      async collect() {
        replicas = await lease.liveReplicas().catch(() => replicas);
        this.set(replicas);
      },
    });
    const sweeps = s.sweeps;
    if (sweeps) {
      new Counter({
        name: 'farmhand_portal_replica_sweeps_total',
        help: "Sweeps of gone replicas' nodes done by this replica (every lease_secs while it holds its lease).",
        registers,
        collect() {
          this.reset();
          this.inc(sweeps());
        },
      });
    }
  }

  const readiness = async (): Promise<{ ready: boolean; failed: Check[]; checks: Partial<Record<Check, { ok: boolean; detail: string }>> }> => {
    const database = await s.pool
      .query({ text: 'SELECT 1', query_timeout: s.readyTimeoutMs ?? 2000 } as pg.QueryConfig)
      .then(
        () => ({ ok: true, detail: 'answers' }),
        // Unauthenticated callers read this: no address, socket path or server message (those go to the log).
        (e: unknown) => {
          s.logger?.warn({ err: e }, '/readyz: the database does not answer');
          return { ok: false, detail: isDatabaseUnavailable(e) ? 'does not answer (the log says why)' : 'refused the probe (the log says why)' };
        },
      );
    const checks: Partial<Record<Check, { ok: boolean; detail: string }>> = { database };
    if (s.lock) {
      checks.portal_lock = s.lock.held
        ? { ok: true, detail: 'held by this portal' }
        : s.lock.lostToAnother
          ? { ok: false, detail: 'another portal took it: this portal must stop' }
          : { ok: false, detail: 'lost with its database connection; being taken again' };
    }
    if (s.lease) {
      checks.replica_lease = s.lease.held
        ? { ok: true, detail: 'held by this replica' }
        : { ok: false, detail: s.lease.lost ? 'lost: this replica stopped acting; restart it' : 'not renewed in time' };
    }
    const failed = PORTAL_READINESS_CHECKS.filter((c) => checks[c] && !checks[c].ok);
    return { ready: failed.length === 0, failed, checks };
  };

  const router = new Router();
  mount(router, 'GET /healthz', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = healthBody(version, false);
  });
  mount(router, 'GET /readyz', async (ctx) => {
    const r = await readiness();
    ctx.set('Cache-Control', 'no-store');
    ctx.status = r.ready ? 200 : 503;
    ctx.body = r.ready
      ? { ready: true, failed: [], checks: r.checks }
      : {
          error: 'not_ready',
          message: `the portal is not ready (${r.failed.map((c) => `${c}: ${r.checks[c]!.detail}`).join('; ')}); a load balancer sends requests to another one`,
          ready: false,
          failed: r.failed,
          checks: r.checks,
        };
  });
  mount(router, 'GET /metrics', async (ctx) => {
    const text = await registry.metrics();
    ctx.set('Cache-Control', 'no-store');
    ctx.type = registry.contentType;
    ctx.body = text;
  });
  return { router, registry };
}
