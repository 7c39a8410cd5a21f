/**
 * Path parameters that name things: a job_uid spans three segments in URLs,
 * a result_id four. They are put back together here and parsed by core/ids.ts.
 */
import type { Context } from 'koa';
import { FarmError } from '../core/errors.js';
import { parseResultId, type ResultIdParts } from '../core/ids.js';
import type { JobRecord } from '../core/model.js';
import type { Services } from './context.js';

const params = (ctx: Context) => ctx.params as Record<string, string>;

/** The job_uid a request's `:node/:hex/:num` spell (not checked: a lookup of a bad one finds nothing). */
export const jobUidFromParams = (ctx: Context): string => `/${params(ctx).node}/${params(ctx).hex}/${params(ctx).num}`;

/** The result id a request's `:node/:hex/:num/:stamp` spell, as text and parsed (undefined when malformed). */
export function resultIdFromParams(ctx: Context): { id: string; parsed: ResultIdParts | undefined } {
  const id = `${jobUidFromParams(ctx)}/${params(ctx).stamp}`;
  return { id, parsed: parseResultId(id) };
}

/** The job a request names; 404 when unknown. */
export function jobFromParams(ctx: Context, s: Services): JobRecord {
  const uid = jobUidFromParams(ctx);
  const job = s.jobs.get(uid);
  if (!job) throw new FarmError('not_found', `no job ${uid}`);
  return job;
}
