/** Path parameters that name things: a job_uid spans three segments in URLs. */
import type { Context } from 'koa';
import { FarmError } from '../core/errors.js';
import type { JobRecord } from '../core/model.js';
import type { Services } from './context.js';

/** The job a request names; 404 when unknown. */
export function jobFromParams(ctx: Context, s: Services): JobRecord {
  const p = ctx.params as Record<string, string>;
  const uid = `/${p.node}/${p.hex}/${p.num}`;
  const job = s.jobs.get(uid);
  if (!job) throw new FarmError('not_found', `no job ${uid}`);
  return job;
}

