/**
 * The queue's HTTP layer on the portal (docs/queue.md; the entries and their checks: src/http/endpoints/farm.ts):
 *
 * - `POST /api/v2/jobs`: queue a job for the caller (201, the queued job with why it waits; `Location` its URL);
 * - `GET /api/v2/queue` (`labels`, `state`, `limit`) and `GET /api/v2/queue/<queue_id>`: with why each waits;
 * - `DELETE /api/v2/queue/<queue_id>`: cancel (who queued it, or an admin).
 *
 * The bodies, queries and ids were checked by the entries before these run; what needs the database (labels no node
 * has, an unknown id, whose job it is) is the store's (store.ts), as FarmErrors the error handler maps to statuses.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { FarmError } from '../../core/errors.js';
import { userOf } from '../../http/auth.js';
import { bodyOf } from '../../http/body.js';
import { parseQueueQuery } from '../../http/endpoints/farm.js';
import { mount } from '../../http/endpoints/mount.js';
import type { NodeStates } from './ports.js';
import type { PgJobQueue, QueuedJob } from './store.js';

export interface QueueRouterDeps {
  queue: PgJobQueue;
  /** Where each node stands, for why a job waits (adapters.ts farmNodeStates). */
  nodes: Pick<NodeStates, 'availability'>;
}

/** The queue is v2 only, behind the token guard: there is always a user. */
function callerOf(ctx: Context): { user: string; admin: boolean } {
  const u = userOf(ctx);
  if (!u) throw new FarmError('forbidden', 'the queue needs a v2 access token');
  return { user: u.login, admin: u.role === 'admin' };
}

const idOf = (ctx: Context): number => Number((ctx.params as Record<string, string>).id);

export function queueRouter(d: QueueRouterDeps): Router {
  const r = new Router();
  const explained = async (jobs: QueuedJob[]): Promise<QueuedJob[]> => d.queue.explain(jobs, await d.nodes.availability());

  mount(r, 'POST /api/v2/jobs', async (ctx) => {
    const job = await d.queue.enqueue(bodyOf(ctx), callerOf(ctx).user);
    const [shown] = await explained([job]);
    ctx.status = 201;
    ctx.set('Location', `/api/v2/queue/${job.queue_id}`);
    ctx.body = shown;
  });

  mount(r, 'GET /api/v2/queue', async (ctx) => {
    const q = parseQueueQuery(ctx.query);
    ctx.set('Cache-Control', 'no-store');
    ctx.body = await explained(await d.queue.list(q));
  });

  mount(r, 'GET /api/v2/queue/:id', async (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = (await explained([await d.queue.get(idOf(ctx))]))[0];
  });

  mount(r, 'DELETE /api/v2/queue/:id', async (ctx) => {
    ctx.body = { ...(await d.queue.cancel(idOf(ctx), callerOf(ctx))), waiting: null };
  });

  return r;
}
