/**
 * The video wall's pictures (docs/video-wall.md): `GET /app/wall/frames?nodes=a,b,c`, one event stream per wall
 * carrying the listed nodes' thumbnails as they change.
 *
 * - The portal asks each node watched by at least one wall for its thumbnail (`GET /api/v1/device/thumbnail.jpg`
 *   forwarded over the node's connection: the node's 320-wide JPEG of its latest frame) once per `intervalMs`
 *   (1 s), whatever the number of walls: N viewers cost the node one encode a second, and the portal one forward.
 *   Nobody watching a node: it is not asked at all.
 * - A picture equal to the last one is not sent again (a still screen costs no bandwidth).
 * - The stream: `event: frame` with `{"node_id", "seq", "jpeg": <base64>}`, `event: nopicture` with
 *   `{"node_id", "reason"}` (offline, not connected here, capture down); a comment line every 15 s. A wall
 *   that reads slowly skips pictures; it never holds up the others.
 * - The node is asked as for a page read by a person signed in on the portal, for nobody by name: the wall
 *   records no use of the node (`last_used_by`), which a person's own screenshot does.
 */
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import Router from '@koa/router';
import type pg from 'pg';
import { FarmError, invalid } from '../../core/errors.js';
import { mount } from '../../http/endpoints/mount.js';
import type { FarmHub } from '../contract.js';
import { SIGNED_IN_HEADER } from '../protocol.js';
import { portalBaseUrl } from './routes.js';

/** One node's picture as the wall gets it: a JPEG, or why there is none. */
export interface WallFrame {
  node_id: string;
  seq: number;
  jpeg?: Buffer;
  reason?: string;
}

export interface WallFramesOptions {
  hub: Pick<FarmHub, 'forward' | 'link'>;
  /** Between two asks of one node (default 1000 ms). */
  intervalMs?: number;
  /** A node that does not answer within this is "not answering" (default 5000 ms). */
  timeoutMs?: number;
}

/** The largest thumbnail taken from a node (a 320-wide JPEG is 5-40 KB). */
const MAX_JPEG = 1 << 20;

class Poller {
  readonly subs = new Set<(f: WallFrame) => void>();
  last: WallFrame | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ac = new AbortController();
  private stopped = false;

  constructor(
    private readonly nodeId: string,
    private readonly o: Required<WallFramesOptions>,
    private readonly baseUrl: string,
    private readonly onIdle: () => void,
  ) {}

  start(): void {
    void this.tick();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.ac.abort();
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    if (this.subs.size === 0) {
      this.stop();
      this.onIdle();
      return;
    }
    const began = Date.now();
    const got = await this.fetch();
    if (this.stopped) return;
    const changed = got.jpeg ? !this.last?.jpeg?.equals(got.jpeg) : this.last?.jpeg !== undefined || this.last?.reason !== got.reason;
    if (changed) {
      this.last = { node_id: this.nodeId, seq: (this.last?.seq ?? 0) + 1, ...got };
      for (const fn of this.subs) fn(this.last);
    }
    this.timer = setTimeout(() => void this.tick(), Math.max(0, this.o.intervalMs - (Date.now() - began)));
  }

  private async fetch(): Promise<{ jpeg?: Buffer; reason?: string }> {
    if (!this.o.hub.link(this.nodeId)?.online) return { reason: 'the node is not connected to this portal' };
    const signal = AbortSignal.any([this.ac.signal, AbortSignal.timeout(this.o.timeoutMs)]);
    try {
      const headers = { accept: 'image/jpeg', [SIGNED_IN_HEADER]: '1' };
      const res = await this.o.hub.forward(this.nodeId, { method: 'GET', path: '/api/v1/device/thumbnail.jpg', headers, user: '', baseUrl: this.baseUrl }, signal);
      const body = await readAll(res.body, signal);
      if (res.status === 200) return { jpeg: body };
      const msg = (safeJson(body.toString('utf8')) as { message?: unknown } | undefined)?.message;
      return { reason: typeof msg === 'string' ? msg : `the node answered ${res.status}` };
    } catch (e) {
      if (signal.aborted && !this.ac.signal.aborted) return { reason: 'the node does not answer' };
      return { reason: e instanceof Error ? e.message : String(e) };
    }
  }
}

async function readAll(body: AsyncIterable<Buffer | string>, signal: AbortSignal): Promise<Buffer> {
  const parts: Buffer[] = [];
  let size = 0;
  for await (const c of body) {
    const b = typeof c === 'string' ? Buffer.from(c) : c;
    size += b.length;
    if (size > MAX_JPEG || signal.aborted) throw new Error(size > MAX_JPEG ? 'the thumbnail is too large' : 'aborted');
    parts.push(b);
  }
  return Buffer.concat(parts);
}

function safeJson(t: string): unknown {
  try {
    return JSON.parse(t);
  } catch {
    return undefined;
  }
}

