/**
 * The result endpoints, the same for both versions but for the prefix
 * (`/api/v1/result`, `/api/v2/results`) and the presenter: detail, the run
 * log (`farmhand.log`, also as `stbt.log`), the end-of-run screenshot, the
 * artifact listing and artifact files.
 */
import type Router from '@koa/router';
import { createReadStream } from 'node:fs';
import type { Transform } from 'node:stream';
import type { Context } from 'koa';
import { FarmError } from '../core/errors.js';
import { parseResultId } from '../core/ids.js';
import type { ResultRecord } from '../core/model.js';
import { baseUrl, type ApiVersion, type Services } from './context.js';
import { sendFile } from './files.js';
import { presentResultDetail } from './presenters.js';

const ID = '/:node/:hex/:num/:stamp';
export const LOG_NAMES = ['farmhand.log', 'stbt.log'] as const;

/** The finished result a request names; 404 unknown, 410 deleted by retention. */
export function resultFromParams(ctx: Context, s: Services): ResultRecord {
  const p = ctx.params as Record<string, string>;
  const id = `/${p.node}/${p.hex}/${p.num}/${p.stamp}`;
  const parsed = parseResultId(id);
  const found = parsed && parsed.job.nodeId === s.nodeId ? s.results.get(id) : undefined;
  if (found === 'deleted') throw new FarmError('gone', `result ${id} has been deleted (retention); it is no longer available`);
  if (!found) throw new FarmError('not_found', `no result ${id} (a run still in progress has no result yet)`);
  return found;
}

/**
 * How a version serves the stored log (UTC timestamps): undefined serves the
 * file as it is (with Range support); a Transform rewrites it as it streams
 * (v2's `tz`).
 */
export type LogTransform = (ctx: Context) => Transform | undefined;

export function mountResultRoutes(
  router: Router,
  prefix: string,
  v: ApiVersion,
  s: Services,
  logTransform: LogTransform = () => undefined,
): void {
  router.get(`${prefix}${ID}`, async (ctx) => {
    const r = resultFromParams(ctx, s);
    ctx.body = presentResultDetail(r, await s.results.artifacts(r.result_id), baseUrl(ctx, s), v);
  });

  for (const name of LOG_NAMES) {
    router.get(`${prefix}${ID}/${name}`, async (ctx) => {
      const r = resultFromParams(ctx, s);
      const file = await s.results.openArtifact(r.result_id, 'farmhand.log');
      if (!file) throw new FarmError('not_found', `result ${r.result_id} has no log`);
      const transform = logTransform(ctx);
      if (!transform) return sendFile(ctx, file, 'farmhand.log');
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = createReadStream(file.path).pipe(transform);
    });
  }

  router.get(`${prefix}${ID}/screenshot.png`, async (ctx) => {
    const r = resultFromParams(ctx, s);
    const file = await s.results.openArtifact(r.result_id, 'screenshot.png');
    if (!file) throw new FarmError('not_found', `result ${r.result_id} has no screenshot (the capture was offline when it ended)`);
    await sendFile(ctx, file, 'screenshot.png');
  });

  router.get(`${prefix}${ID}/artifacts`, async (ctx) => {
    const r = resultFromParams(ctx, s);
    ctx.body = await s.results.artifacts(r.result_id);
  });

  router.get(`${prefix}${ID}/artifacts/*path`, async (ctx) => {
    const r = resultFromParams(ctx, s);
    const rel = String((ctx.params).path);
    const file = await s.results.openArtifact(r.result_id, rel);
    if (!file) throw new FarmError('not_found', `result ${r.result_id} has no artifact ${JSON.stringify(rel)}`);
    await sendFile(ctx, file, rel);
  });
}
