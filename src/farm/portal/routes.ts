/**
 * The portal's v2 routes: farm-wide answers from PostgreSQL and memory (user,
 * nodes), and every node-scoped call forwarded to the node that owns it through
 * the hub, with the caller's user name and the portal's base URL.
 *
 * Unknown node: 404. Registered but not connected: 503 (`device_unavailable`,
 * with the offline reason). Before run_tests, stop and press, a node reserved
 * by another user is a 403, as on a single node.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { setTimeout as delay } from 'node:timers/promises';
import type pg from 'pg';
import { FarmError } from '../../core/errors.js';
import type { Role } from '../../core/roles.js';
import { bodyOf } from '../../http/body.js';
import { userOf } from '../../http/auth.js';
import { csrfTokenOf } from '../../http/session.js';
import type { FarmHub, FarmReservations } from '../contract.js';
import { presentFarmJob, type FarmJobs } from '../jobs.js';
import type { FarmResults } from '../results.js';
import { linkOf, listFarmNodes, NODE_COLUMNS, presentFarmNode, type NodeRow } from './nodeViews.js';
import { setNodeAnswerHeaders } from './nodeAnswer.js';
import { answerWith, forwardToNode, nodeRequest, portalBaseUrl } from './nodeForward.js';
import { SharedForwards } from './sharedForward.js';
import { isHere } from './nodePlace.js';
import { replicaCallerOf } from './replicaAuth.js';
import { mount } from '../../http/endpoints/mount.js';

export interface PortalRouteDeps {
  pool: pg.Pool;
  hub: FarmHub;
  jobs: FarmJobs;
  reservations?: FarmReservations;
  /** The configured public_url; else each request's own origin. */
  publicUrl?: string;
  /** The farm's index (unused here since the node stream: kept for the callers' shape). */
  results?: Pick<FarmResults, 'onPut'>;
  /** Where identical await_completion long polls share one forward (one is made when not given). */
  awaits?: SharedForwards;
  /** The read-your-writes hold's limit (config `read_your_writes_max_secs`; default SETTLE_MS). */
  settleMs?: number;
  /**
   * Replicas "many" (docs/farm.md, "Many portals"): resolves when job `uid` has exited, folded on any replica
   * (its job.exited read from the events outbox); an await_completion of a job whose node is not connected here
   * waits on it, up to `awaitHoldMs`, instead of answering 503.
   */
  jobExited?: (uid: string, signal: AbortSignal) => Promise<void>;
  /** How long such an await_completion is held (the node's `api.await_completion_secs`, default 55 s); then 202. */
  awaitHoldMs?: number;
  /** Replicas "many": this replica's id (a node of another replica is presented from the database: nodeViews.ts). */
  replicaId?: string;
  /**
   * Replicas "many": make the same request (no body) at every other replica with a live lease, signed for the caller,
   * and resolve once each answered or failed (a failure is logged, not thrown). For what concerns every node of the
   * farm, not one (POST /github/post-receive).
   */
  atOtherReplicas?: (method: string, path: string, caller: { user: string; role?: Role | undefined }) => Promise<void>;
  /**
   * Replicas "many": pass the request, as it is, to another replica with a live lease that holds an online node, for
   * what any node answers (test_case_names); false when no other replica holds one.
   */
  toAnyNodeElsewhere?: (ctx: Context) => Promise<boolean>;
}

/** await_completion requests this close together share one long poll to the node (sharedForward.ts). */
export const AWAIT_JOIN_MS = 1_000;

const JOB = '/api/v2/jobs/:node/:hex/:num';
/** How long a Job answered as exited waits for the node's events before it to be folded, by default (see settle). */
export const SETTLE_MS = 30_000;
/** A Job object is a few KiB. */
const MAX_JOB_BYTES = 1 << 20;

