/**
 * Reservations across the farm against a real throwaway PostgreSQL cluster: every move of the spec's
 * reservation table, 404/409 with nothing reserved, the fault (two portals reserving overlapping node
 * sets at the same instant, 100 times), expiry and leases by the database clock, a portal restart,
 * the wait queue, and the HTTP router on a small Koa app with the node's middleware.
 *
 * The FarmEventLog here is an in-test array (our own seam): the outbox (helper hE) replaces it at merge.
 */
import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import Koa from 'koa';
import pg from 'pg';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';
import { client } from '../helpers/contract.js';
import { expectError } from '../helpers/errors.js';
import { migrate } from '../../src/farm/db/migrate.js';
import { PgReservations, MAX_WAIT_SECS, type PgReservation } from '../../src/farm/reservations.js';
import { farmReservationRouter, reserveRequestOf } from '../../src/farm/reservationRoutes.js';
import { authorizeRoutes } from '../../src/http/endpoints/authorize.js';
import { endpointOf } from '../../src/http/endpoints/table.js';
import { validateRequest } from '../../src/http/endpoints/validate.js';
import type { FarmEventLog, ReserveRequest } from '../../src/farm/contract.js';
import type { EventType } from '../../src/core/events.js';
import { FarmError } from '../../src/core/errors.js';
import { silentLogger } from '../../src/logger.js';
import { errorHandler } from '../../src/http/errors.js';
import { jsonBody } from '../../src/http/body.js';

const NODES = Array.from({ length: 20 }, (_, i) => `node-${String(i + 1).padStart(2, '0')}`);
const [N1, N2, N3, N4, N5, N6, N7] = NODES as [string, string, string, string, string, string, string];

interface Seen { type: EventType; nodeId: string | null; data: Record<string, unknown> }

/** The outbox's seam, as an array. */
class ArrayEventLog implements FarmEventLog {
  readonly seen: Seen[] = [];
  append(type: EventType, nodeId: string | null, data: unknown): Promise<void> {
    this.seen.push({ type, nodeId, data: data as Record<string, unknown> });
    return Promise.resolve();
  }
  of(type: EventType, reservationId: number): Seen | undefined {
    return this.seen.find((e) => e.type === type && e.data.reservation_id === reservationId);
  }
}

/** The FarmError code a promise rejects with. */
async function codeOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof FarmError) return e.code;
    throw e;
  }
  throw new Error('expected a FarmError, but it succeeded');
}

/** What the portal does with a request: the route's checks from the table of endpoints (`portalCheck`: 400), then the service. */
const viaRoute = {
  reserve: (res: PgReservations, req: ReserveRequest) => {
    const { username, ...body } = req;
    validateRequest(endpointOf('POST', '/api/v2/reservations')!.portalCheck, { body });
    return res.reserve(reserveRequestOf(body, username));
  },
  extend: (res: PgReservations, id: number, username: string, durationSecs: unknown) => {
    const body = { duration_secs: durationSecs };
    validateRequest(endpointOf('POST', '/api/v2/reservations/:id/extend')!.portalCheck, { params: { id: String(id) }, body });
    return res.extend(id, username, durationSecs as number);
  },
  interrupt: (res: PgReservations, id: number, username: string, message: unknown) => {
    validateRequest(endpointOf('POST', '/api/v2/reservations/:id/interrupt')!.portalCheck, { params: { id: String(id) }, body: { message } });
    return res.interrupt(id, username, message as string);
  },
};
const later = (fn: () => Promise<unknown>): Promise<unknown> => Promise.resolve().then(fn);

const req = (username: string, node_ids: string[], more: Partial<ReserveRequest> = {}): ReserveRequest => ({
  node_ids, username, message: 'testing **firmware 2.1**', duration_secs: null, ...more,
});

