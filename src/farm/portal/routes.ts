/**
 * The portal's v2 routes: farm-wide answers from PostgreSQL and memory (user, nodes), and every node-scoped call
 * forwarded to the node that owns it through the hub, with the caller's user name and the portal's base URL.
 *
 * Which routes are node-scoped, where their node id is and how the portal answers them is the table of endpoints'
 * (`farm`, src/http/endpoints/entry.ts): every farm entry is mounted here once, with its own handler below when the
 * portal answers it otherwise than by forwarding (OWN), else with the one forward (`forwardEntry`). A forwarded
 * endpoint added to the table needs no code here (docs/openapi.md, "Adding an endpoint").
 *
 * Unknown node: 404. Registered but not connected: 503 (`device_unavailable`, with the offline reason). Before
 * run_tests, stop and press (`farm.reserved`), a node reserved by another user is a 403, as on a single node.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { setTimeout as delay } from 'node:timers/promises';
import { FarmError } from '../../core/errors.js';
import { bodyOf } from '../../http/body.js';
import { userOf } from '../../http/auth.js';
import { csrfTokenOf } from '../../http/session.js';
import { mount } from '../../http/endpoints/mount.js';
import { farmEndpoints, type FarmEndpoint } from '../../http/endpoints/place.js';
import { endpointKey } from '../../http/endpoints/table.js';
import { presentFarmJob } from '../jobs.js';
import { nodeLabels } from '../queue/labels.js';
import { linkOf, listFarmNodes, nodeHealthOf, presentFarmNode } from './nodeViews.js';
import { NodeCalls, portalBaseUrl, type PortalRouteDeps } from './nodeForward.js';
import { isHere } from './nodePlace.js';
import { replicaCallerOf } from './replicaAuth.js';

export type { PortalRouteDeps } from './nodeForward.js';
export { AWAIT_JOIN_MS, SETTLE_MS } from './nodeForward.js';
export { portalBaseUrl };
export { listFarmNodes, listFarmNodeViews } from './nodeViews.js';

type Handler = (ctx: Context) => Promise<void> | void;

const NODE = '/api/v2/nodes/:node_id';
const JOB = '/api/v2/jobs/:node/:hex/:num';
const param = (ctx: Context, name: string): string => (ctx.params as Record<string, string>)[name]!;

/** The node a farm entry's request is for: its path parameter, or the body's field (400 without it). */
function nodeIdOf(ctx: Context, x: FarmEndpoint): string {
  if (!x.farm.id.startsWith('body.')) return param(ctx, x.farm.id);
  const field = x.farm.id.slice('body.'.length);
  const id = (bodyOf(ctx) as Record<string, unknown> | null)?.[field];
  if (typeof id !== 'string') throw new FarmError('invalid_request', `${field} is required (string): the node to run on (GET /api/v2/nodes lists them)`);
  return id;
}

/** The one forward of a farm entry: to its node, the reservation checked first when the entry says so. */
const forwardEntry =
  (calls: NodeCalls, x: FarmEndpoint): Handler =>
  (ctx) =>
    calls.toNode(ctx, nodeIdOf(ctx, x), {
      ...(x.farm.reserved !== undefined && { reservation: x.farm.reserved }),
      body: x.method !== 'GET',
      settle: x.farm.job === 'settle',
      whole: x.farm.job === 'whole',
    });

export function portalRouter(d: PortalRouteDeps): Router {
  const r = new Router();
  const calls = new NodeCalls(d);
  const own = { ...farmRoutes(d, calls), ...nodeRoutes(d, calls), ...jobRoutes(d, calls) };
  const farm = farmEndpoints();
  for (const x of farm) {
    const key = endpointKey(x.method, x.path);
    mount(r, key, own[key] ?? forwardEntry(calls, x));
  }
  const placed = new Set(farm.map((x) => endpointKey(x.method, x.path)));
  for (const [key, handler] of Object.entries(own)) if (!placed.has(key)) mount(r, key, handler);
  return r;
}

/** What concerns the farm, not one node: the caller, the nodes, the test pack, a push. */
function farmRoutes(d: PortalRouteDeps, calls: NodeCalls): Record<string, Handler> {
  const user = (ctx: Context) => userOf(ctx)?.login ?? 'anonymous';
  return {
    'GET /api/v2/user': (ctx) => {
      ctx.body = { login: user(ctx) };
    },
    // The person reading a node's page through the portal, for the portal's own scripts on it (api.js): the node is
    // told neither (nodeAnswer.ts). Her role too (null: none), so live.js offers the Power cycle only from manual up
    // (docs/power.md). Same origin only (no CORS), never cached.
    'GET /app/session': (ctx) => {
      ctx.set('Cache-Control', 'no-store');
      const u = userOf(ctx);
      ctx.body = { login: u?.login ?? null, csrf: csrfTokenOf(ctx) ?? null, role: u?.role ?? null };
    },
    'GET /api/v2/nodes': async (ctx) => {
      ctx.body = await listFarmNodes(d, user(ctx), portalBaseUrl(ctx, d.publicUrl));
    },
    'GET /api/v2/test_pack/*rev/test_case_names': async (ctx) => {
      const online = d.hub.links().filter((l) => l.online);
      if (online.length > 0) return calls.forward(ctx, online[Math.floor(Math.random() * online.length)]!.nodeId);
      // Replicas "many": the farm's nodes may all be connected to other replicas (never passed on twice).
      if (!replicaCallerOf(ctx) && (await d.toAnyNodeElsewhere?.(ctx))) return;
      throw new FarmError('device_unavailable', 'no node is connected to the portal, and the test pack is read by the nodes; try again when one is online');
    },
    // COMPAT: "a push happened; fetch the test-pack repository now": every connected node fetches; the answer comes
    // once they all have (a node that fails logs it, as a single node does). Replicas "many": the nodes connected to
    // the other replicas too, through them (a request another replica passed here is its nodes' only, never again).
    'POST /github/post-receive': async (ctx) => {
      const online = d.hub.links().filter((l) => l.online);
      const caller = userOf(ctx);
      const fetch = async (nodeId: string) => {
        const res = await d.hub.forward(nodeId, { method: 'POST', path: '/github/post-receive', headers: {}, user: user(ctx), baseUrl: portalBaseUrl(ctx, d.publicUrl) }).catch(() => undefined);
        res?.body.resume();
      };
      await Promise.all([...online.map((l) => fetch(l.nodeId)), replicaCallerOf(ctx) ? undefined : d.atOtherReplicas?.('POST', '/github/post-receive', { user: caller?.login ?? '', role: caller?.role })]);
      ctx.status = 204;
    },
  };
}

