/**
 * The one forward of a client's request to a node over its connection to this portal (FarmHub.forward), used by
 * every router that passes a request on (routes.ts, src/farm/resultRoutes.ts): which of the client's headers go to
 * the node, who the node is told the caller is (nodeAnswer.ts: nobody for a page), the portal's base URL, the
 * client going away cancelling the request at the node, and the node's answer handed back through the one header
 * policy (nodeAnswer.ts setNodeAnswerHeaders). The request of a node held by another replica takes the same request
 * headers to that replica (replicaProxy.ts), and its answer the same header policy.
 */
import type { Context } from 'koa';
import { setTimeout as delay } from 'node:timers/promises';
import type pg from 'pg';
import { FarmError } from '../../core/errors.js';
import type { Role } from '../../core/roles.js';
import { userOf } from '../../http/auth.js';
import { bodyOf } from '../../http/body.js';
import { CLIENT_ADDRESS_HEADER } from '../../http/delegateHeaders.js';
import type { FarmHub, FarmReservations, ForwardRequest, ForwardResponse } from '../contract.js';
import type { FarmJobs } from '../jobs.js';
import type { FarmResults } from '../results.js';
import { forwardedUser, pageHeaders, setNodeAnswerHeaders } from './nodeAnswer.js';
import { NODE_COLUMNS, type NodeRow } from './nodeViews.js';
import { SharedForwards } from './sharedForward.js';

/**
 * Request headers passed on (the rest describe the client's hop to the portal, or the person: never her cookie,
 * token or CSRF token).
 */
const PASSED_REQUEST_HEADERS = ['content-type', 'accept', 'range', 'if-none-match', 'if-modified-since', 'last-event-id', 'idempotency-key'];

/** The client's headers that are passed on, to a node or to another replica. */
export function passedRequestHeaders(ctx: Context): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const h of PASSED_REQUEST_HEADERS) {
    const v = ctx.get(h);
    if (v) headers[h] = v;
  }
  return headers;
}

export function portalBaseUrl(ctx: Context, publicUrl?: string): string {
  return (publicUrl ?? `${ctx.protocol}://${ctx.host}`).replace(/\/+$/, '');
}

/** The request as the node gets it: passed headers, the caller's address, the user (nobody for a page), the base URL. */
export function nodeRequest(ctx: Context, publicUrl: string | undefined, body?: Buffer): ForwardRequest {
  const headers = passedRequestHeaders(ctx);
  if (body !== undefined) headers['content-type'] = 'application/json';
  // Who called, for the node's audit trail (believed by the node only with the link's delegate secret).
  const from = ctx.request.socket.remoteAddress;
  if (from) headers[CLIENT_ADDRESS_HEADER] = from;
  // A page is rendered by the node for nobody it is told of: the node learns only whether the reader is signed
  // in on the portal (pageHeaders), never who, her session or its CSRF token (nodeAnswer.ts).
  return { method: ctx.method, path: ctx.url, headers: pageHeaders(ctx, headers), ...(body !== undefined && { body }), user: forwardedUser(ctx), baseUrl: portalBaseUrl(ctx, publicUrl) };
}

/** Forward `ctx`'s request to the node; the client going away (before its answer is written) cancels it there. */
export async function forwardToNode(hub: Pick<FarmHub, 'forward'>, ctx: Context, nodeId: string, publicUrl: string | undefined, body?: Buffer): Promise<ForwardResponse> {
  const ac = new AbortController();
  const onClose = () => {
    if (!ctx.res.writableFinished) ac.abort();
  };
  ctx.res.once('close', onClose);
  try {
    return await hub.forward(nodeId, nodeRequest(ctx, publicUrl, body), ac.signal);
  } catch (e) {
    ctx.res.off('close', onClose);
    throw e;
  }
}

/** Answer `ctx` with a node's answer, streamed (the header policy of nodeAnswer.ts). */
export function answerWith(ctx: Context, res: ForwardResponse, publicUrl: string | undefined): void {
  setNodeAnswerHeaders(ctx, res.status, res.headers, publicUrl);
  if (res.status === 204 || res.status === 304 || ctx.method === 'HEAD') {
    res.body.resume();
    return;
  }
  const length = ctx.response.get('Content-Length');
  ctx.body = res.body;
  if (length) ctx.set('Content-Length', length);
}

/** What the portal's routes (routes.ts) are built from. */
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
/** How long a Job object answered as exited waits for the node's events before it to be folded, by default (see settle). */
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

/** How a forward treats the node's answer: `reservation`, checked first; `body`, the request's passed on; `settle`: a Job, settled; `whole`: small JSON read whole (entry.ts FarmScope.job). */
export interface ToNode {
  reservation?: string;
  body?: boolean;
  settle?: boolean;
  whole?: boolean;
}

/** The portal's calls to one node, for its routes (routes.ts): a forward, a shared long poll, the node's fresh status. */
export class NodeCalls {
  private readonly awaits: SharedForwards;
  private readonly settleMs: number;

  constructor(private readonly d: PortalRouteDeps) {
    this.awaits = d.awaits ?? new SharedForwards({ joinMs: AWAIT_JOIN_MS });
    this.settleMs = d.settleMs ?? SETTLE_MS;
  }

  private user(ctx: Context): string {
    return userOf(ctx)?.login ?? 'anonymous';
  }