describe('farm reservations (PostgreSQL)', function () {
  this.timeout(60_000);
  let cluster: TestPostgres;
  let poolA: pg.Pool;
  let poolB: pg.Pool;
  let events: ArrayEventLog;
  let res: PgReservations;
  const busy = new Map<string, string>();
  const isBusy = (n: string) => busy.get(n) ?? null;
  const others: PgReservations[] = [];

  /** Live rows of the table, as [node_id, reservation_id] sorted by node. */
  async function activeRows(): Promise<{ node_id: string; reservation_id: string; username: string }[]> {
    const { rows } = await poolA.query(
      `SELECT n.node_id, n.reservation_id, r.username FROM reservation_nodes n JOIN reservations r USING (reservation_id)
       WHERE n.active AND r.ended_at IS NULL ORDER BY n.node_id`,
    );
    return rows;
  }

  before(async () => {
    cluster = await startPostgres();
    const cfg = { host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database, max: 6 };
    poolA = new pg.Pool(cfg);
    poolB = new pg.Pool(cfg);
    await migrate(poolA);
    await poolA.query('INSERT INTO nodes (node_id) SELECT unnest($1::text[])', [NODES]);
    events = new ArrayEventLog();
    res = new PgReservations({ pool: poolA, isBusy, events, logger: silentLogger, sweepMs: 200, recheckMs: 100 });
    await res.start();
  });

  afterEach(async () => {
    busy.clear();
    await poolA.query(`UPDATE reservations SET ended_at = now(), end_reason = 'ended' WHERE ended_at IS NULL`);
    await poolA.query('UPDATE reservation_nodes SET active = false WHERE active');
    await poolA.query('UPDATE reservations SET notice_pending = false WHERE notice_pending');
  });

  after(async () => {
    for (const o of others) await o.close();
    await res?.close();
    await poolA?.end();
    await poolB?.end();
    await cluster?.stop();
  });

  describe('reserve', () => {
    it('reserves every node, one reservation each (own id), in the order asked, and announces each', async () => {
      const made = await res.reserve(req('alice', [N3, N1, N2], { duration_secs: 600 }));
      expect(made.map((r) => r.node_id)).to.deep.equal([N3, N1, N2]);
      expect(new Set(made.map((r) => r.reservation_id)).size).to.equal(3);
      for (const r of made) {
        expect(r).to.include({ username: 'alice', message: 'testing **firmware 2.1**', ended: false, lease_secs: null, lease_until: null });
        // expires = start + duration, both from the database clock.
        expect(Date.parse(r.expires as string) - Date.parse(r.start_time)).to.equal(600_000);
        expect(events.of('reservation.made', r.reservation_id)).to.deep.include({ nodeId: r.node_id });
      }
      expect((await activeRows()).map((r) => r.node_id)).to.deep.equal([N1, N2, N3]);
      expect((await res.active(N1))?.reservation_id).to.equal(made[1]!.reservation_id);
      expect([...(await res.activeAll()).keys()].sort()).to.deep.equal([N1, N2, N3]);
    });

    it('without duration_secs never expires (expires null)', async () => {
      const [r] = await res.reserve(req('alice', [N1]));
      expect(r!.expires).to.equal(null);
      expect(await res.sweep()).to.equal(0);
      expect((await res.active(N1))?.reservation_id).to.equal(r!.reservation_id);
    });

    it('400 for every invalid parameter (the single node rules, and the extensions)', async () => {
      const bad: Partial<ReserveRequest>[] = [
        { node_ids: [] }, { node_ids: 'node-01' as unknown as string[] }, { node_ids: [N1, N1] }, { node_ids: [N1, ''] },
        { node_ids: [N1, 3 as unknown as string] }, { node_ids: Array.from({ length: 101 }, (_, i) => `x${i}`) },
        { message: undefined }, { message: 3 as unknown as string }, { message: 'x'.repeat(10_001) },
        { duration_secs: 0 }, { duration_secs: 1.5 }, { duration_secs: '60' as unknown as number }, { duration_secs: -1 },
        { lease_secs: 0 }, { lease_secs: 2.5 }, { wait_secs: 0 }, { wait_secs: MAX_WAIT_SECS + 1 },
      ];
      for (const b of bad) expect(await codeOf(later(() => viaRoute.reserve(res, req('alice', [N1], b)))), JSON.stringify(b).slice(0, 80)).to.equal('invalid_request');
      expect(await activeRows()).to.deep.equal([]);
    });

    it('404 for an unknown node id, and nothing is reserved', async () => {
      expect(await codeOf(res.reserve(req('alice', [N1, 'no-such-node'])))).to.equal('not_found');
      expect(await activeRows()).to.deep.equal([]);
    });

    it('409 when any node is reserved (by anyone, the caller included), and nothing is reserved', async () => {
      await res.reserve(req('alice', [N2]));
      expect(await codeOf(res.reserve(req('bob', [N1, N2, N3])))).to.equal('conflict');
      expect(await codeOf(res.reserve(req('alice', [N2])))).to.equal('conflict');
      expect((await activeRows()).map((r) => r.node_id)).to.deep.equal([N2]);
    });

    it('409 when any node is busy (isBusy), and nothing is reserved', async () => {
      busy.set(N3, 'running a test job (/node-03/ab12/7)');
      expect(await codeOf(res.reserve(req('alice', [N1, N2, N3])))).to.equal('conflict');
      expect(await activeRows()).to.deep.equal([]);
      busy.delete(N3);
      expect(await res.reserve(req('alice', [N1, N2, N3]))).to.have.length(3);
    });
  });

  describe('the state table', () => {
    it('extend: the creator moves expires later by duration_secs; 403 another user; 404 never issued; 400 bad duration', async () => {
      const [r] = await res.reserve(req('alice', [N1], { duration_secs: 60 }));
      expect(await codeOf(res.extend(r!.reservation_id, 'bob', 30))).to.equal('forbidden');
      expect(await codeOf(res.extend(999_999, 'alice', 30))).to.equal('not_found');
      expect(await codeOf(later(() => viaRoute.extend(res, r!.reservation_id, 'alice', 0)))).to.equal('invalid_request');
      expect(await codeOf(later(() => viaRoute.extend(res, 999_999, 'alice', 1.5)))).to.equal('invalid_request');
      await res.extend(r!.reservation_id, 'alice', 30);
      const after = await res.active(N1);
      expect(Date.parse(after!.expires as string) - Date.parse(r!.expires as string)).to.equal(30_000);
      expect(events.of('reservation.extended', r!.reservation_id)?.data).to.include({ expires: after!.expires });
    });

    it('extend without expiry: 204 and nothing changes (the single node choice)', async () => {
      const [r] = await res.reserve(req('alice', [N1]));
      await res.extend(r!.reservation_id, 'alice', 30);
      expect((await res.active(N1))?.expires).to.equal(null);
    });

    it('DELETE: 403 for another user; the creator ends it; then 204 for anyone; 404 never issued', async () => {
      const [r] = await res.reserve(req('alice', [N1, N2]));
      expect(await codeOf(res.end(r!.reservation_id, 'bob'))).to.equal('forbidden');
      await res.end(r!.reservation_id, 'alice');
      expect(await res.active(N1)).to.equal(undefined);
      expect((await res.active(N2))?.username).to.equal('alice');
      expect(events.of('reservation.ended', r!.reservation_id)?.data).to.include({ how: 'ended', by: 'alice', end_message: null });
      await res.end(r!.reservation_id, 'alice');
      await res.end(r!.reservation_id, 'bob');
      expect(await codeOf(res.end(999_999, 'alice'))).to.equal('not_found');
      expect(events.seen.filter((e) => e.type === 'reservation.ended' && e.data.reservation_id === r!.reservation_id)).to.have.length(1);
    });

    it('extend of an ended reservation: 400', async () => {
      const [r] = await res.reserve(req('alice', [N1], { duration_secs: 60 }));
      await res.end(r!.reservation_id, 'alice');
      expect(await codeOf(res.extend(r!.reservation_id, 'alice', 30))).to.equal('invalid_request');
    });

    it('interrupt: anyone, with a message; 400 without one (even when ended); 204 when ended; 404 never issued', async () => {
      const [r] = await res.reserve(req('alice', [N1]));
      expect(await codeOf(later(() => viaRoute.interrupt(res, r!.reservation_id, 'bob', '  ')))).to.equal('invalid_request');
      expect(await codeOf(later(() => viaRoute.interrupt(res, r!.reservation_id, 'bob', undefined)))).to.equal('invalid_request');
      await res.interrupt(r!.reservation_id, 'bob', 'release build needs this box');
      expect(await res.active(N1)).to.equal(undefined);
      expect(events.of('reservation.interrupted', r!.reservation_id)?.data).to.include({ how: 'interrupted', by: 'bob', end_message: 'release build needs this box' });
      await res.interrupt(r!.reservation_id, 'carol', 'again');
      expect(await codeOf(later(() => viaRoute.interrupt(res, r!.reservation_id, 'carol', '')))).to.equal('invalid_request');
      expect(await codeOf(res.interrupt(999_999, 'carol', 'why'))).to.equal('not_found');
      expect(await codeOf(res.extend(r!.reservation_id, 'alice', 30))).to.equal('invalid_request');
    });

    it('an interruption by someone else is a notice for the owner, taken once; their own is none', async () => {
      const [a, b] = await res.reserve(req('alice', [N1, N2]));
      await res.interrupt(a!.reservation_id, 'bob', 'release build needs this box');
      await res.interrupt(b!.reservation_id, 'alice', 'done early');
      expect(await res.takeNotices('bob')).to.deep.equal([]);
      expect(await res.takeNotices('alice', { nodeId: N2 })).to.deep.equal([]);
      const [n] = await res.takeNotices('alice', { reservationId: a!.reservation_id });
      expect(n).to.deep.include({ reservation_id: a!.reservation_id, node_id: N1, interrupted_by: 'bob', message: 'release build needs this box' });
      expect(await res.takeNotices('alice')).to.deep.equal([]);
    });

    it('time passes: ended by the database clock, marked expired at its expiry instant by the sweeper', async () => {
      const [r] = await res.reserve(req('alice', [N4], { duration_secs: 1 }));
      await waitFor(async () => (await res.active(N4)) === undefined, { what: 'the reservation to expire', timeoutMs: 30_000 });
      const ended = await waitFor(() => events.of('reservation.ended', r!.reservation_id), { what: 'reservation.ended', timeoutMs: 30_000 });
      expect(ended.data).to.include({ how: 'expired', by: null, end_time: r!.expires });
      const { rows } = await poolA.query('SELECT end_reason, ended_at FROM reservations WHERE reservation_id = $1', [r!.reservation_id]);
      expect(rows[0].end_reason).to.equal('expired');
      expect(rows[0].ended_at.toISOString()).to.equal(r!.expires);
      expect(await codeOf(res.extend(r!.reservation_id, 'alice', 30))).to.equal('invalid_request');
      await res.end(r!.reservation_id, 'bob');
      expect(await res.reserve(req('bob', [N4]))).to.have.length(1);
    });
  });

  describe('extension: leases', () => {
    it('a lease not extended is released (by the database clock), announced as expired', async () => {
      const [r] = await res.reserve(req('alice', [N5, N6], { lease_secs: 1 }));
      expect(r!.lease_secs).to.equal(1);
      expect(Date.parse(r!.lease_until as string) - Date.parse(r!.start_time)).to.equal(1000);
      await waitFor(async () => (await res.activeAll()).size === 0, { what: 'the lease to run out', timeoutMs: 30_000 });
      const ended = await waitFor(() => events.of('reservation.ended', r!.reservation_id), { what: 'reservation.ended', timeoutMs: 30_000 });
      expect(ended.data).to.include({ how: 'expired', end_time: r!.lease_until });
      expect(await activeRows()).to.deep.equal([]);
    });

    it('extend renews the lease of every reservation the request made (lease_until = now + lease_secs)', async () => {
      const [a, b] = await res.reserve(req('alice', [N5, N6], { lease_secs: 600, duration_secs: 3600 }));
      // The database clock must move on first: on a fast machine the extend can start within the reserve's millisecond.
      await waitFor(async () => (await poolA.query(`SELECT now() > $1::timestamptz + interval '2 ms' AS later`, [a!.start_time])).rows[0].later === true, {
        what: 'the database clock to pass the reservation start',
      });
      await res.extend(a!.reservation_id, 'alice', 10);
      const all = await res.activeAll();
      const a2 = all.get(N5) as PgReservation;
      const b2 = all.get(N6) as PgReservation;
      expect(Date.parse(a2.lease_until as string)).to.be.greaterThan(Date.parse(a!.lease_until as string));
      expect(Date.parse(b2.lease_until as string)).to.be.greaterThan(Date.parse(b!.lease_until as string));
      expect(Date.parse(a2.expires as string) - Date.parse(a!.expires as string)).to.equal(10_000);
      expect(b2.expires).to.equal(b!.expires);
    });
  });

  describe('faults', () => {
    it('two portals reserving overlapping node sets at the same instant, 100 times: never both, never a partial reservation', async () => {
      const other = new PgReservations({ pool: poolB, isBusy, logger: silentLogger });
      others.push(other);
      let seed = 7;
      const rand = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed % n);
      const pickSet = (must?: string) => {
        const s = new Set<string>(must ? [must] : []);
        const k = 1 + rand(5);
        while (s.size < k) s.add(NODES[rand(NODES.length)]!);
        return [...s];
      };
      for (let round = 0; round < 100; round++) {
        const a = pickSet();
        const b = pickSet(a[rand(a.length)]);
        const [ra, rb] = await Promise.allSettled([res.reserve(req('alice', a)), other.reserve(req('bob', b))]);
        const won = [ra, rb].filter((x) => x.status === 'fulfilled');
        expect(won, `round ${round}: exactly one wins`).to.have.length(1);
        const lost = [ra, rb].find((x) => x.status === 'rejected') as PromiseRejectedResult;
        expect((lost.reason as FarmError).code, `round ${round}`).to.equal('conflict');
        const made = (won[0] as PromiseFulfilledResult<PgReservation[]>).value;
        const winnerSet = ra.status === 'fulfilled' ? a : b;
        const rows = await activeRows();
        expect(rows.map((r) => r.node_id), `round ${round}: the table holds exactly the winner's nodes`).to.deep.equal([...winnerSet].sort());
        for (const r of made) await (r.username === 'alice' ? res : other).end(r.reservation_id, r.username);
        expect(await activeRows()).to.deep.equal([]);
      }
    });

    it('a portal restart (a new PgReservations on the same database) sees, extends and ends the reservation', async () => {
      const [r] = await res.reserve(req('alice', [N7], { duration_secs: 600 }));
      const restarted = new PgReservations({ pool: poolB, isBusy, logger: silentLogger });
      others.push(restarted);
      await restarted.start();
      expect(await restarted.active(N7)).to.deep.equal(r);
      expect(await codeOf(restarted.reserve(req('bob', [N7])))).to.equal('conflict');
      await restarted.extend(r!.reservation_id, 'alice', 60);
      await restarted.end(r!.reservation_id, 'alice');
      expect(await res.active(N7)).to.equal(undefined);
    });
  });

  describe('extension: the wait queue', () => {
    it('answers waiters first come, first served as the holders end; a later waiter never takes a node an earlier one waits for', async () => {
      const [held] = await res.reserve(req('alice', [N5]));
      const order: string[] = [];
      const track = (who: string, p: Promise<PgReservation[]>) => p.then((made) => (order.push(who), made));
      const bob = track('bob', res.reserve(req('bob', [N5], { wait_secs: 60 })));
      await waitFor(() => res.waiting === 1, 'bob in the queue');
      const carol = track('carol', res.reserve(req('carol', [N5, N6], { wait_secs: 60 })));
      await waitFor(() => res.waiting === 2, 'carol in the queue');
      // N6 is free, but carol (earlier) waits for it: dave queues behind her.
      const dave = track('dave', res.reserve(req('dave', [N6], { wait_secs: 60 })));
      await waitFor(() => res.waiting === 3, 'dave in the queue');
      // Someone on other nodes is not held up.
      expect(await res.reserve(req('erin', [N7], { wait_secs: 60 }))).to.have.length(1);

      await res.end(held!.reservation_id, 'alice');
      const [b] = await bob;
      expect(b!.node_id).to.equal(N5);
      expect(order).to.deep.equal(['bob']);
      expect(res.waiting).to.equal(2);
      await res.end(b!.reservation_id, 'bob');
      const c = await carol;
      expect(c.map((x) => x.node_id)).to.deep.equal([N5, N6]);
      expect(order).to.deep.equal(['bob', 'carol']);
      await res.end(c[1]!.reservation_id, 'carol');
      await dave;
      expect(order).to.deep.equal(['bob', 'carol', 'dave']);
      expect(res.waiting).to.equal(0);
    });

    it('409 when wait_secs passes', async () => {
      await res.reserve(req('alice', [N5]));
      expect(await codeOf(res.reserve(req('bob', [N5, N6], { wait_secs: 1 })))).to.equal('conflict');
      expect(res.waiting).to.equal(0);
      expect((await activeRows()).map((r) => r.node_id)).to.deep.equal([N5]);
    });

    it('a node that stops being busy (outside the database) is noticed by the re-check', async () => {
      busy.set(N3, 'offline: no heartbeat');
      const p = res.reserve(req('bob', [N3], { wait_secs: 60 }));
      await waitFor(() => res.waiting === 1, 'bob in the queue');
      busy.delete(N3);
      expect((await p)[0]!.node_id).to.equal(N3);
    });

    it('a waiter whose client goes away leaves the queue and takes nothing', async () => {
      const [held] = await res.reserve(req('alice', [N5]));
      const ac = new AbortController();
      const p = res.reserve(req('bob', [N5], { wait_secs: 60 }), ac.signal);
      await waitFor(() => res.waiting === 1, 'bob in the queue');
      ac.abort();
      expect(await codeOf(p)).to.equal('device_unavailable');
      expect(res.waiting).to.equal(0);
      await res.end(held!.reservation_id, 'alice');
      expect(await activeRows()).to.deep.equal([]);
    });

    it('a waiter of another portal gets the node when it expires (the sweeper of any portal ends it)', async () => {
      await res.reserve(req('alice', [N6], { duration_secs: 1 }));
      const other = new PgReservations({ pool: poolB, isBusy, logger: silentLogger, recheckMs: 100 });
      others.push(other);
      const made = await other.reserve(req('bob', [N6], { wait_secs: 60 }));
      expect(made[0]!.username).to.equal('bob');
    });
  });

  describe('HTTP router (Koa, the node middleware, supertest)', () => {
    let server: http.Server;
    let url: string;
    before(async () => {
      const app = new Koa();
      app.use(errorHandler(silentLogger));
      app.use(jsonBody(1 << 20));
      // Stands for the portal's token guard: the user named by a test header.
      app.use(async (ctx, next) => {
        const login = ctx.get('x-test-user');
        if (login) (ctx.state as { user?: { login: string } }).user = { login };
        await next();
      });
      const router = farmReservationRouter({ reservations: res, notices: (u, about) => res.takeNotices(u, about) });
      app.use(router.routes()).use(router.allowedMethods());
      // As the portal's app: the table's role checks and the portal's request checks (portalCheck).
      authorizeRoutes(app);
      server = http.createServer(app.callback());
      await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok));
      url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    });
    after(() => new Promise<void>((ok) => server?.close(() => ok())));

    const as = (user: string) => ({
      post: (path: string, body?: unknown) => client(url).post(path).set('x-test-user', user).send(body as object),
      del: (path: string) => client(url).delete(path).set('x-test-user', user),
    });

    it('POST /api/v2/reservations: 200 {reservations} as the node presents them', async () => {
      const r = await as('alice').post('/api/v2/reservations', { node_ids: [N2, N1], message: 'hi <script>x</script> **bold**', duration_secs: 60 });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.reservations).to.have.length(2);
      const [a] = r.body.reservations;
      expect(a).to.have.all.keys('reservation_id', 'node_id', 'username', 'start_time', 'expires', 'message', 'message_html', 'reserved_by_you');
      expect(a).to.include({ node_id: N2, username: 'alice', reserved_by_you: true, message: 'hi <script>x</script> **bold**' });
      expect(a.message_html).to.contain('<strong>bold</strong>').and.not.contain('<script>');
      expect(new Date(a.start_time).toISOString()).to.equal(a.start_time);
    });

    it('a lease shows lease_secs and lease_until (extension fields)', async () => {
      const r = await as('alice').post('/api/v2/reservations', { node_ids: [N1], message: 'ci', lease_secs: 600 });
      expect(r.status, r.text).to.equal(200);
      expect(r.body.reservations[0]).to.include({ lease_secs: 600, expires: null });
      expect(r.body.reservations[0].lease_until).to.be.a('string');
    });

    it('400 invalid, 404 unknown node, 409 reserved, 403 without a user', async () => {
      const missing = await as('alice').post('/api/v2/reservations', { message: 'x' });
      expectError(missing, 400, 'invalid_request');
      expect(missing.body.message).to.equal('node_ids must be a non-empty array of node id strings');
      const tooLong = await as('alice').post('/api/v2/reservations', { node_ids: [N1], message: 'x', wait_secs: MAX_WAIT_SECS + 1 });
      expectError(tooLong, 400, 'invalid_request');
      expect(tooLong.body.message).to.equal(`wait_secs must be a whole number of seconds from 1 to ${MAX_WAIT_SECS}, or null`);
      expectError(await as('alice').post('/api/v2/reservations', { node_ids: [N1], message: 'x', duration_secs: '60' }), 400, 'invalid_request');
      expectError(await as('alice').post('/api/v2/reservations', { node_ids: ['nope'], message: 'x' }), 404, 'not_found');
      await as('alice').post('/api/v2/reservations', { node_ids: [N1], message: 'x' });
      expectError(await as('bob').post('/api/v2/reservations', { node_ids: [N2, N1], message: 'x' }), 409, 'conflict');
      expectError(await client(url).post('/api/v2/reservations').send({ node_ids: [N2], message: 'x' }), 403, 'forbidden');
    });

    it('extend, DELETE and interrupt answer the spec statuses', async () => {
      const made = await as('alice').post('/api/v2/reservations', { node_ids: [N1, N2], message: 'x', duration_secs: 60 });
      const [a, b] = made.body.reservations as { reservation_id: number }[];
      const path = `/api/v2/reservations/${a!.reservation_id}`;
      expect((await as('alice').post(`${path}/extend`, { duration_secs: 30 })).status).to.equal(204);
      expectError(await as('alice').post(`${path}/extend`, {}), 400, 'invalid_request');
      expectError(await as('bob').post(`${path}/extend`, { duration_secs: 30 }), 403, 'forbidden');
      expectError(await as('alice').post('/api/v2/reservations/999999/extend', { duration_secs: 30 }), 404, 'not_found');
      const badId = await as('alice').post('/api/v2/reservations/abc/extend', { duration_secs: 30 });
      expectError(badId, 400, 'invalid_request');
      expect(badId.body.message).to.equal('reservation id must be a positive integer, not "abc"');
      expectError(await as('bob').del(path), 403, 'forbidden');
      expect((await as('alice').del(path)).status).to.equal(204);
      expect((await as('bob').del(path)).status).to.equal(204);
      expectError(await as('alice').del('/api/v2/reservations/999999'), 404, 'not_found');
      expectError(await as('alice').post(`${path}/extend`, { duration_secs: 30 }), 400, 'invalid_request');
      const other = `/api/v2/reservations/${b!.reservation_id}`;
      expectError(await as('bob').post(`${other}/interrupt`, {}), 400, 'invalid_request');
      expect((await as('bob').post(`${other}/interrupt`, { message: 'need it' })).status).to.equal(204);
      expect((await as('carol').post(`${other}/interrupt`, { message: 'again' })).status).to.equal(204);
      expectError(await as('bob').post('/api/v2/reservations/999999/interrupt', { message: 'x' }), 404, 'not_found');
      expect(await activeRows()).to.deep.equal([]);
    });

    it('the owner of an interrupted reservation is told once: in the extend refusal, else with the next reserve answer', async () => {
      const made = await as('alice').post('/api/v2/reservations', { node_ids: [N1, N2], message: 'x' });
      const [a, b] = made.body.reservations as { reservation_id: number }[];
      await as('bob').post(`/api/v2/reservations/${a!.reservation_id}/interrupt`, { message: 'need N1' });
      await as('bob').post(`/api/v2/reservations/${b!.reservation_id}/interrupt`, { message: 'need N2' });
      const refused = await as('alice').post(`/api/v2/reservations/${a!.reservation_id}/extend`, { duration_secs: 30 });
      expectError(refused, 400, 'invalid_request');
      expect(refused.body.message).to.contain('interrupted by bob').and.contain('need N1').and.not.contain('need N2');
      const next = await as('alice').post('/api/v2/reservations', { node_ids: [N3], message: 'x' });
      expect(next.status, next.text).to.equal(200);
      expect(next.body.notices).to.have.length(1);
      expect(next.body.notices[0]).to.include({ reservation_id: b!.reservation_id, interrupted_by: 'bob', message: 'need N2' });
      const again = await as('alice').post('/api/v2/reservations', { node_ids: [N4], message: 'x' });
      expect(again.body).to.not.have.property('notices');
    });

    it('a waiting client that goes away leaves the queue', async () => {
      await as('alice').post('/api/v2/reservations', { node_ids: [N3], message: 'x' });
      const ac = new AbortController();
      const waiting = fetch(`${url}/api/v2/reservations`, {
        method: 'POST', signal: ac.signal, headers: { 'x-test-user': 'bob', 'content-type': 'application/json' },
        body: JSON.stringify({ node_ids: [N3], message: 'x', wait_secs: 60 }),
      }).catch((e: unknown) => e);
      await waitFor(() => res.waiting === 1, 'the request in the queue');
      ac.abort();
      await waiting;
      await waitFor(() => res.waiting === 0, 'the queue to empty');
    });
  });
});
