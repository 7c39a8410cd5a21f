/**
 * The result endpoints, the same for both versions but for the prefix
 * (`/api/v1/result`, `/api/v2/results`) and the presenter: detail, the run
 * log (`farmhand.log`, also as `stbt.log`), the end-of-run screenshot, the
 * artifact listing and artifact files.
 */
import type Router from '@koa/router';
import { constants } from 'node:fs';
import { open, realpath, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import type { Transform } from 'node:stream';
import parseRange from 'range-parser';
import type { Context } from 'koa';
import { FarmError } from '../core/errors.js';
import type { ResultRecord } from '../core/model.js';
import { baseUrl, type ApiVersion, type Services } from './context.js';
import { openServed, sendFile } from './files.js';
import { resultIdFromParams } from './params.js';
import { presentResultDetail } from './presenters.js';
import { mount } from './endpoints/mount.js';

const ID = '/:node/:hex/:num/:stamp';
export const LOG_NAMES = ['farmhand.log', 'stbt.log'] as const;

/** The finished result a request names; 404 unknown, 410 deleted by retention. */
export function resultFromParams(ctx: Context, s: Services): ResultRecord {
  const { id, parsed } = resultIdFromParams(ctx);
  const found = parsed && parsed.job.nodeId === s.nodeId ? s.results.get(id) : undefined;
  if (found === 'deleted') throw new FarmError('gone', `result ${id} has been deleted (retention); it is no longer available`);
  if (!found) throw new FarmError('not_found', `no result ${id} (a run still in progress has no result yet)`);
  return found;
}

/** The run a request names when it is the run in progress (the node's job links its log and triage page from its start); else undefined. */
export function runInProgress(ctx: Context, s: Services): { result_id: string; test_case: string; start_time: string } | undefined {
  const { id, parsed } = resultIdFromParams(ctx);
  const run = s.jobs.current()?.current_run;
  return parsed?.job.nodeId === s.nodeId && run?.result_id === id && s.results.get(id) === undefined ? run : undefined;
}

/**
 * The log of the run in progress, as much as is written now. The test writes
 * in the same folder and could have put anything there under the log's name:
 * opened without following links and without blocking, and served only when
 * it is a regular file with one name, in the run's own folder (not one the
 * test put a symlink in place of: `<results>/<hex>/<num>/<stamp>` must be its
 * real path, as for a finished result's files).
 */
async function sendLiveLog(ctx: Context, dir: string, transform: Transform | undefined): Promise<void> {
  const home = path.resolve(dir, '../../..');
  const [realDir, realHome] = await Promise.all([realpath(dir).catch(() => undefined), realpath(home).catch(() => undefined)]);
  if (realDir === undefined || realHome === undefined || realDir !== path.join(realHome, path.relative(home, dir))) {
    throw new FarmError('not_found', 'the run in progress has no readable log');
  }
  let fh: FileHandle | undefined;
  try {
    fh = await open(path.join(dir, 'farmhand.log'), constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    // ENOENT: the run has only just started and nothing is written yet: an empty log so far.
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw new FarmError('not_found', 'the run in progress has no readable log');
  }
  const st = await fh?.stat().catch(() => undefined);
  if (fh && (!st?.isFile() || st.nlink > 1)) {
    await fh.close();
    throw new FarmError('not_found', 'the run in progress has no readable log');
  }
  ctx.type = 'text/plain; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  if (!fh || !st || st.size === 0) {
    await fh?.close();
    ctx.body = '';
    return;
  }
  // A single Range (untransformed only): the portal's job page follows a running log with `bytes=<offset>-`.
  const header = transform ? '' : ctx.get('Range');
  const ranges = header ? parseRange(st.size, header, { combine: true }) : -2;
  if (ranges === -1) {
    await fh.close();
    ctx.set('Content-Range', `bytes */${st.size}`);
    throw new FarmError('range_not_satisfiable', `Range ${header} is outside the log written so far (${st.size} bytes)`);
  }
  const r = ranges !== -2 && ranges.type === 'bytes' && ranges.length === 1 ? ranges[0] : undefined;
  if (r) {
    ctx.status = 206;
    ctx.set('Content-Range', `bytes ${r.start}-${r.end}/${st.size}`);
  }
  const stream = fh.createReadStream({ start: r?.start ?? 0, end: r?.end ?? st.size - 1 });
  ctx.body = transform ? stream.pipe(transform) : stream;
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
  mount(router, `GET ${prefix}${ID}`, async (ctx) => {
    const r = resultFromParams(ctx, s);
    ctx.body = presentResultDetail(r, await s.results.artifacts(r.result_id), baseUrl(ctx, s), v);
  });

  for (const name of LOG_NAMES) {
    mount(router, `GET ${prefix}${ID}/${name}`, async (ctx) => {
      const live = runInProgress(ctx, s);
      if (live) return sendLiveLog(ctx, s.results.dirOf(live.result_id), logTransform(ctx));
      const r = resultFromParams(ctx, s);
      const file = await s.results.openArtifact(r.result_id, 'farmhand.log');
      if (!file) throw new FarmError('not_found', `result ${r.result_id} has no log`);
      const transform = logTransform(ctx);
      if (!transform) return sendFile(ctx, file, 'farmhand.log');
      ctx.type = 'text/plain; charset=utf-8';
      // Regular files only, never blocking: the file may have been swapped since it was listed.
      const fh = await openServed(file.path);
      ctx.body = fh.createReadStream().pipe(transform);
    });
  }

  mount(router, `GET ${prefix}${ID}/screenshot.png`, async (ctx) => {
    const r = resultFromParams(ctx, s);
    const file = await s.results.openArtifact(r.result_id, 'screenshot.png');
    if (!file) throw new FarmError('not_found', `result ${r.result_id} has no screenshot (the capture was offline when it ended)`);
    await sendFile(ctx, file, 'screenshot.png');
  });

  mount(router, `GET ${prefix}${ID}/artifacts`, async (ctx) => {
    const r = resultFromParams(ctx, s);
    ctx.body = await s.results.artifacts(r.result_id);
  });

  mount(router, `GET ${prefix}${ID}/artifacts/*path`, async (ctx) => {
    const r = resultFromParams(ctx, s);
    const rel = String((ctx.params).path);
    const file = await s.results.openArtifact(r.result_id, rel);
    if (!file) throw new FarmError('not_found', `result ${r.result_id} has no artifact ${JSON.stringify(rel)}`);
    await sendFile(ctx, file, rel);
  });
}