/**
 * One node's status: its own answer, fresh, when it is connected (a client that has just started a job sees it, as
 * on the node); the last snapshot otherwise, or if the node does not answer.
 */
function nodeRoutes(d: PortalRouteDeps, calls: NodeCalls): Record<string, Handler> {
  return {
    [`GET ${NODE}`]: async (ctx) => {
      const row = await calls.registered(param(ctx, 'node_id'));
      const res = await d.reservations?.active(row.node_id);
      const who = userOf(ctx)?.login ?? 'anonymous';
      let link = linkOf(d, row);
      if (link && d.hub.link(row.node_id)?.online) {
        const fresh = await calls.freshStatus(ctx, row.node_id);
        if (fresh) link = { ...link, snapshot: fresh };
      }
      ctx.body = presentFarmNode(row, link, res, who, portalBaseUrl(ctx, d.publicUrl), await nodeLabels(d.pool, row.node_id), await nodeHealthOf(d.pool, row.node_id));
    },
    [`GET ${NODE}/job/await_completion`]: (ctx) => calls.awaitOnNode(ctx, param(ctx, 'node_id')),
  };
}

/**
 * A job (v2, and v1 for the result page's Job link): from its node while it is connected, else from PostgreSQL, the
 * same Job object (presentFarmJob: the node's presentJob fields, URLs on the portal); and the long poll of its end.
 */
function jobRoutes(d: PortalRouteDeps, calls: NodeCalls): Record<string, Handler> {
  const getJob = async (ctx: Context, v: 'v1' | 'v2') => {
    const nodeId = param(ctx, 'node');
    if (isHere(d.hub, nodeId)) return calls.toNode(ctx, nodeId, { settle: v === 'v2' });
    const uid = `/${nodeId}/${param(ctx, 'hex')}/${param(ctx, 'num')}`;
    const row = await d.jobs.get(uid);
    if (!row) {
      await calls.registered(nodeId);
      throw new FarmError('not_found', `no job ${uid} (its node ${nodeId} is offline, and the portal has no record of it)`);
    }
    ctx.body = presentFarmJob(row, portalBaseUrl(ctx, d.publicUrl), v);
  };
  return {
    [`GET ${JOB}`]: (ctx) => getJob(ctx, 'v2'),
    'GET /api/v1/jobs/:node/:hex/:num': (ctx) => getJob(ctx, 'v1'),
    [`GET ${JOB}/await_completion`]: (ctx) => awaitJob(d, calls, ctx),
  };
}

/** A job's end: from its node while it is here; an ended job at once, as the node would; a running one waits for its node. */
async function awaitJob(d: PortalRouteDeps, calls: NodeCalls, ctx: Context): Promise<void> {
  const nodeId = param(ctx, 'node');
  if (isHere(d.hub, nodeId)) return calls.awaitOnNode(ctx, nodeId);
  const uid = `/${nodeId}/${param(ctx, 'hex')}/${param(ctx, 'num')}`;
  if (d.jobExited) {
    // Another replica's node, or none's: its end reaches every replica through the outbox (the fold's commit).
    const held = await holdUntilExited(d, ctx, uid, d.jobExited, d.awaitHoldMs ?? 55_000);
    if (held) {
      ctx.status = held.state === 'exited' ? 200 : 202;
      ctx.body = presentFarmJob(held, portalBaseUrl(ctx, d.publicUrl));
      return;
    }
  }
  const row = await d.jobs.get(uid);
  if (row?.state === 'exited') {
    ctx.body = presentFarmJob(row, portalBaseUrl(ctx, d.publicUrl));
    return;
  }
  await calls.toNode(ctx, nodeId);
}

/** The job row once it exited (or as it is after `holdMs`, still running); undefined when the portal has no row of it. */
async function holdUntilExited(d: PortalRouteDeps, ctx: Context, uid: string, exited: NonNullable<PortalRouteDeps['jobExited']>, holdMs: number) {
  const ac = new AbortController();
  const onClose = () => ac.abort();
  ctx.res.once('close', onClose);
  try {
    // Listening first, then reading: an end committed in between is either in the row or heard.
    const ended = exited(uid, ac.signal).catch(() => undefined);
    const row = await d.jobs.get(uid);
    if (row?.state !== 'running') return row;
    await Promise.race([ended, delay(holdMs, undefined, { signal: ac.signal }).catch(() => undefined)]);
    return await d.jobs.get(uid);
  } finally {
    ac.abort();
    ctx.res.off('close', onClose);
  }
}
