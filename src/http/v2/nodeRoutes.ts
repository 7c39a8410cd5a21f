/**
 * v2 nodes and reservations for this one node: node status, reserve,
 * extend, end, interrupt. The owner of an interrupted reservation is told on
 * their next call that touches it or the node (`notices` in the answer);
 * which calls those are is NodePolicy's business.
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import type { Noticed } from '../../core/nodePolicy.js';
import { baseUrl, callerOf, userOf, type Services } from '../context.js';
import { presentNode, presentReservation } from '../presenters.js';
import { mount } from '../endpoints/mount.js';
import { checkedBody } from '../endpoints/validate.js';
import { RESERVATION_CHECKS } from '../openapi/schemas.js';

/** `{...body, notices}` when there are any; the body unchanged otherwise. */
export const withNotices = <T extends object>(body: T, n: Pick<Noticed<unknown>, 'notices'>) => (n.notices.length ? { ...body, notices: n.notices } : body);

export function mountNodeRoutes(r: Router, s: Services): void {
  const caller = (ctx: Context) => callerOf(ctx, 'v2');

  mount(r, 'GET /api/v2/nodes', async (ctx) => {
    const n = await s.policy.status(caller(ctx));
    ctx.body = [withNotices(presentNode(n.value, userOf(ctx), baseUrl(ctx, s)), n)];
  });

  mount(r, 'GET /api/v2/nodes/:node_id', async (ctx) => {
    const n = await s.policy.status(caller(ctx), (ctx.params).node_id);
    ctx.body = withNotices(presentNode(n.value, userOf(ctx), baseUrl(ctx, s)), n);
  });

  // The bodies and the id were checked by the entries' schemas (src/http/endpoints/v2.ts) before these run.
  mount(r, 'POST /api/v2/reservations', async (ctx) => {
    const made = await s.policy.reserve(caller(ctx), checkedBody(ctx, RESERVATION_CHECKS.reserve.node.body));
    ctx.body = withNotices({ reservations: made.value.map((x) => presentReservation(x, userOf(ctx))) }, made);
  });

  const idOf = (ctx: Context) => Number((ctx.params as Record<string, string>).id);

  mount(r, 'POST /api/v2/reservations/:id/extend', async (ctx) => {
    const id = idOf(ctx);
    const body = checkedBody(ctx, RESERVATION_CHECKS.extend.node.body);
    await s.policy.extend(caller(ctx), id, body.duration_secs);
    ctx.status = 204;
  });

  mount(r, 'DELETE /api/v2/reservations/:id', async (ctx) => {
    await s.policy.endReservation(caller(ctx), idOf(ctx));
    ctx.status = 204;
  });

  mount(r, 'POST /api/v2/reservations/:id/interrupt', async (ctx) => {
    const body = checkedBody(ctx, RESERVATION_CHECKS.interrupt.node.body);
    await s.policy.interrupt(caller(ctx), idOf(ctx), body.message);
    ctx.status = 204;
  });
}
