/**
 * Where a node-scoped request is answered (docs/farm.md, "Many portals: the proxy"), decided in one place:
 *
 * - **here**: the node is connected to this portal. The portal's routers answer it: from the portal's own copy
 *   where they have one (a stored result's files, an ended job in PostgreSQL), else forwarded to the node over its
 *   connection (nodeForward.ts).
 * - **replica**: the node is connected to another replica (`nodes.owner_replica`, whose row in `portal_replicas`
 *   has a live lease): the request is proxied to that replica over HTTP (replicaProxy.ts), which serves it as its own.
 * - **away**: no live replica holds it (never connected, gone, its replica's lease lapsed, or it is this replica's
 *   and not connected): the routers answer from the portal's own copy, or 503 `device_unavailable` with Retry-After.
 * - **unknown**: no such node: the routers' 404.
 *
 * In mode "single" there is no other replica: every request is here or away, decided by the hub's memory alone,
 * without a query. A request another replica passed on is never passed on again (no loops): its sender found this
 * replica the owner; if the node has moved since, it is answered here as away (503, the client retries).
 */
import type { Context, Middleware, Next } from 'koa';
import type pg from 'pg';
import { bodyOf } from '../../http/body.js';
import type { FarmHub } from '../contract.js';
import { replicaCallerOf } from './replicaAuth.js';
import type { ReplicaProxy } from './replicaProxy.js';

export type NodePlace = { kind: 'here' } | { kind: 'replica'; replicaId: string; url: string } | { kind: 'away' } | { kind: 'unknown' };

/** Whether this portal holds the node's connection now: its routers answer for it (own copy, or the node). */
export const isHere = (hub: Pick<FarmHub, 'link'>, nodeId: string): boolean => hub.link(nodeId)?.online === true;

/**
 * How long a node's owner replica, once read, is used without reading it again. A node that moved in that time has
 * its requests passed to the replica it left, which answers 503 (the node is away there, and a passed request is not
 * passed on again): the entry is dropped at once (`forget`), so the client's retry finds the new owner.
 */
export const OWNER_CACHE_MS = 1_000;

export class NodePlaces {
  private readonly owners = new Map<string, { place: NodePlace & { kind: 'replica' }; until: number }>();

  constructor(
    private readonly o: {
      pool: pg.Pool;
      hub: Pick<FarmHub, 'link'>;
      /** This replica's id; undefined in mode "single". */
      replicaId?: string;
      now?: () => number;
    },
  ) {}

  /** Drop what is known of the node's owner (it did not answer, or answered that the node is away). */
  forget(nodeId: string): void {
    this.owners.delete(nodeId);
  }

  async where(nodeId: string): Promise<NodePlace> {
    if (isHere(this.o.hub, nodeId)) return { kind: 'here' };
    if (this.o.replicaId === undefined) return this.o.hub.link(nodeId) ? { kind: 'away' } : this.registered(nodeId);
    const now = (this.o.now ?? Date.now)();
    const known = this.owners.get(nodeId);
    if (known && known.until > now) return known.place;
    const place = await this.owner(nodeId);
    if (place.kind === 'replica') {
      if (this.owners.size > 10_000) this.owners.clear();
      this.owners.set(nodeId, { place, until: now + OWNER_CACHE_MS });
    } else {
      this.owners.delete(nodeId);
    }
    return place;
  }

  private async owner(nodeId: string): Promise<NodePlace> {
    const { rows } = await this.o.pool.query<{ owner_replica: string | null; url: string | null; live: boolean | null }>(
      `SELECT n.owner_replica, r.url, r.lease_until > now() AS live
       FROM nodes n LEFT JOIN portal_replicas r ON r.replica_id = n.owner_replica WHERE n.node_id = $1`,
      [nodeId],
    );
    const row = rows[0];
    if (!row) return { kind: 'unknown' };
    if (row.owner_replica && row.owner_replica !== this.o.replicaId && row.url && row.live) return { kind: 'replica', replicaId: row.owner_replica, url: row.url };
    return { kind: 'away' };
  }

  private async registered(nodeId: string): Promise<NodePlace> {
    const { rowCount } = await this.o.pool.query(`SELECT 1 FROM nodes WHERE node_id = $1`, [nodeId]);
    return rowCount ? { kind: 'away' } : { kind: 'unknown' };
  }
}

/** The decoded path segment, or undefined when it is not one (a bad escape). */
const seg = (s: string | undefined): string | undefined => {
  if (!s) return undefined;
  try {
    return decodeURIComponent(s);
  } catch {
    return undefined;
  }
};

/**
 * The node-scoped requests, by path: a node's own (`/api/v2/nodes/<id>[/...]`, its pages `/app/nodes/<id>/...`), a
 * job's (`/api/v{1,2}/jobs/<node>/<hex>/<n>[/...]`, `/app/jobs/...`), a result's (`/api/v2/results/<node>/...`,
 * `/api/v1/result/<node>/...`, `/app/results/<node>/...`, whole ids only: the lists are the farm's) and run_tests
 * (the body's node_id). Anything else is the farm's, answered by any replica.
 */
const NODE_PATHS: RegExp[] = [
  /^\/api\/v2\/nodes\/([^/]+)(?:\/|$)/,
  /^\/app\/nodes\/([^/]+)\//,
  /^\/api\/v[12]\/jobs\/([^/]+)\/[^/]+\/[^/]+(?:\/|$)/,
  /^\/app\/jobs\/([^/]+)\/[^/]+\/[^/]+$/,
  /^\/api\/v2\/results\/([^/]+)\/[^/]+\/[^/]+\/[^/]+/,
  /^\/api\/v1\/result\/([^/]+)\/[^/]+\/[^/]+\/[^/]+/,
  /^\/app\/results\/([^/]+)\/[^/]+\/[^/]+\/[^/]+/,
];

/** The node a request is for, when it is node-scoped. */
export function nodeOfRequest(ctx: Context): string | undefined {
  if (ctx.path === '/api/v2/run_tests' && ctx.method === 'POST') {
    const id = (bodyOf(ctx) as { node_id?: unknown } | null)?.node_id;
    return typeof id === 'string' ? id : undefined;
  }
  for (const re of NODE_PATHS) {
    const m = re.exec(ctx.path);
    if (m) return seg(m[1]);
  }
  return undefined;
}

/**
 * Mounted after authentication and body parsing, before the routers: a node-scoped request for a node another
 * replica holds is proxied there; any other request goes on to this portal's routers (here, away, unknown).
 */
export function placeNodeRequests(o: { places: NodePlaces; proxy: ReplicaProxy }): Middleware {
  return async function nodePlace(ctx: Context, next: Next): Promise<void> {
    const nodeId = replicaCallerOf(ctx) ? undefined : nodeOfRequest(ctx);
    const place = nodeId === undefined ? undefined : await o.places.where(nodeId);
    if (place?.kind === 'replica') {
      try {
        await o.proxy.pass(ctx, nodeId!, place);
      } catch (e) {
        o.places.forget(nodeId!);
        throw e;
      }
      if (ctx.status === 503) o.places.forget(nodeId!);
      return;
    }
    await next();
  };
}
