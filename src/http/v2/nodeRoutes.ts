/**
 * v2 nodes and reservations for this one node: node status, reserve,
 * extend, end, interrupt. The owner of an interrupted reservation is told on
 * their next call that touches it or the node (`notices` in the answer).
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { FarmError } from '../../core/errors.js';
import { formatNotice, parseReservationId, type InterruptionNotice } from '../../core/reservations.js';
import { bodyOf } from '../body.js';
import { baseUrl, type Services } from '../context.js';

export const callerOf = (ctx: Context): string | undefined => (ctx.state as { user?: { login: string } }).user?.login;

/** Interruption notices for the caller about the node or a reservation (each shown once). */
export function noticesFor(ctx: Context, s: Services, about: { nodeId?: string; reservationId?: number }): InterruptionNotice[] {
  const user = callerOf(ctx);
  return user ? s.reservations.takeNotice(user, about) : [];
}

/** `{...body, notices}` when there are any; the body unchanged otherwise. */
export const withNotices = <T extends object>(body: T, notices: InterruptionNotice[]) => (notices.length ? { ...body, notices } : body);

/**
 * The reservation guard for run, stop and press: 403 when another user holds
 * the node. The caller's own pending interruption notices go into the message.
 */
export function guardNode(ctx: Context, s: Services, what: string): void {
  try {
    s.reservations.assertCanUse(callerOf(ctx), s.nodeId, what);
  } catch (e) {
    const notices = noticesFor(ctx, s, { nodeId: s.nodeId });
    if (e instanceof FarmError && notices.length) throw new FarmError(e.code, `${e.message} ${notices.map(formatNotice).join(' ')}`, e.details);
    throw e;
  }
}

/** Note a use of the node by the caller (run, stop, press, reserve, screenshot). */
export function recordUse(ctx: Context, s: Services): void {
  const user = callerOf(ctx);
  if (user) s.node.recordUse(user);
}

export function mountNodeRoutes(r: Router, s: Services): void {
  r.get('/api/v2/nodes', async (ctx) => {
    const status = await s.node.status(callerOf(ctx), baseUrl(ctx, s));
    ctx.body = [withNotices(status, noticesFor(ctx, s, { nodeId: s.nodeId }))];
  });

  r.get('/api/v2/nodes/:node_id', async (ctx) => {
    const status = await s.node.statusOf((ctx.params).node_id!, callerOf(ctx), baseUrl(ctx, s));
    ctx.body = withNotices(status, noticesFor(ctx, s, { nodeId: s.nodeId }));
  });

  r.post('/api/v2/reservations', async (ctx) => {
    const user = callerOf(ctx)!;
    const reservations = await s.reservations.reserve(user, bodyOf(ctx));
    recordUse(ctx, s);
    ctx.body = withNotices({ reservations }, noticesFor(ctx, s, {}));
  });

  const idOf = (ctx: Context) => parseReservationId((ctx.params as Record<string, string>).id!);

  r.post('/api/v2/reservations/:id/extend', async (ctx) => {
    const id = idOf(ctx);
    const body = bodyOf(ctx) as { duration_secs?: unknown } | null;
    try {
      await s.reservations.extend(callerOf(ctx)!, id, body?.duration_secs);
    } catch (e) {
      // Extending an interrupted reservation is where its owner most wants to hear why it ended.
      const notices = noticesFor(ctx, s, { reservationId: id });
      if (e instanceof FarmError && notices.length) throw new FarmError(e.code, `${e.message} ${notices.map(formatNotice).join(' ')}`, e.details);
      throw e;
    }
    ctx.status = 204;
  });

  r.delete('/api/v2/reservations/:id', async (ctx) => {
    await s.reservations.end(callerOf(ctx)!, idOf(ctx));
    ctx.status = 204;
  });

  r.post('/api/v2/reservations/:id/interrupt', async (ctx) => {
    const body = bodyOf(ctx) as { message?: unknown } | null;
    await s.reservations.interrupt(callerOf(ctx)!, idOf(ctx), body?.message);
    ctx.status = 204;
  });
}
