/**
 * The portal's upload API, used by the nodes' uploaders (src/farm/uploader.ts):
 *
 *   GET    /farm/v1/results/<result_id>/files/<path>            -> {offset, complete_size}
 *   PUT    /farm/v1/results/<result_id>/files/<path>?offset=<n> (raw bytes) -> {offset}
 *   POST   /farm/v1/results/<result_id>/files/<path>  {"sha256": "<hex>"}    -> {size, sha256}
 *   DELETE /farm/v1/results/<result_id>/files/<path>            (forget a partial file)
 *   POST   /farm/v1/results/<result_id>/complete      (every file is there) -> the record (409 before the record came)
 *   PUT    /farm/v1/results/<result_id>/record        (a node of the previous version: the ResultRecord) -> the record
 *   PUT    /farm/v1/results/<result_id>/record?files=pending  (the same, before its files) -> the record
 *
 * A node of this version sends the record in its stream (docs/farm.md, "The node stream") and only bytes here,
 * then `complete`; the `record` route is kept for a node of the previous version.
 *
 * Every request carries the node's credential (`Authorization: node <credential>`
 * and `X-Farmhand-Node: <node_id>`), checked by NodeCredentials; a node may
 * only touch results whose id starts with its own node id. The chunk bodies
 * are read raw (this router must come before any JSON body parser), JSON
 * bodies are read here with a bound.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { FarmError } from '../core/errors.js';
import type { NodeCredentials } from './contract.js';
import type { FarmUploads } from './uploads.js';
import type { StoredResults } from './storedResults.js';
import { mount } from '../http/endpoints/mount.js';

export const UPLOAD_PREFIX = '/farm/v1/results';
const ID = '/:node/:hex/:num/:stamp';
/** A ResultRecord is a few KiB; its traceback may be long. */
const MAX_RECORD_BYTES = 4 << 20;
const MAX_COMPLETE_BYTES = 4096;

export interface UploadRouterOptions {
  uploads: FarmUploads;
  store: StoredResults;
  credentials: NodeCredentials;
}

export function uploadRouter(o: UploadRouterOptions): Router {
  const r = new Router({ prefix: UPLOAD_PREFIX });
  const FILE = `${ID}/files/*path`;

  mount(r, `GET ${UPLOAD_PREFIX}${FILE}`, async (ctx) => {
    const { id, rel } = await target(ctx, o.credentials);
    ctx.body = await o.uploads.status(id, rel);
  });

  mount(r, `PUT ${UPLOAD_PREFIX}${FILE}`, async (ctx) => {
    const { id, rel } = await target(ctx, o.credentials);
    const raw = ctx.query.offset;
    const offset = typeof raw === 'string' && /^(0|[1-9][0-9]{0,15})$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isSafeInteger(offset)) throw new FarmError('invalid_request', 'offset must be the byte offset of the chunk: ?offset=<n>, as GET on the file answers it');
    const encoding = (ctx.get('Content-Encoding') || 'identity').toLowerCase();
    if (encoding !== 'identity') throw new FarmError('unsupported_media_type', 'send the chunk uncompressed (no Content-Encoding)');
    const declared = Number(ctx.get('Content-Length') || '0');
    if (declared > o.uploads.maxChunkBytes) {
      ctx.req.resume(); // read and drop it, so the client reads the answer instead of a reset
      throw new FarmError('payload_too_large', `a chunk holds at most ${o.uploads.maxChunkBytes} bytes`);
    }
    try {
      ctx.body = await o.uploads.append(id, rel, offset, ctx.req, Number.isSafeInteger(declared) && declared > 0 ? declared : 0);
    } catch (e) {
      if (e instanceof FarmError && e.code === 'conflict' && typeof e.details?.offset === 'number') {
        // The node learns where to resume from the answer itself.
        ctx.status = 409;
        ctx.body = { error: 'conflict', message: e.message, offset: e.details.offset };
        return;
      }
      throw e;
    }
  });

  mount(r, `POST ${UPLOAD_PREFIX}${FILE}`, async (ctx) => {
    const { id, rel } = await target(ctx, o.credentials);
    const body = (await jsonOf(ctx, MAX_COMPLETE_BYTES)) as { sha256?: unknown } | null;
    ctx.body = await o.uploads.complete(id, rel, body?.sha256);
  });

  mount(r, `DELETE ${UPLOAD_PREFIX}${FILE}`, async (ctx) => {
    const { id, rel } = await target(ctx, o.credentials);
    await o.uploads.discard(id, rel);
    ctx.status = 204;
  });

  mount(r, `POST ${UPLOAD_PREFIX}${ID}/complete`, async (ctx) => {
    const { id, node } = await target(ctx, o.credentials);
    ctx.body = await o.store.complete(id, node);
  });

  mount(r, `PUT ${UPLOAD_PREFIX}${ID}/record`, async (ctx) => {
    const { id, node } = await target(ctx, o.credentials);
    const body = await jsonOf(ctx, MAX_RECORD_BYTES);
    if ((body as { result_id?: unknown } | null)?.result_id !== id) throw new FarmError('invalid_request', `the record's result_id must be the id in the path (${id})`);
    // `files=pending`: the record comes first, its files follow (docs/farm.md, "The upload protocol").
    const files = ctx.query.files;
    if (files !== undefined && files !== 'pending') throw new FarmError('invalid_request', 'files may only be "pending" (?files=pending: the files follow; without it: every file is uploaded)');
    ctx.body = await o.store.record(body, node, { filesPending: files === 'pending' });
  });

  return r;
}

/** The authenticated node, the result id of the path (which must be the node's) and the file's relative path. */
async function target(ctx: Context, credentials: NodeCredentials): Promise<{ node: string; id: string; rel: string }> {
  const node = await authenticateNode(ctx, credentials);
  const p = ctx.params as Record<string, string>;
  if (p.node !== node) throw new FarmError('forbidden', `node ${node} may only upload its own results (ids starting with /${node}/), not /${p.node}/...`);
  return { node, id: `/${p.node}/${p.hex}/${p.num}/${p.stamp}`, rel: typeof p.path === 'string' ? p.path : '' };
}

/** `Authorization: node <credential>` with `X-Farmhand-Node: <id>`, checked; the node id. */
export async function authenticateNode(ctx: Context, credentials: NodeCredentials): Promise<string> {
  const m = /^node\s+(\S+)$/i.exec(ctx.get('Authorization'));
  const node = ctx.get('X-Farmhand-Node');
  if (!m || !node) throw new FarmError('forbidden', 'send the node credential: "Authorization: node <credential>" and "X-Farmhand-Node: <node_id>"');
  if (!(await credentials.verify(node, m[1]!))) throw new FarmError('forbidden', `the credential is not the current one of node ${node.slice(0, 63)} (farmhand farm node add prints it)`);
  return node;
}

/** A JSON body of at most `limit` bytes (or what a body parser before this router already parsed). */
async function jsonOf(ctx: Context, limit: number): Promise<unknown> {
  const parsed = (ctx.request as { body?: unknown }).body;
  if (parsed !== undefined) return parsed;
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of ctx.req) {
    size += (c as Buffer).length;
    if (size > limit) throw new FarmError('payload_too_large', `the body holds at most ${limit} bytes`);
    chunks.push(c as Buffer);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw new FarmError('invalid_request', 'the request body is not valid JSON');
  }
}
