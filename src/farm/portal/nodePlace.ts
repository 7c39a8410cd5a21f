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
 * replica the owner; if the node has moved since, it is answered 503 marked `unprocessed` (replicaProxy.ts), and the
 * sender passes it to the node's new owner.
 *
 * **A node between owners** (its owner stopping, the node reconnecting to another replica): a request whose owner
 * does not serve it (refused, or answered that it is stopping or no longer holds the node), or for a node this
 * replica saw at a live replica within RECENT_MS and now finds away, is **held** up to `holdMs`, and passed to the
 * node's next owner as soon as it has one: woken by the `node_owner` wake-up of the node's hello on any replica
 * (ownership.ts takeNode), else looked at again every HOLD_POLL_MS. A request that was not certainly unprocessed is
 * passed again only if it is a GET or HEAD. Past `holdMs`, the answer is what it was before: the owner's 503, or the
 * routers' (their own copy, else 503 with Retry-After).
 */
import type { Context, Middleware, Next } from 'koa';
import type pg from 'pg';
import { bodyOf } from '../../http/body.js';
import { farmPlacements } from '../../http/endpoints/place.js';
import type { Logger } from '../../core/ports.js';
import type { FarmHub } from '../contract.js';
import type { FarmWakeups } from '../wakeups.js';
import { replicaCallerOf } from './replicaAuth.js';
import { OWNER_UNAVAILABLE_HEADER, OwnerUnavailable, type ReplicaProxy } from './replicaProxy.js';

export type NodePlace = { kind: 'here' } | { kind: 'replica'; replicaId: string; url: string } | { kind: 'away' } | { kind: 'unknown' };

/** Whether this portal holds the node's connection now: its routers answer for it (own copy, or the node). */
export const isHere = (hub: Pick<FarmHub, 'link'>, nodeId: string): boolean => hub.link(nodeId)?.online === true;

/**
 * How long a node's owner replica, once read, is used without reading it again. A node that moved in that time has
 * its requests passed to the replica it left, which answers 503 (the node is away there, and a passed request is not
 * passed on again): the entry is dropped at once (`forget`), so the client's retry finds the new owner.
 */
export const OWNER_CACHE_MS = 1_000;

/** A node seen at a live replica (here or another) within this long, found away now, is taken to be between owners. */
export const RECENT_MS = 60_000;

/** A held request looks at the node's owner again this often when no wake-up came (a NOTIFY lost, none sent). */
export const HOLD_POLL_MS = 500;

export class NodePlaces {
  private readonly owners = new Map<string, { place: NodePlace & { kind: 'replica' }; until: number }>();
  /** When each node was last found at a live replica (here or another). */
  private readonly seenLive = new Map<string, number>();

  constructor(
    private readonly o: {
      pool: pg.Pool;
      hub: Pick<FarmHub, 'link'>;
      /** This replica's id; undefined in mode "single". */
      replicaId?: string;
      /** The farm's wake-ups (replicas "many"): a node's hello at any replica wakes the requests held for it. */
      wakeups?: Pick<FarmWakeups, 'on'>;
      now?: () => number;
    },
  ) {}

  private clock(): number {
    return (this.o.now ?? Date.now)();
  }

  private live(nodeId: string): void {
    if (this.seenLive.size > 10_000) this.seenLive.clear();
    this.seenLive.set(nodeId, this.clock());
  }

  /** Whether the node was at a live replica within RECENT_MS (so, found away now, it is likely reconnecting). */
  recentlyLive(nodeId: string): boolean {
    const t = this.seenLive.get(nodeId);
    return t !== undefined && this.clock() - t <= RECENT_MS;
  }

  /**
   * Resolves when the node may have changed owner (its hello at any replica, a resync of the wake-ups), after
   * HOLD_POLL_MS at most, at once when `signal` aborts.
   */
  moved(nodeId: string, signal: AbortSignal): Promise<void> {
    return new Promise((resolve) => {
      const offs: (() => void)[] = [];
      const done = () => {
        clearTimeout(t);
        for (const off of offs) off();
        signal.removeEventListener('abort', done);
        resolve();
      };
      const t = setTimeout(done, HOLD_POLL_MS);
      signal.addEventListener('abort', done, { once: true });
      if (signal.aborted) done();
      if (this.o.wakeups) {
        offs.push(this.o.wakeups.on('node_owner', (w) => w.node_id === nodeId && done()));
        offs.push(this.o.wakeups.on('resync', done));
      }
    });
  }

  /** The hub this portal's nodes are connected to. */
  hubOf(): Pick<FarmHub, 'link'> {
    return this.o.hub;
  }

  /** Drop what is known of the node's owner (it did not answer, or answered that the node is away). */
  forget(nodeId: string): void {
    this.owners.delete(nodeId);
  }