/** The pollers of the nodes watched now, shared by every wall of this portal process. */
export class WallFrames {
  private readonly pollers = new Map<string, Poller>();
  private readonly o: Required<WallFramesOptions>;

  constructor(o: WallFramesOptions) {
    this.o = { intervalMs: 1000, timeoutMs: 5000, ...o };
  }

  /** Watch a node: `fn` gets its last picture at once (if any), then each new one. Returns the unsubscribe. */
  subscribe(nodeId: string, baseUrl: string, fn: (f: WallFrame) => void): () => void {
    let p = this.pollers.get(nodeId);
    if (!p) {
      const made = new Poller(nodeId, this.o, baseUrl, () => {
        if (this.pollers.get(nodeId) === made) this.pollers.delete(nodeId);
      });
      this.pollers.set(nodeId, made);
      made.subs.add(fn);
      made.start();
      p = made;
    } else {
      p.subs.add(fn);
      if (p.last) fn(p.last);
    }
    const poller = p;
    return () => {
      poller.subs.delete(fn);
    };
  }

  /** Nodes being asked for pictures now (tests, diagnostics). */
  watched(): string[] {
    return [...this.pollers.keys()];
  }

  close(): void {
    for (const p of this.pollers.values()) p.stop();
    this.pollers.clear();
  }
}

/** Walls open at once on one portal process; more get 503 (each costs a socket and a subscription per tile). */
const MAX_STREAMS = 200;
/** A wall whose unread pictures pass this skips the next ones until it catches up. */
const MAX_BACKLOG = 2 << 20;
const HEARTBEAT_MS = 15_000;
/** The most nodes one stream watches. */
const MAX_NODES = 500;

/** `?nodes=a,b,c`: registered node ids, each once. */
async function nodesOf(ctx: Context, pool: Pick<pg.Pool, 'query'>): Promise<string[]> {
  const raw = ctx.query.nodes;
  if (typeof raw !== 'string' || raw.trim() === '') throw invalid('nodes is required: the node ids whose pictures to send, separated by commas (e.g. nodes=stb-1,stb-2)');
  const ids = [...new Set(raw.split(',').map((s) => s.trim()).filter(Boolean))];
  if (ids.length > MAX_NODES) throw invalid(`nodes: at most ${MAX_NODES} node ids`);
  const { rows } = await pool.query<{ node_id: string }>('SELECT node_id FROM nodes WHERE node_id = ANY($1::text[])', [ids]);
  const known = new Set(rows.map((r) => r.node_id));
  const unknown = ids.filter((id) => !known.has(id));
  if (unknown.length) throw invalid(`nodes: no node ${unknown.map((u) => JSON.stringify(u.slice(0, 64))).join(', ')} is registered; GET /api/v2/nodes lists them`);
  return ids;
}

export function wallFramesRouter(d: { pool: Pick<pg.Pool, 'query'>; frames: WallFrames; publicUrl?: string | undefined }): Router {
  const r = new Router();
  let open = 0;
  mount(r, 'GET /app/wall/frames', async (ctx) => {
    const ids = await nodesOf(ctx, d.pool);
    if (open >= MAX_STREAMS) {
      ctx.set('Retry-After', '10');
      throw new FarmError('device_unavailable', `${MAX_STREAMS} video walls are open on this portal; try again in a moment`);
    }
    if (ctx.method === 'HEAD') {
      ctx.status = 200;
      ctx.type = 'text/event-stream';
      return;
    }
    ctx.status = 200;
    ctx.respond = false;
    open++;
    stream(ctx.res, ids, d.frames, portalBaseUrl(ctx, d.publicUrl), () => open--);
  });
  return r;
}

function stream(res: ServerResponse, ids: string[], frames: WallFrames, baseUrl: string, onEnd: () => void): void {
  res.socket?.setTimeout(0);
  res.writeHead(200, { 'Content-Type': 'text/event-stream; charset=utf-8', 'Cache-Control': 'no-cache, no-transform', 'X-Accel-Buffering': 'no', 'X-Content-Type-Options': 'nosniff' });
  res.write(': the video wall\n\n');
  const send = (f: WallFrame) => {
    if (res.writableLength > MAX_BACKLOG) return;
    const data = f.jpeg ? { node_id: f.node_id, seq: f.seq, jpeg: f.jpeg.toString('base64') } : { node_id: f.node_id, seq: f.seq, reason: f.reason };
    res.write(`event: ${f.jpeg ? 'frame' : 'nopicture'}\ndata: ${JSON.stringify(data)}\n\n`);
  };
  const unsubs = ids.map((id) => frames.subscribe(id, baseUrl, send));
  const heartbeat = setInterval(() => res.write(': still here\n\n'), HEARTBEAT_MS);
  res.once('close', () => {
    clearInterval(heartbeat);
    for (const u of unsubs) u();
    onEnd();
  });
}