  /** The registered node (its row), or 404. */
  async registered(nodeId: string): Promise<NodeRow> {
    const { rows } = await this.d.pool.query<NodeRow>(`SELECT ${NODE_COLUMNS} WHERE n.node_id = $1`, [nodeId]);
    if (!rows[0]) throw new FarmError('not_found', `no node ${JSON.stringify(nodeId)} on this portal; GET /api/v2/nodes lists them`);
    return rows[0];
  }

  /** 403 when another user holds the node's reservation. */
  private async checkReservation(ctx: Context, nodeId: string, what: string): Promise<void> {
    const res = await this.d.reservations?.active(nodeId);
    if (res && res.username !== this.user(ctx)) {
      throw new FarmError('forbidden', `cannot ${what}: node ${nodeId} is reserved by ${res.username} (reservation ${res.reservation_id}): ${JSON.stringify(res.message)}`);
    }
  }

  /**
   * Read your writes, by construction (docs/farm.md, "The node stream"): the node sends each run's run.finished
   * with its record, then job.exited, in order, before its answer on the same socket; each batch of them is
   * folded in one transaction. A Job answered as exited waits only until the node's events received before the
   * answer are folded (at most settleMs: a database away must not hold a CI job's status for ever).
   */
  private async settle(nodeId: string, answer: Buffer): Promise<void> {
    let job: { job_uid?: unknown; status?: unknown };
    try {
      job = JSON.parse(answer.toString('utf8')) as typeof job;
    } catch {
      return;
    }
    if (job.status !== 'exited' || typeof job.job_uid !== 'string') return;
    // The node's word that the job exited: the portal's view of the node says so from now on, whatever was late.
    this.d.hub.jobExited?.(nodeId, job.job_uid);
    const timers = new AbortController();
    try {
      await Promise.race([this.d.hub.folded(nodeId), delay(this.settleMs, undefined, { signal: timers.signal }).catch(() => undefined)]);
    } finally {
      timers.abort();
    }
  }

  /** Pass the request to the node and stream its answer back (`opts.settle`: a Job answer, see settle). */
  async forward(ctx: Context, nodeId: string, body?: Buffer, opts: { settle?: boolean; whole?: boolean } = {}): Promise<void> {
    const res = await forwardToNode(this.d.hub, ctx, nodeId, this.d.publicUrl, body);
    if (res.status !== 200 || ctx.method === 'HEAD' || !(opts.settle || opts.whole)) {
      answerWith(ctx, res, this.d.publicUrl);
      return;
    }
    setNodeAnswerHeaders(ctx, res.status, res.headers, this.d.publicUrl);
    const answer = await readSmall(res.body, MAX_JOB_BYTES);
    // A Job object, whole (the audit trail names the job it started: src/http/audit.ts), or settled first.
    if (opts.settle) await this.settle(nodeId, answer);
    ctx.body = answer;
  }

  /** Forward to a registered node (404 otherwise); the hub answers 503 when it is not connected. */
  async toNode(ctx: Context, nodeId: string, opts: ToNode = {}): Promise<void> {
    if (!this.d.hub.link(nodeId)) await this.registered(nodeId);
    if (opts.reservation) await this.checkReservation(ctx, nodeId, opts.reservation);
    await this.forward(ctx, nodeId, opts.body ? Buffer.from(JSON.stringify(bodyOf(ctx))) : undefined, { settle: opts.settle ?? false, whole: opts.whole ?? false });
  }

  /**
   * A long poll of a job's end on a connected node: identical ones share one forward (`awaits`), each settled
   * (read your writes) and answered with the node's whole answer.
   */
  async awaitOnNode(ctx: Context, nodeId: string): Promise<void> {
    if (!this.d.hub.link(nodeId)) await this.registered(nodeId);
    const req = nodeRequest(ctx, this.d.publicUrl);
    const key = JSON.stringify([nodeId, req.path, req.user, req.baseUrl, req.headers]);
    const { answer, leave } = this.awaits.join(key, async (signal) => {
      const res = await this.d.hub.forward(nodeId, req, signal);
      return { status: res.status, headers: res.headers, body: await readSmall(res.body, MAX_JOB_BYTES) };
    });
    ctx.res.once('close', () => {
      if (!ctx.res.writableFinished) leave();
    });
    const a = await answer;
    setNodeAnswerHeaders(ctx, a.status, a.headers, this.d.publicUrl);
    if (a.status === 200) await this.settle(nodeId, a.body);
    ctx.body = a.body;
  }

  /** The node's own status answer (a connected node), or undefined when it does not give one. */
  async freshStatus(ctx: Context, nodeId: string): Promise<Record<string, unknown> | undefined> {
    const path = `/api/v2/nodes/${encodeURIComponent(nodeId)}`;
    const ask = { method: 'GET', path, headers: { accept: 'application/json' }, user: this.user(ctx), baseUrl: portalBaseUrl(ctx, this.d.publicUrl) };
    try {
      const answer = await this.d.hub.forward(nodeId, ask);
      if (answer.status !== 200) {
        answer.body.resume();
        return undefined;
      }
      return JSON.parse((await readSmall(answer.body, MAX_JOB_BYTES)).toString('utf8')) as Record<string, unknown>;
    } catch {
      return undefined;
    }
  }
}
