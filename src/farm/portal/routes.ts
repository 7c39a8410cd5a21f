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
import { availabilityText, type Availability } from '../../core/availability.js';
import { FarmError } from '../../core/errors.js';
import { bodyOf } from '../../http/body.js';
import { userOf } from '../../http/auth.js';
import { CLIENT_ADDRESS_HEADER } from '../../http/delegateHeaders.js';
import { presentReservation } from '../../http/presenters.js';
import { csrfTokenOf } from '../../http/session.js';
import type { FarmHub, FarmReservation, FarmReservations, ForwardRequest, NodeLink } from '../contract.js';
import { presentFarmJob, type FarmJobs } from '../jobs.js';
import type { FarmResults } from '../results.js';
import { farmNodeAvailability } from './availability.js';
import { forwardedUser, pageHeaders, setNodeAnswerHeaders } from './nodeAnswer.js';
import { SharedForwards } from './sharedForward.js';

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
}

/** await_completion requests this close together share one long poll to the node (sharedForward.ts). */
export const AWAIT_JOIN_MS = 1_000;

/**
 * Request headers passed on to the node (the rest describe the client's hop to the portal, or the person: never
 * her cookie, token or CSRF token). Its answer's headers: nodeAnswer.ts.
 */
const PASSED_REQUEST_HEADERS = ['content-type', 'accept', 'range', 'if-none-match', 'if-modified-since', 'last-event-id'];

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

export function portalBaseUrl(ctx: Context, publicUrl?: string): string {
  return (publicUrl ?? `${ctx.protocol}://${ctx.host}`).replace(/\/+$/, '');
}

/**
 * Every registered node as a v2 Node object (`GET /api/v2/nodes`, and the portal's front door): the node's
 * last snapshot with the portal's overlays, as `caller` sees it.
 */
export async function listFarmNodes(d: Pick<PortalRouteDeps, 'pool' | 'hub' | 'reservations'>, caller: string, base: string): Promise<Record<string, unknown>[]> {
  return (await listFarmNodeViews(d, caller, base)).map((v) => v.node);
}

/** listFarmNodes with each node's availability as a kind and a detail beside it (the front door reads the kind). */
export async function listFarmNodeViews(
  d: Pick<PortalRouteDeps, 'pool' | 'hub' | 'reservations'>,
  caller: string,
  base: string,
): Promise<{ node: Record<string, unknown>; availability: Availability }[]> {
  const { rows } = await d.pool.query<NodeRow>(`SELECT node_id, version, online, offline_reason, last_seen, state FROM nodes ORDER BY node_id`);
  const held = (await d.reservations?.activeAll()) ?? new Map<string, FarmReservation>();
  return rows.map((row) => {
    const link = d.hub.link(row.node_id);
    const res = held.get(row.node_id);
    return { node: presentFarmNode(row, link, res, caller, base), availability: farmNodeAvailability(link, offlineReasonOfRow(row, link), res) };
  });
}

