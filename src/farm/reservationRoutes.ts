/**
 * The farm's v2 reservation endpoints (spec "v2 reservations"), answered from PostgreSQL for any
 * node of the farm: reserve, extend, end, interrupt. The same statuses and the same presentation of
 * a Reservation as a single node (src/http/v2/nodeRoutes.ts); the extensions lease_secs and
 * wait_secs are docs/farm.md's ("Reservations").
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { FarmError } from '../core/errors.js';
import { formatNotice, type InterruptionNotice } from '../core/reservations.js';
import { userOf } from '../http/context.js';
import { presentReservation } from '../http/presenters.js';
import type { FarmReservation, FarmReservations, ReserveRequest } from './contract.js';
import { mount } from '../http/endpoints/mount.js';
import { checkedBody } from '../http/endpoints/validate.js';
import { RESERVATION_CHECKS as RESERVE, type ReserveBody } from '../http/openapi/schemas.js';

export interface FarmReservationRouterDeps {
  reservations: FarmReservations;
  /**
   * The caller's interruption notices, each once (PgReservations.takeNotices): shown with a reserve
   * answer and in an extend refusal, as a single node shows them. Without it, answers carry none.
   */
  notices?: (user: string, about: { nodeId?: string; reservationId?: number }) => Promise<InterruptionNotice[]>;
}

/** The spec's Reservation as `caller` sees it; a lease (extension) adds lease_secs and lease_until. */
export function presentFarmReservation(r: FarmReservation & { lease_until?: string | null }, caller: string | undefined) {
  const shown = presentReservation({ ...r, ended: null }, caller);
  return r.lease_secs === null ? shown : { ...shown, lease_secs: r.lease_secs, lease_until: r.lease_until ?? null };
}

/** Reservations are v2 only, behind the token guard: there is always a user. */
function userIn(ctx: Context): string {
  const user = userOf(ctx);
  if (!user) throw new FarmError('forbidden', 'reservations need a v2 access token');
  return user;
}

/** Aborted when the client goes away before its answer is written (a waiting reserve leaves the queue). */
function clientGone(ctx: Context): AbortSignal {
  const ac = new AbortController();
  ctx.res.once('close', () => {
    if (!ctx.res.writableFinished) ac.abort();
  });
  return ac.signal;
}

/** A reserve body the entry's `portalCheck` accepted, as the request of `username` (absent fields: null). */
export function reserveRequestOf(b: ReserveBody, username: string): ReserveRequest {
  return { node_ids: b.node_ids, message: b.message, duration_secs: b.duration_secs ?? null, username, lease_secs: b.lease_secs ?? null, wait_secs: b.wait_secs ?? null };
}

export function farmReservationRouter(d: FarmReservationRouterDeps): Router {
  const r = new Router();
  // The id and the bodies were checked by the entries' `portalCheck` (src/http/endpoints/v2.ts) before these run.
  const idOf = (ctx: Context) => Number((ctx.params as Record<string, string>).id);

  mount(r, 'POST /api/v2/reservations', async (ctx) => {
    const user = userIn(ctx);
    const made = await d.reservations.reserve(reserveRequestOf(checkedBody(ctx, RESERVE.reserve.portal.body), user), clientGone(ctx));
    const notices = (await d.notices?.(user, {})) ?? [];
    const reservations = made.map((x) => presentFarmReservation(x, user));
    ctx.body = notices.length ? { reservations, notices } : { reservations };
  });

  mount(r, 'POST /api/v2/reservations/:id/extend', async (ctx) => {
    const user = userIn(ctx);
    const id = idOf(ctx);
    const body = checkedBody(ctx, RESERVE.extend.portal.body);
    try {
      await d.reservations.extend(id, user, body.duration_secs);
    } catch (e) {
      // A refused extend tells the owner why the reservation ended, if it was interrupted.
      const notices = e instanceof FarmError && d.notices ? await d.notices(user, { reservationId: id }) : [];
      throw notices.length && e instanceof FarmError ? new FarmError(e.code, `${e.message} ${notices.map(formatNotice).join(' ')}`, e.details) : e;
    }
    ctx.status = 204;
  });

  mount(r, 'DELETE /api/v2/reservations/:id', async (ctx) => {
    const user = userIn(ctx);
    await d.reservations.end(idOf(ctx), user);
    ctx.status = 204;
  });

  mount(r, 'POST /api/v2/reservations/:id/interrupt', async (ctx) => {
    const user = userIn(ctx);
    const id = idOf(ctx);
    const body = checkedBody(ctx, RESERVE.interrupt.portal.body);
    await d.reservations.interrupt(id, user, body.message);
    ctx.status = 204;
  });

  return r;
}