/** The whole of a small stream (a Job object); more than `max` bytes is the node misbehaving. */
async function readSmall(stream: AsyncIterable<Buffer | string>, max: number): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    size += b.length;
    if (size > max) throw new FarmError('internal', `the node's answer is over ${max} bytes where a Job object was expected`);
    parts.push(b);
  }
  return Buffer.concat(parts);
}
const NODE = '/api/v2/nodes/:node_id';

export { portalBaseUrl };
export { listFarmNodes, listFarmNodeViews } from './nodeViews.js';

export function portalRouter(d: PortalRouteDeps): Router {
  const r = new Router();
  const base = (ctx: Context) => portalBaseUrl(ctx, d.publicUrl);
  const user = (ctx: Context) => userOf(ctx)?.login ?? 'anonymous';

  /** The registered node (its row), or 404. */
  const registered = async (nodeId: string): Promise<NodeRow> => {
    const { rows } = await d.pool.query<NodeRow>(`SELECT ${NODE_COLUMNS} WHERE n.node_id = $1`, [nodeId]);
    if (!rows[0]) throw new FarmError('not_found', `no node ${JSON.stringify(nodeId)} on this portal; GET /api/v2/nodes lists them`);
    return rows[0];
  };

  /** 403 when another user holds the node's reservation. */
  const checkReservation = async (ctx: Context, nodeId: string, what: string) => {
    const res = await d.reservations?.active(nodeId);
    if (res && res.username !== user(ctx)) {
      throw new FarmError('forbidden', `cannot ${what}: node ${nodeId} is reserved by ${res.username} (reservation ${res.reservation_id}): ${JSON.stringify(res.message)}`);
    }
  };

  /**
   * Read your writes, by construction (docs/farm.md, "The node stream"): the node sends each run's run.finished
   * with its record, then job.exited, in order, before its answer on the same socket; each batch of them is
   * folded in one transaction. A Job answered as exited waits only until the node's events received before the
   * answer are folded (at most settleMs: a database away must not hold a CI job's status for ever).
   */
  const settle = async (nodeId: string, answer: Buffer): Promise<void> => {
    let job: { job_uid?: unknown; status?: unknown };
    try {
      job = JSON.parse(answer.toString('utf8')) as typeof job;
    } catch {
      return;
    }
    if (job.status !== 'exited' || typeof job.job_uid !== 'string') return;
    // The node's word that the job exited: the portal's view of the node says so from now on, whatever was late.
    d.hub.jobExited?.(nodeId, job.job_uid);
    const timers = new AbortController();
    try {
      await Promise.race([d.hub.folded(nodeId), delay(settleMs, undefined, { signal: timers.signal }).catch(() => undefined)]);
    } finally {
      timers.abort();
    }
  };
  const settleMs = d.settleMs ?? SETTLE_MS;

  /** Pass the request to the node and stream its answer back (`opts.settle`: a Job answer, see settle). */
  const forward = async (ctx: Context, nodeId: string, body?: Buffer, opts: { settle?: boolean; whole?: boolean } = {}) => {
    const res = await forwardToNode(d.hub, ctx, nodeId, d.publicUrl, body);
    if (res.status !== 200 || ctx.method === 'HEAD' || !(opts.settle || opts.whole)) {
      answerWith(ctx, res, d.publicUrl);
      return;
    }
    setNodeAnswerHeaders(ctx, res.status, res.headers, d.publicUrl);
    if (opts.settle) {
      const answer = await readSmall(res.body, MAX_JOB_BYTES);
      await settle(nodeId, answer);
      ctx.body = answer;
      return;
    }
    // A Job object, whole: the audit trail names the job it started (src/http/audit.ts).
    ctx.body = await readSmall(res.body, MAX_JOB_BYTES);
  };

  /** Forward to a registered node (404 otherwise); the hub answers 503 when it is not connected. */
  const toNode = async (ctx: Context, nodeId: string, opts: { reservation?: string; body?: boolean; settle?: boolean; whole?: boolean } = {}) => {
    if (!d.hub.link(nodeId)) await registered(nodeId);
    if (opts.reservation) await checkReservation(ctx, nodeId, opts.reservation);
    await forward(ctx, nodeId, opts.body ? Buffer.from(JSON.stringify(bodyOf(ctx))) : undefined, { settle: opts.settle ?? false, whole: opts.whole ?? false });
  };
  /**
   * A long poll of a job's end on a connected node: identical ones share one forward (`awaits`), each settled
   * (read your writes) and answered with the node's whole answer.
   */
  const awaits = d.awaits ?? new SharedForwards({ joinMs: AWAIT_JOIN_MS });
  const awaitOnNode = async (ctx: Context, nodeId: string) => {
    if (!d.hub.link(nodeId)) await registered(nodeId);
    const req = nodeRequest(ctx, d.publicUrl);
    const key = JSON.stringify([nodeId, req.path, req.user, req.baseUrl, req.headers]);
    const { answer, leave } = awaits.join(key, async (signal) => {
      const res = await d.hub.forward(nodeId, req, signal);
      return { status: res.status, headers: res.headers, body: await readSmall(res.body, MAX_JOB_BYTES) };
    });
    ctx.res.once('close', () => {
      if (!ctx.res.writableFinished) leave();
    });
    const a = await answer;
    setNodeAnswerHeaders(ctx, a.status, a.headers, d.publicUrl);
    if (a.status === 200) await settle(nodeId, a.body);
    ctx.body = a.body;
  };
  const nodeParam = (ctx: Context) => (ctx.params as Record<string, string>).node_id!;
  const jobNode = (ctx: Context) => (ctx.params as Record<string, string>).node!;

  mount(r, 'GET /api/v2/user', (ctx) => {
    ctx.body = { login: user(ctx) };
  });

  // The person reading a node's page through the portal, for the portal's own scripts on it (api.js): the node is
  // told neither (nodeAnswer.ts). Same origin only (no CORS), never cached.
  mount(r, 'GET /app/session', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { login: userOf(ctx)?.login ?? null, csrf: csrfTokenOf(ctx) ?? null };
  });

  mount(r, 'GET /api/v2/nodes', async (ctx) => {
    ctx.body = await listFarmNodes(d, user(ctx), base(ctx));
  });

  // One node: its own answer, fresh, when it is connected (a client that has just started a job sees
  // it, as on the node); the last snapshot otherwise, or if the node does not answer.
  mount(r, `GET ${NODE}`, async (ctx) => {
    const row = await registered(nodeParam(ctx));
    const res = await d.reservations?.active(row.node_id);
    let link = linkOf(d, row);
    if (link && d.hub.link(row.node_id)?.online) {
      const fresh = await d.hub
        .forward(row.node_id, { method: 'GET', path: `/api/v2/nodes/${encodeURIComponent(row.node_id)}`, headers: { accept: 'application/json' }, user: user(ctx), baseUrl: base(ctx) })
        .then(async (answer) => (answer.status === 200 ? (JSON.parse((await readSmall(answer.body, MAX_JOB_BYTES)).toString('utf8')) as Record<string, unknown>) : (answer.body.resume(), undefined)))
        .catch(() => undefined);
      if (fresh) link = { ...link, snapshot: fresh };
    }
    ctx.body = presentFarmNode(row, link, res, user(ctx), base(ctx));
  });

  mount(r, `GET ${NODE}/screenshot.png`, (ctx) => toNode(ctx, nodeParam(ctx)));
  mount(r, `GET ${NODE}/thumbnail.jpg`, (ctx) => toNode(ctx, nodeParam(ctx)));
  mount(r, `POST ${NODE}/press`, (ctx) => toNode(ctx, nodeParam(ctx), { reservation: 'press a key', body: true }));
  mount(r, `GET ${NODE}/job`, (ctx) => toNode(ctx, nodeParam(ctx), { settle: true }));
  mount(r, `GET ${NODE}/job/await_completion`, (ctx) => awaitOnNode(ctx, nodeParam(ctx)));
  mount(r, `POST ${NODE}/job/stop`, (ctx) => toNode(ctx, nodeParam(ctx), { reservation: 'stop the job', body: true, settle: true }));
  // Maintenance (admin, checked by the table before this): the node keeps the switch; its next snapshot tells the portal.
  mount(r, `POST ${NODE}/maintenance`, (ctx) => toNode(ctx, nodeParam(ctx), { body: true }));

  mount(r, 'POST /api/v2/run_tests', async (ctx) => {
    const nodeId = (bodyOf(ctx) as { node_id?: unknown } | null)?.node_id;
    if (typeof nodeId !== 'string') throw new FarmError('invalid_request', 'node_id is required (string): the node to run on (GET /api/v2/nodes lists them)');
    await toNode(ctx, nodeId, { reservation: 'run tests', body: true, whole: true });
  });

  mount(r, 'GET /api/v2/test_pack/*rev/test_case_names', async (ctx) => {
    const online = d.hub.links().filter((l) => l.online);
    if (online.length > 0) return forward(ctx, online[Math.floor(Math.random() * online.length)]!.nodeId);
    // Replicas "many": the farm's nodes may all be connected to other replicas (never passed on twice).
    if (!replicaCallerOf(ctx) && (await d.toAnyNodeElsewhere?.(ctx))) return;
    throw new FarmError('device_unavailable', 'no node is connected to the portal, and the test pack is read by the nodes; try again when one is online');
  });

  /**
   * A job (v2, and v1 for the result page's Job link): from its node while it is connected, else from
   * PostgreSQL, the same Job object (presentFarmJob: the node's presentJob fields, URLs on the portal).
   */
  const getJob = async (ctx: Context, v: 'v1' | 'v2') => {
    const nodeId = jobNode(ctx);
    if (isHere(d.hub, nodeId)) return toNode(ctx, nodeId, { settle: v === 'v2' });
    const { hex, num } = ctx.params as Record<string, string>;
    const uid = `/${nodeId}/${hex}/${num}`;
    const row = await d.jobs.get(uid);
    if (!row) {
      await registered(nodeId);
      throw new FarmError('not_found', `no job ${uid} (its node ${nodeId} is offline, and the portal has no record of it)`);
    }
    ctx.body = presentFarmJob(row, base(ctx), v);
  };
  mount(r, `GET ${JOB}`, (ctx) => getJob(ctx, 'v2'));
  // The job's own log (the node's job.log_url before its first run starts; v2/routes.ts): the node's answer,
  // whose redirect to a run's log leads back to the portal (a path of the portal: nodeAnswer.ts); 503 while the
  // node is not connected, as the log of a run in progress.
  mount(r, `GET ${JOB}/log`, (ctx) => toNode(ctx, jobNode(ctx)));
  mount(r, `GET ${JOB}/await_completion`, async (ctx) => {
    const nodeId = jobNode(ctx);
    if (isHere(d.hub, nodeId)) return awaitOnNode(ctx, nodeId);
    // The node is away: an ended job is answered at once, as the node would; a running one waits for its node.
    const uid = `/${nodeId}/${ctx.params.hex}/${ctx.params.num}`;
    if (d.jobExited) {
      // Another replica's node, or none's: its end reaches every replica through the outbox (the fold's commit).
      const held = await holdUntilExited(ctx, uid, d.jobExited, d.awaitHoldMs ?? 55_000);
      if (held) {
        ctx.status = held.state === 'exited' ? 200 : 202;
        ctx.body = presentFarmJob(held, base(ctx));
        return;
      }
    }
    const row = await d.jobs.get(uid);
    if (row?.state === 'exited') {
      ctx.body = presentFarmJob(row, base(ctx));
      return;
    }
    await toNode(ctx, nodeId);
  });
  /** The job row once it exited (or as it is after `holdMs`, still running); undefined when the portal has no row of it. */
  const holdUntilExited = async (ctx: Context, uid: string, exited: NonNullable<PortalRouteDeps['jobExited']>, holdMs: number) => {
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
  };
  // "PUT /api/v2/jobs/{job_uid}/stop (POST behaves identically)"
  mount(r, `PUT ${JOB}/stop`, (ctx) => toNode(ctx, jobNode(ctx), { reservation: 'stop the job', body: true, settle: true }));
  mount(r, `POST ${JOB}/stop`, (ctx) => toNode(ctx, jobNode(ctx), { reservation: 'stop the job', body: true, settle: true }));

  // Results: hD puts the portal's storage in front of these; until then the owning node answers.
  mount(r, 'GET /api/v2/results/:node/:hex/:num/:stamp', (ctx) => toNode(ctx, jobNode(ctx)));
  mount(r, 'GET /api/v2/results/:node/:hex/:num/:stamp/*rest', (ctx) => toNode(ctx, jobNode(ctx)));

  // COMPAT: "a push happened; fetch the test-pack repository now": every connected node fetches; the
  // answer comes once they all have (a node that fails logs it, as a single node does).
  // Replicas "many": the nodes connected to the other replicas too, through them (a request another replica passed
  // here is its nodes' only, never passed on again).
  mount(r, 'POST /github/post-receive', async (ctx) => {
    const online = d.hub.links().filter((l) => l.online);
    const caller = userOf(ctx);
    await Promise.all([
      ...online.map(async (l) => {
        const res = await d.hub.forward(l.nodeId, { method: 'POST', path: '/github/post-receive', headers: {}, user: user(ctx), baseUrl: base(ctx) }).catch(() => undefined);
        res?.body.resume();
      }),
      replicaCallerOf(ctx) ? undefined : d.atOtherReplicas?.('POST', '/github/post-receive', { user: caller?.login ?? '', role: caller?.role }),
    ]);
    ctx.status = 204;
  });

  // The result and job pages (triage_url, the job's page) are the owning node's pages, passed on: their
  // links are relative, so what they call next comes back to the portal. While the node is offline the
  // portal renders both itself, in front of these (web.ts: storedResultPageRouter, storedJobPageRouter).
  mount(r, 'GET /app/results/:node/:hex/:num/:stamp', (ctx) => toNode(ctx, jobNode(ctx)));
  mount(r, 'GET /app/results/:node/:hex/:num/:stamp/*rest', (ctx) => toNode(ctx, jobNode(ctx)));
  mount(r, 'GET /app/jobs/:node/:hex/:num', (ctx) => toNode(ctx, jobNode(ctx)));
  // What those pages read through v1 (open to readers, as on the node): a result's log, files and Job.
  // The screenshot and artifact files come from the portal's storage once uploaded (resultRoutes.ts);
  // the Job from PostgreSQL while its node is offline (getJob), as v2's.
  mount(r, 'GET /api/v1/result/:node/:hex/:num/:stamp', (ctx) => toNode(ctx, jobNode(ctx)));
  mount(r, 'GET /api/v1/result/:node/:hex/:num/:stamp/*rest', (ctx) => toNode(ctx, jobNode(ctx)));
  mount(r, 'GET /api/v1/jobs/:node/:hex/:num', (ctx) => getJob(ctx, 'v1'));
  // A node's live view and web remote, its picture (MJPEG, streamed through the hub) and frames: the
  // node's own page; its presses go to the portal's POST /api/v2/nodes/<id>/press (reservations apply).
  mount(r, 'GET /app/nodes/:node_id/live', (ctx) => toNode(ctx, nodeParam(ctx)));
  mount(r, 'GET /app/nodes/:node_id/live/stream.mjpeg', (ctx) => toNode(ctx, nodeParam(ctx)));
  mount(r, 'GET /app/nodes/:node_id/live/frame.png', (ctx) => toNode(ctx, nodeParam(ctx)));

  return r;
}