export function portalRouter(d: PortalRouteDeps): Router {
  const r = new Router();
  const base = (ctx: Context) => portalBaseUrl(ctx, d.publicUrl);
  const user = (ctx: Context) => userOf(ctx)?.login ?? 'anonymous';

  /** The registered node (its row), or 404. */
  const registered = async (nodeId: string): Promise<NodeRow> => {
    const { rows } = await d.pool.query<NodeRow>(`SELECT node_id, version, online, offline_reason, last_seen, state FROM nodes WHERE node_id = $1`, [nodeId]);
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

  const passedHeaders = (ctx: Context): Record<string, string> => {
    const headers: Record<string, string> = {};
    for (const h of PASSED_REQUEST_HEADERS) {
      const v = ctx.get(h);
      if (v) headers[h] = v;
    }
    // Who called, for the node's audit trail (believed by the node only with the link's delegate secret).
    const from = ctx.request.socket.remoteAddress;
    if (from) headers[CLIENT_ADDRESS_HEADER] = from;
    return pageHeaders(ctx, headers);
  };

  /** Pass the request to the node and stream its answer back (`opts.settle`: a Job answer, see settle). */
  const forward = async (ctx: Context, nodeId: string, body?: Buffer, opts: { settle?: boolean; whole?: boolean } = {}) => {
    const headers = passedHeaders(ctx);
    if (body !== undefined) headers['content-type'] = 'application/json';
    // A page is rendered by the node for nobody it is told of: the node learns only whether the reader is signed
    // in on the portal (pageHeaders), never who, her session or its CSRF token (nodeAnswer.ts).
    const req: ForwardRequest = { method: ctx.method, path: ctx.url, headers, body, user: forwardedUser(ctx), baseUrl: base(ctx) };
    const ac = new AbortController();
    const onClose = () => {
      if (!ctx.res.writableFinished) ac.abort();
    };
    ctx.res.once('close', onClose);
    const res = await d.hub.forward(nodeId, req, ac.signal);
    setNodeAnswerHeaders(ctx, res.status, res.headers, d.publicUrl);
    if (res.status === 204 || res.status === 304 || ctx.method === 'HEAD') {
      res.body.resume();
      return;
    }
    if (opts.settle && res.status === 200) {
      const answer = await readSmall(res.body, MAX_JOB_BYTES);
      await settle(nodeId, answer);
      ctx.body = answer;
      return;
    }
    if (opts.whole && res.status === 200) {
      // A Job object, whole: the audit trail names the job it started (src/http/audit.ts).
      ctx.body = await readSmall(res.body, MAX_JOB_BYTES);
      return;
    }
    const length = ctx.response.get('Content-Length');
    ctx.body = res.body;
    if (length) ctx.set('Content-Length', length);
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
    const headers = passedHeaders(ctx);
    const req: ForwardRequest = { method: 'GET', path: ctx.url, headers, user: forwardedUser(ctx), baseUrl: base(ctx) };
    const key = JSON.stringify([nodeId, req.path, req.user, req.baseUrl, headers]);
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

  r.get('/api/v2/user', (ctx) => {
    ctx.body = { login: user(ctx) };
  });

  // The person reading a node's page through the portal, for the portal's own scripts on it (api.js): the node is
  // told neither (nodeAnswer.ts). Same origin only (no CORS), never cached.
  r.get('/app/session', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = { login: userOf(ctx)?.login ?? null, csrf: csrfTokenOf(ctx) ?? null };
  });

  r.get('/api/v2/nodes', async (ctx) => {
    ctx.body = await listFarmNodes(d, user(ctx), base(ctx));
  });

  // One node: its own answer, fresh, when it is connected (a client that has just started a job sees
  // it, as on the node); the last snapshot otherwise, or if the node does not answer.
  r.get(NODE, async (ctx) => {
    const row = await registered(nodeParam(ctx));
    const res = await d.reservations?.active(row.node_id);
    let link = d.hub.link(row.node_id);
    if (link?.online) {
      const fresh = await d.hub
        .forward(row.node_id, { method: 'GET', path: `/api/v2/nodes/${encodeURIComponent(row.node_id)}`, headers: { accept: 'application/json' }, user: user(ctx), baseUrl: base(ctx) })
        .then(async (answer) => (answer.status === 200 ? (JSON.parse((await readSmall(answer.body, MAX_JOB_BYTES)).toString('utf8')) as Record<string, unknown>) : (answer.body.resume(), undefined)))
        .catch(() => undefined);
      if (fresh) link = { ...link, snapshot: fresh };
    }
    ctx.body = presentFarmNode(row, link, res, user(ctx), base(ctx));
  });

  r.get(`${NODE}/screenshot.png`, (ctx) => toNode(ctx, nodeParam(ctx)));
  r.get(`${NODE}/thumbnail.jpg`, (ctx) => toNode(ctx, nodeParam(ctx)));
  r.post(`${NODE}/press`, (ctx) => toNode(ctx, nodeParam(ctx), { reservation: 'press a key', body: true }));
  r.get(`${NODE}/job`, (ctx) => toNode(ctx, nodeParam(ctx), { settle: true }));
  r.get(`${NODE}/job/await_completion`, (ctx) => awaitOnNode(ctx, nodeParam(ctx)));
  r.post(`${NODE}/job/stop`, (ctx) => toNode(ctx, nodeParam(ctx), { reservation: 'stop the job', body: true, settle: true }));

  r.post('/api/v2/run_tests', async (ctx) => {
    const nodeId = (bodyOf(ctx) as { node_id?: unknown } | null)?.node_id;
    if (typeof nodeId !== 'string') throw new FarmError('invalid_request', 'node_id is required (string): the node to run on (GET /api/v2/nodes lists them)');
    await toNode(ctx, nodeId, { reservation: 'run tests', body: true, whole: true });
  });

  r.get('/api/v2/test_pack/*rev/test_case_names', async (ctx) => {
    const online = d.hub.links().filter((l) => l.online);
    if (online.length === 0) throw new FarmError('device_unavailable', 'no node is connected to the portal, and the test pack is read by the nodes; try again when one is online');
    await forward(ctx, online[Math.floor(Math.random() * online.length)]!.nodeId);
  });

  /**
   * A job (v2, and v1 for the result page's Job link): from its node while it is connected, else from
   * PostgreSQL, the same Job object (presentFarmJob: the node's presentJob fields, URLs on the portal).
   */
  const getJob = async (ctx: Context, v: 'v1' | 'v2') => {
    const nodeId = jobNode(ctx);
    if (d.hub.link(nodeId)?.online) return toNode(ctx, nodeId, { settle: v === 'v2' });
    const { hex, num } = ctx.params as Record<string, string>;
    const uid = `/${nodeId}/${hex}/${num}`;
    const row = await d.jobs.get(uid);
    if (!row) {
      await registered(nodeId);
      throw new FarmError('not_found', `no job ${uid} (its node ${nodeId} is offline, and the portal has no record of it)`);
    }
    ctx.body = presentFarmJob(row, base(ctx), v);
  };
  r.get(JOB, (ctx) => getJob(ctx, 'v2'));
  // The job's own log (the node's job.log_url before its first run starts; v2/routes.ts): the node's answer,
  // whose redirect to a run's log leads back to the portal (a path of the portal: nodeAnswer.ts); 503 while the
  // node is not connected, as the log of a run in progress.
  r.get(`${JOB}/log`, (ctx) => toNode(ctx, jobNode(ctx)));
  r.get(`${JOB}/await_completion`, async (ctx) => {
    const nodeId = jobNode(ctx);
    if (d.hub.link(nodeId)?.online) return awaitOnNode(ctx, nodeId);
    // The node is away: an ended job is answered at once, as the node would; a running one waits for its node.
    const uid = `/${nodeId}/${ctx.params.hex}/${ctx.params.num}`;
    const row = await d.jobs.get(uid);
    if (row?.state === 'exited') {
      ctx.body = presentFarmJob(row, base(ctx));
      return;
    }
    await toNode(ctx, nodeId);
  });
  // "PUT /api/v2/jobs/{job_uid}/stop (POST behaves identically)"
  r.put(`${JOB}/stop`, (ctx) => toNode(ctx, jobNode(ctx), { reservation: 'stop the job', body: true, settle: true }));
  r.post(`${JOB}/stop`, (ctx) => toNode(ctx, jobNode(ctx), { reservation: 'stop the job', body: true, settle: true }));

  // Results: hD puts the portal's storage in front of these; until then the owning node answers.
  r.get('/api/v2/results/:node/:hex/:num/:stamp', (ctx) => toNode(ctx, jobNode(ctx)));
  r.get('/api/v2/results/:node/:hex/:num/:stamp/*rest', (ctx) => toNode(ctx, jobNode(ctx)));

  // COMPAT: "a push happened; fetch the test-pack repository now": every connected node fetches; the
  // answer comes once they all have (a node that fails logs it, as a single node does).
  r.post('/github/post-receive', async (ctx) => {
    const online = d.hub.links().filter((l) => l.online);
    await Promise.all(
      online.map(async (l) => {
        const res = await d.hub.forward(l.nodeId, { method: 'POST', path: '/github/post-receive', headers: {}, user: user(ctx), baseUrl: base(ctx) }).catch(() => undefined);
        res?.body.resume();
      }),
    );
    ctx.status = 204;
  });

  // The result and job pages (triage_url, the job's page) are the owning node's pages, passed on: their
  // links are relative, so what they call next comes back to the portal. While the node is offline the
  // portal renders both itself, in front of these (web.ts: storedResultPageRouter, storedJobPageRouter).
  r.get('/app/results/:node/:hex/:num/:stamp', (ctx) => toNode(ctx, jobNode(ctx)));
  r.get('/app/results/:node/:hex/:num/:stamp/*rest', (ctx) => toNode(ctx, jobNode(ctx)));
  r.get('/app/jobs/:node/:hex/:num', (ctx) => toNode(ctx, jobNode(ctx)));
  // What those pages read through v1 (open to readers, as on the node): a result's log, files and Job.
  // The screenshot and artifact files come from the portal's storage once uploaded (resultRoutes.ts);
  // the Job from PostgreSQL while its node is offline (getJob), as v2's.
  r.get('/api/v1/result/:node/:hex/:num/:stamp', (ctx) => toNode(ctx, jobNode(ctx)));
  r.get('/api/v1/result/:node/:hex/:num/:stamp/*rest', (ctx) => toNode(ctx, jobNode(ctx)));
  r.get('/api/v1/jobs/:node/:hex/:num', (ctx) => getJob(ctx, 'v1'));
  // A node's live view and web remote, its picture (MJPEG, streamed through the hub) and frames: the
  // node's own page; its presses go to the portal's POST /api/v2/nodes/<id>/press (reservations apply).
  r.get('/app/nodes/:node_id/live', (ctx) => toNode(ctx, nodeParam(ctx)));
  r.get('/app/nodes/:node_id/live/stream.mjpeg', (ctx) => toNode(ctx, nodeParam(ctx)));
  r.get('/app/nodes/:node_id/live/frame.png', (ctx) => toNode(ctx, nodeParam(ctx)));

  return r;
}


interface NodeRow {
  node_id: string;
  version: string | null;
  online: boolean;
  offline_reason: string | null;
  last_seen: Date | null;
  /** The node's last state folded from its stream (fold.ts; its Node object under `node`), for a node this process has not heard from. */
  state?: { node?: Record<string, unknown> } | null;
}

/** Why a node is offline: its connection's word, else the database's (a node not connected since the portal started). */
const offlineReasonOfRow = (row: NodeRow, link: NodeLink | undefined): string | null =>
  link ? link.offlineReason : (row.offline_reason ?? 'it has never connected to the portal');

/**
 * The v2 Node object on the portal: the node's own (its last snapshot), with what only the portal knows laid
 * over it: whether it is connected, the address it connects from, the farm's reservation, its URL on the portal,
 * and available / not_available_reason worked out again from those.
 */
export function presentFarmNode(row: NodeRow, link: NodeLink | undefined, res: FarmReservation | undefined, caller: string, base: string): Record<string, unknown> {
  const snap = link?.snapshot ?? row.state?.node ?? {};
  const connected = link?.online ?? false;
  const offlineReason = offlineReasonOfRow(row, link);
  const capturing = snap.online !== false;
  const online = connected && capturing && link?.snapshot != null;
  const reason = availabilityText(farmNodeAvailability(link, offlineReason, res));
  return {
    node_id: row.node_id,
    ...snap,
    node_url: `${base}/api/v2/nodes/${encodeURIComponent(row.node_id)}`,
    available: reason === null,
    not_available_reason: reason,
    online,
    config: snap.config ?? {},
    device_type: snap.device_type ?? null,
    friendly_name: snap.friendly_name ?? null,
    external_ip_address: link?.externalIp ?? snap.external_ip_address ?? null,
    local_ip_address: snap.local_ip_address ?? null,
    geoip_city: snap.geoip_city ?? null,
    geoip_country: snap.geoip_country ?? null,
    job: snap.job ?? null,
    last_used_by: snap.last_used_by ?? null,
    last_used_time: snap.last_used_time ?? null,
    licence_expiry: snap.licence_expiry ?? null,
    reservation: res ? presentReservation({ ...res, ended: null }, caller) : null,
    // Not in the spec: the portal's view of the node's connection.
    farm: {
      connected,
      offline_reason: connected ? null : offlineReason,
      version: link?.version ?? row.version,
      last_seen: (link?.lastSeen ?? row.last_seen)?.toISOString() ?? null,
    },
  };
}