  async where(nodeId: string): Promise<NodePlace> {
    if (isHere(this.o.hub, nodeId)) {
      if (this.o.replicaId !== undefined) this.live(nodeId);
      return { kind: 'here' };
    }
    if (this.o.replicaId === undefined) return this.o.hub.link(nodeId) ? { kind: 'away' } : this.registered(nodeId);
    const now = this.clock();
    const known = this.owners.get(nodeId);
    if (known && known.until > now) return known.place;
    const place = await this.owner(nodeId);
    if (place.kind === 'replica') {
      if (this.owners.size > 10_000) this.owners.clear();
      this.owners.set(nodeId, { place, until: now + OWNER_CACHE_MS });
      this.live(nodeId);
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

/**
 * The node a request is for, when it is node-scoped: the table of endpoints says which requests are and where their
 * node id is (`farm`, src/http/endpoints/place.ts): a node's own (`/api/v2/nodes/<id>/...`, its pages), a job's, a
 * result's (whole ids only: the lists are the farm's) and run_tests (the body's node_id). Anything else is the farm's,
 * answered by any replica.
 */
export const nodeOfRequest = (ctx: Context): string | undefined => placeOf(ctx)?.nodeId;

const placeOf = (ctx: Context) => farmPlacements().place(ctx.method, ctx.path, () => bodyOf(ctx));

/**
 * Mounted after authentication and body parsing, before the routers: a node-scoped request for a node another
 * replica holds is proxied there; any other request goes on to this portal's routers (here, away, unknown). A
 * request for a node between owners is held up to `holdMs` for its next owner (above); 0 holds nothing.
 */
export function placeNodeRequests(o: { places: NodePlaces; proxy: ReplicaProxy; holdMs?: number; logger?: Logger }): Middleware {
  const holdMs = o.holdMs ?? 0;
  return async function nodePlace(ctx: Context, next: Next): Promise<void> {
    const passed = replicaCallerOf(ctx) !== undefined;
    const placed = placeOf(ctx);
    const nodeId = placed?.nodeId;
    if (nodeId === undefined) {
      await next();
      return;
    }
    if (passed) {
      // Passed here by a replica that found this one the owner: if the node is not here (any more), say so before
      // anything reads or does it, so that replica passes it to the node's next owner (or holds it till there is one).
      // A node that is not here any more: if another replica holds it now, or it was here a moment ago (likely
      // reconnecting elsewhere), say so before anything reads or does it; a node long gone (offline, nobody holds it)
      // is answered here from the portal's own copy, as any replica would.
      if (!isHere(o.places.hubOf(), nodeId) && ((await o.places.where(nodeId)).kind === 'replica' || o.places.recentlyLive(nodeId))) {
        ctx.status = 503;
        ctx.set('Retry-After', '1');
        ctx.set(OWNER_UNAVAILABLE_HEADER, 'unprocessed');
        ctx.body = { error: 'device_unavailable', message: `node ${nodeId} is not connected to this portal replica (it moved); try again` };
        return;
      }
      await next();
      return;
    }
    // What a portal answers itself (a node's status, read from the farm's database by any replica): not worth holding for.
    const until = Date.now() + (placed?.entry.farm.answer === 'itself' ? 0 : holdMs);
    let failed: OwnerUnavailable | undefined;
    let held = false;
    const gone = new AbortController();
    const onClose = () => gone.abort();
    ctx.res.once('close', onClose);
    try {
      for (;;) {
        const place = await o.places.where(nodeId);
        if (place.kind === 'replica') {
          try {
            await o.proxy.pass(ctx, nodeId, place);
            if (ctx.status === 503) o.places.forget(nodeId);
            return;
          } catch (e) {
            o.places.forget(nodeId);
            if (!(e instanceof OwnerUnavailable) || !e.again(ctx.method)) throw e;
            failed = e;
          }
        } else if (place.kind !== 'away' || !o.places.recentlyLive(nodeId)) {
          failed = undefined;
          break;
        } else {
          failed = undefined;
        }
        if (Date.now() >= until || gone.signal.aborted) break;
        if (!held) {
          held = true;
          o.logger?.info({ node: nodeId, method: ctx.method, path: ctx.path, why: failed?.message ?? 'away' }, 'a request for a node between owners is held for its next owner');
        }
        await o.places.moved(nodeId, gone.signal);
      }
    } finally {
      ctx.res.off('close', onClose);
    }
    // Past the hold: this replica's routers answer, from the portal's own copy (the database and the shared storage
    // every replica reads) or 503 `device_unavailable` with Retry-After, as for a node nobody holds. A refusal that
    // may not be passed again (a request not certainly unprocessed, not a read) was thrown in the loop.
    if (failed) o.logger?.info({ node: nodeId, method: ctx.method, path: ctx.path, why: failed.message }, 'no owner took the request within the hold; answered here');
    await next();
  };
}
