/**
 * The queue's ports built from the portal's own parts (docs/queue.md, "Wiring"), for the composition root:
 *
 * - `farmNodeStates`: each node's availability as the portal's front door and `GET /api/v2/nodes` decide it
 *   (nodeViews.ts linkOf, availability.ts farmNodeAvailability: the hub's link, or the database's row for a node of
 *   another replica; the farm's reservation; the running job), with its pool's health check when given one
 *   (health.ts: unhealthy, or held for a check), which nodes this process starts jobs on (connected here), and the
 *   hub's events that may free a node.
 * - `hubJobStarter`: the path of `POST /api/v2/run_tests` with a node_id through the portal: the request forwarded
 *   over the node's connection (hub.forward), on behalf of the user who queued the job, the node's answer read.
 */
import type pg from 'pg';
import type { Availability } from '../../core/availability.js';
import type { FarmEvent } from '../../core/events.js';
import type { FarmHub, FarmReservation, FarmReservations } from '../contract.js';
import { farmNodeAvailability } from '../portal/availability.js';
import { linkOf, NODE_COLUMNS, type NodeRow } from '../portal/nodeViews.js';
import type { PoolHealthChecks } from './health.js';
import { nodeHealthAll, unhealthyDetail, type NodeHealth } from './poolStore.js';
import type { JobStarter, NodeStates, StartOutcome } from './ports.js';

/** The hub's events after which a node may take a job (and any change of a node's own availability: onAvailabilityChange). */
const FREEING: ReadonlySet<string> = new Set(['job.exited', 'node.online', 'reservation.ended', 'reservation.interrupted']);

export interface FarmNodeStatesDeps {
  pool: pg.Pool;
  hub: Pick<FarmHub, 'link' | 'onEvent' | 'onAvailabilityChange'>;
  reservations?: Pick<FarmReservations, 'activeAll'> | undefined;
  /** Replicas "many": this replica's id (a node of another replica is read from the database). */
  replicaId?: string | undefined;
  /**
   * The pools' health checks (health.ts PoolHealthChecks): a node whose check failed is `unhealthy` (node_health), one
   * whose check is due or running is held (busy). Absent: the nodes' health is not looked at.
   */
  health?: Pick<PoolHealthChecks, 'held' | 'onChange'> | undefined;
}

export function farmNodeStates(d: FarmNodeStatesDeps): NodeStates {
  return {
    async availability() {
      const { rows } = await d.pool.query<NodeRow>(`SELECT ${NODE_COLUMNS}`);
      // The checks' holds before their verdicts: a check's verdict is committed before a pass lets its hold go, so read
      // in this order a node just checked shows either held or its verdict, never neither (read the other way round, a
      // verdict committed between the two reads left a failed node free for one pass).
      const checking = new Map(rows.map((r) => [r.node_id, d.health?.held(r.node_id)]));
      const held = (await d.reservations?.activeAll()) ?? new Map<string, FarmReservation>();
      const health = d.health ? await nodeHealthAll(d.pool) : new Map<string, NodeHealth>();
      const out = new Map<string, Availability>();
      for (const row of rows) {
        const link = linkOf(d, row);
        const offline = link ? link.offlineReason : (row.offline_reason ?? 'it has never connected to the portal');
        const base = farmNodeAvailability(link, offline, held.get(row.node_id));
        out.set(row.node_id, d.health ? withPoolHealth(base, health.get(row.node_id), checking.get(row.node_id)) : base);
      }
      return out;
    },
    isLocal: (nodeId) => d.hub.link(nodeId)?.online === true,
    jobOf: (nodeId) => d.hub.link(nodeId)?.job ?? null,
    onChange: (fn) => {
      const offs = [d.hub.onEvent((e: FarmEvent) => (FREEING.has(e.type) ? fn() : undefined)), d.hub.onAvailabilityChange?.(() => fn()), d.health?.onChange(fn)];
      return () => offs.forEach((off) => off?.());
    },
  };
}

/**
 * A node's availability with its pool's health check (docs/health-checks.md, "A pool's health check"): offline,
 * licence, maintenance and the node's own health check stand; then a failed pool check (`unhealthy`, naming the
 * result), over a reservation and a running job (the node's own order); then a check due or running, shown as busy.
 */
export function withPoolHealth(base: Availability, health: NodeHealth | undefined, held: string | undefined): Availability {
  if (base.kind === 'offline' || base.kind === 'licence_expired' || base.kind === 'maintenance' || base.kind === 'unhealthy') return base;
  if (health?.state === 'unhealthy') return { kind: 'unhealthy', detail: unhealthyDetail(health) };
  if (held !== undefined && base.kind === 'available') return { kind: 'running', detail: held };
  return base;
}

/** A Job object is a few KiB; more is the node misbehaving. */
const MAX_ANSWER = 1 << 20;

export interface HubJobStarterDeps {
  hub: Pick<FarmHub, 'forward' | 'link'>;
  /** The portal's base URL (its public_url), so the job's URLs point at the portal. */
  baseUrl: string;
}

export function hubJobStarter(d: HubJobStarterDeps): JobStarter {
  return {
    async start(req, signal): Promise<StartOutcome> {
      const body = Buffer.from(JSON.stringify({ ...req.run, node_id: req.nodeId }));
      const headers: Record<string, string> = { 'content-type': 'application/json', accept: 'application/json', ...(req.key !== undefined && { 'idempotency-key': req.key }) };
      // Not connected here: nothing is sent, so the node surely did not start it.
      if (d.hub.link(req.nodeId)?.online !== true) return { ok: false, retry: true, status: null, message: `node ${req.nodeId} is not connected to this portal` };
      try {
        const res = await d.hub.forward(req.nodeId, { method: 'POST', path: '/api/v2/run_tests', headers, body, user: req.username, baseUrl: d.baseUrl }, signal);
        const text = await readAll(res.body);
        const parsed = safeJson(text) as { job_uid?: unknown; message?: unknown } | undefined;
        if (res.status === 200 && typeof parsed?.job_uid === 'string') return { ok: true, job_uid: parsed.job_uid };
        const message = typeof parsed?.message === 'string' ? parsed.message : text.slice(0, 500);
        // The node's own "not now": busy (409), rate limited (429), offline, unhealthy or in maintenance (503).
        if (res.status === 409 || res.status === 429 || res.status === 503) return { ok: false, retry: true, status: res.status, message };
        // A 200 without a job, a failure on the way (the link's 502, a 500, a 504): whether it started is not known.
        if (res.status === 200 || res.status >= 500) return { ok: false, retry: true, unknown: true, status: res.status, message };
        return { ok: false, retry: false, status: res.status, message };
      } catch (e) {
        // No answer in time, or the connection lost: the request may have reached the node.
        return { ok: false, retry: true, unknown: true, status: null, message: e instanceof Error ? e.message : String(e) };
      }
    },
  };
}

async function readAll(stream: AsyncIterable<Buffer | string>): Promise<string> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += b.length;
    if (size > MAX_ANSWER) throw new Error(`the node's answer to run_tests is over ${MAX_ANSWER} bytes`);
    parts.push(b);
  }
  return Buffer.concat(parts).toString('utf8');
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
