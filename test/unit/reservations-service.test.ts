// ReservationService: every row of the spec's Reservation state table, atomicity,
// permissions, parameter checks and interruption notices. Time is a hand-moved clock.
import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import {
  ReservationService,
  type ReservationServiceOptions,
  type ReservationState,
  type ReservationStore,
  type ReserveBody,
} from '../../src/core/reservations.js';
import { presentReservation } from '../../src/http/presenters.js';
import { endpointOf } from '../../src/http/endpoints/table.js';
import { validateRequest } from '../../src/http/endpoints/validate.js';
import { FakeClock } from '../fixtures/fakeClock.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');

class MemoryStore implements ReservationStore {
  saved: ReservationState[] = [];
  constructor(private state: ReservationState = { last_reservation_id: 0, reservations: [] }) {}
  load = () => structuredClone(this.state);
  save = async (s: ReservationState) => {
    this.state = structuredClone(s);
    this.saved.push(this.state);
  };
  get last() {
    return this.state;
  }
}

async function code(p: Promise<unknown> | (() => unknown)): Promise<string | undefined> {
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    if (e instanceof FarmError) return e.code;
    throw e;
  }
  return undefined;
}

function setup(over: Partial<ReservationServiceOptions> = {}) {
  const clock = new FakeClock(T0);
  const store = new MemoryStore();
  const busy = new Set<string>();
  const svc = new ReservationService({ store, clock, knownNodes: () => ['n1', 'n2'], isBusy: (n) => busy.has(n), ...over });
  return { clock, store, busy, svc };
}

/** What a node does with a request: the route's checks from the table of endpoints (400), then the service. */
const viaRoute = {
  reserve: (svc: ReservationService, user: string, body: unknown) => {
    validateRequest(endpointOf('POST', '/api/v2/reservations')!.check, { body });
    return svc.reserve(user, body as ReserveBody);
  },
  extend: (svc: ReservationService, user: string, id: string, body: unknown) => {
    validateRequest(endpointOf('POST', '/api/v2/reservations/:id/extend')!.check, { params: { id }, body });
    return svc.extend(user, Number(id), (body as { duration_secs: number }).duration_secs);
  },
  interrupt: (svc: ReservationService, user: string, id: string, body: unknown) => {
    validateRequest(endpointOf('POST', '/api/v2/reservations/:id/interrupt')!.check, { params: { id }, body });
    return svc.interrupt(user, Number(id), (body as { message: string }).message);
  },
};

describe('reservations: the state table', () => {
  it('none -> reserved on POST when all nodes are free: one reservation per node, reserved_by_you true', async () => {
    const { svc, clock } = setup();
    const made = await svc.reserve('alice', { node_ids: ['n1', 'n2'], message: 'soak test', duration_secs: 60 });
    expect(made.map((r) => r.node_id)).to.deep.equal(['n1', 'n2']);
    expect(made[0]!.reservation_id).to.equal(1);
    expect(made[1]!.reservation_id).to.equal(2);
    for (const r of made) {
      expect(r).to.include({ username: 'alice', message: 'soak test', start_time: new Date(T0).toISOString(), ended: null });
      expect(r.expires).to.equal(new Date(T0 + 60_000).toISOString());
      expect(presentReservation(r, 'alice')).to.include({ reserved_by_you: true, message_html: '<p>soak test</p>\n' });
    }
    expect(clock.timers.size).to.equal(2);
  });

  it('"Other users cannot start or stop jobs or use the manual remote control on the node"', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'mine' });
    expect(await code(() => svc.assertCanUse('alice', 'n1', 'run tests'))).to.equal(undefined);
    expect(await code(() => svc.assertCanUse('bob', 'n1', 'run tests'))).to.equal('forbidden');
    expect(await code(() => svc.assertCanUse(undefined, 'n1', 'stop the job'))).to.equal('forbidden');
    expect(await code(() => svc.assertCanUse('bob', 'n2', 'press keys'))).to.equal(undefined);
  });

  it('the 403 names the holder and the reservation message', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'debugging the EPG' });
    try {
      svc.assertCanUse('bob', 'n1', 'press keys');
      expect.fail('no error');
    } catch (e) {
      expect(e).to.be.instanceOf(FarmError);
      const fe = e as FarmError;
      expect(fe.details).to.deep.equal({ reservation_id: 1, username: 'alice' });
      expect(fe.message).to.contain('alice').and.contain('debugging the EPG').and.contain('press keys');
    }
  });

  it('reserved -> reserved on extend by the creator: "expires moves later by duration_secs"', async () => {
    const { svc, clock } = setup();
    const [r] = await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 60 });
    clock.advance(30_000);
    await svc.extend('alice', r!.reservation_id, 120);
    expect(svc.get(1)!.expires).to.equal(new Date(T0 + 180_000).toISOString());
    clock.advance(149_999);
    expect(svc.active('n1')?.reservation_id).to.equal(1);
    clock.advance(1);
    expect(svc.active('n1')).to.equal(undefined);
  });

  it('reserved -> ended on DELETE by the creator', async () => {
    const { svc, clock, store } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 60 });
    await svc.end('alice', 1);
    expect(svc.active('n1')).to.equal(undefined);
    expect(svc.get(1)!.ended).to.include({ how: 'ended', by: 'alice', notice_pending: false });
    expect(store.last.reservations[0]!.ended?.how).to.equal('ended');
    expect(clock.timers.size, 'the expiry timer is cleared').to.equal(0);
  });

  it('reserved -> ended on interrupt by any authenticated user; "The message is shown to the owner"', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    await svc.interrupt('bob', 1, 'release needs this box');
    expect(svc.active('n1')).to.equal(undefined);
    expect(svc.get(1)!.ended).to.include({ how: 'interrupted', by: 'bob', message: 'release needs this box' });
    const notices = svc.takeNotice('alice');
    expect(notices).to.have.length(1);
    expect(notices[0]).to.include({ reservation_id: 1, node_id: 'n1', interrupted_by: 'bob', message: 'release needs this box' });
  });

  it('reserved -> ended when "duration_secs given and elapsed"', async () => {
    const { svc, clock } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 5 });
    clock.advance(5000);
    expect(svc.get(1)!.ended).to.include({ how: 'expired', by: null, time: new Date(T0 + 5000).toISOString() });
  });

  it('"A reservation made without duration (or with null) never expires": expires is null', async () => {
    const { svc, clock } = setup();
    const [a] = await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    const [b] = await svc.reserve('bob', { node_ids: ['n2'], message: 'm', duration_secs: null });
    expect(a!.expires).to.equal(null);
    expect(b!.expires).to.equal(null);
    expect(clock.timers.size).to.equal(0);
    clock.advance(10 * 365 * 86_400_000);
    expect(svc.active('n1')?.username).to.equal('alice');
    expect(svc.active('n2')?.username).to.equal('bob');
  });

  it('ended -> ended on DELETE or interrupt by anyone: "Succeeds with 204"', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    await svc.end('alice', 1);
    expect(await code(svc.end('alice', 1))).to.equal(undefined);
    expect(await code(svc.end('bob', 1))).to.equal(undefined);
    expect(await code(svc.interrupt('bob', 1, 'x'))).to.equal(undefined);
    expect(svc.get(1)!.ended?.how, 'the first end is kept').to.equal('ended');
    expect(svc.takeNotice('alice')).to.deep.equal([]);
  });

  it('ended -> ended on extend by anyone: "Fails with 400"', async () => {
    const { svc, clock } = setup();
    await svc.reserve('alice', { node_ids: ['n1', 'n2'], message: 'm', duration_secs: 10 });
    await svc.end('alice', 1);
    clock.advance(10_000); // 2 expires
    for (const id of [1, 2]) {
      expect(await code(svc.extend('alice', id, 60))).to.equal('invalid_request');
      expect(await code(svc.extend('bob', id, 60))).to.equal('invalid_request');
    }
  });
});

describe('reservations: atomicity and conflicts', () => {
  it('409 and nothing reserved when one of two nodes is busy running a job', async () => {
    const { svc, busy, store } = setup();
    busy.add('n2');
    expect(await code(svc.reserve('alice', { node_ids: ['n1', 'n2'], message: 'm' }))).to.equal('conflict');
    expect(svc.active('n1')).to.equal(undefined);
    expect(store.saved).to.have.length(0);
    busy.delete('n2');
    const made = await svc.reserve('alice', { node_ids: ['n1', 'n2'], message: 'm' });
    expect(made.map((r) => r.reservation_id), 'no id was used up by the failed attempt').to.deep.equal([1, 2]);
  });

  it('409 and nothing reserved when one node is reserved, even by the caller', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n2'], message: 'm' });
    expect(await code(svc.reserve('bob', { node_ids: ['n1', 'n2'], message: 'm' }))).to.equal('conflict');
    expect(await code(svc.reserve('alice', { node_ids: ['n1', 'n2'], message: 'm' }))).to.equal('conflict');
    expect(svc.active('n1')).to.equal(undefined);
  });

  it('404 for an unknown node id, nothing reserved', async () => {
    const { svc } = setup();
    expect(await code(svc.reserve('alice', { node_ids: ['n1', 'elsewhere'], message: 'm' }))).to.equal('not_found');
    expect(svc.active('n1')).to.equal(undefined);
  });

  it('two users reserving the same node at once: exactly one wins', async () => {
    const { svc } = setup();
    const tries = await Promise.allSettled([
      svc.reserve('alice', { node_ids: ['n1', 'n2'], message: 'a' }),
      svc.reserve('bob', { node_ids: ['n2'], message: 'b' }),
    ]);
    expect(tries.map((t) => t.status)).to.deep.equal(['fulfilled', 'rejected']);
    expect(svc.active('n2')?.username).to.equal('alice');
  });

  it('a node is free again once its reservation ends', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    await svc.end('alice', 1);
    const [r] = await svc.reserve('bob', { node_ids: ['n1'], message: 'm' });
    expect(r!.reservation_id).to.equal(2);
  });
});

describe('reservations: parameters', () => {
  const bad: [string, unknown][] = [
    ['no body', null],
    ['an array body', [['n1']]],
    ['no node_ids', { message: 'm' }],
    ['empty node_ids', { node_ids: [], message: 'm' }],
    ['a number in node_ids', { node_ids: [1], message: 'm' }],
    ['node_ids a string', { node_ids: 'n1', message: 'm' }],
    ['a node listed twice', { node_ids: ['n1', 'n1'], message: 'm' }],
    ['no message', { node_ids: ['n1'] }],
    ['a number message', { node_ids: ['n1'], message: 5 }],
    ['a message over 10,000 characters', { node_ids: ['n1'], message: 'x'.repeat(10_001) }],
    ['duration_secs 0', { node_ids: ['n1'], message: 'm', duration_secs: 0 }],
    ['duration_secs -5', { node_ids: ['n1'], message: 'm', duration_secs: -5 }],
    ['duration_secs 1.5', { node_ids: ['n1'], message: 'm', duration_secs: 1.5 }],
    ['duration_secs "60"', { node_ids: ['n1'], message: 'm', duration_secs: '60' }],
    ['duration_secs true', { node_ids: ['n1'], message: 'm', duration_secs: true }],
    ['duration_secs over ten years', { node_ids: ['n1'], message: 'm', duration_secs: 10 * 365 * 86_400 + 1 }],
  ];
  for (const [name, body] of bad) {
    it(`400 for ${name}`, async () => {
      const { svc } = setup();
      expect(await code(() => viaRoute.reserve(svc, 'alice', body))).to.equal('invalid_request');
      expect(svc.active('n1')).to.equal(undefined);
    });
  }

  it('accepts a message of exactly 10,000 characters and an empty one', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'x'.repeat(10_000) });
    await svc.reserve('alice', { node_ids: ['n2'], message: '' });
    expect(svc.active('n2')?.message).to.equal('');
  });

  it('extend needs a positive whole duration_secs', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 60 });
    for (const d of [undefined, null, 0, 2.5, '10']) expect(await code(() => viaRoute.extend(svc, 'alice', '1', { duration_secs: d })), String(d)).to.equal('invalid_request');
    expect(svc.get(1)!.expires).to.equal(new Date(T0 + 60_000).toISOString());
  });

  it('extending a reservation without expiry leaves it without expiry', async () => {
    const { svc, clock } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    await svc.extend('alice', 1, 60);
    expect(svc.get(1)!.expires).to.equal(null);
    clock.advance(3_600_000);
    expect(svc.active('n1')?.reservation_id).to.equal(1);
  });

  it('the reservation id in the path: 400 unless a positive integer', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    expect(await code(() => viaRoute.interrupt(svc, 'bob', '1', { message: 'x' }))).to.equal(undefined);
    for (const t of ['0', '-1', '1.5', 'abc', '', '01', '1e3', '9'.repeat(16)]) {
      expect(await code(() => viaRoute.interrupt(svc, 'bob', t, { message: 'x' })), t).to.equal('invalid_request');
    }
  });

  it('404 for a reservation id never issued, for every action', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    expect(await code(svc.extend('alice', 2, 60))).to.equal('not_found');
    expect(await code(svc.end('alice', 2))).to.equal('not_found');
    expect(await code(svc.interrupt('alice', 2, 'x'))).to.equal('not_found');
    expect(svc.get(2)).to.equal(undefined);
  });
});

describe('reservations: permissions', () => {
  it('403 when another user extends; the expiry is unchanged', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 60 });
    expect(await code(svc.extend('bob', 1, 60))).to.equal('forbidden');
    expect(svc.get(1)!.expires).to.equal(new Date(T0 + 60_000).toISOString());
  });

  it('403 when another user DELETEs; the reservation stays', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    expect(await code(svc.end('bob', 1))).to.equal('forbidden');
    expect(svc.active('n1')?.reservation_id).to.equal(1);
  });

  it('interrupt: "message required" -> 400 and the reservation stays', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    for (const m of [undefined, null, '', '   ', 7]) expect(await code(() => viaRoute.interrupt(svc, 'bob', '1', { message: m })), String(m)).to.equal('invalid_request');
    expect(svc.active('n1')?.reservation_id).to.equal(1);
  });

  it('the owner may interrupt their own reservation; nobody gets a notice', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    await svc.interrupt('alice', 1, 'done early');
    expect(svc.active('n1')).to.equal(undefined);
    expect(svc.takeNotice('alice')).to.deep.equal([]);
  });

  it('reserved_by_you depends on the caller (http/presenters.ts)', async () => {
    const { svc } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm' });
    const r = svc.active('n1')!;
    expect(presentReservation(r, 'alice').reserved_by_you).to.equal(true);
    expect(presentReservation(r, 'bob').reserved_by_you).to.equal(false);
    expect(presentReservation(r, undefined).reserved_by_you).to.equal(false);
  });
});

describe('reservations: interruption notices', () => {
  it('each notice is taken once, only by the owner, and can be scoped to a node or reservation', async () => {
    const { svc, store } = setup();
    await svc.reserve('alice', { node_ids: ['n1', 'n2'], message: 'm' });
    await svc.interrupt('bob', 1, 'one');
    await svc.interrupt('carol', 2, 'two');
    expect(svc.takeNotice('bob')).to.deep.equal([]);
    expect(svc.takeNotice('alice', { nodeId: 'n2' }).map((n) => n.message)).to.deep.equal(['two']);
    expect(svc.takeNotice('alice', { reservationId: 2 })).to.deep.equal([]);
    const rest = svc.takeNotice('alice');
    expect(rest.map((n) => [n.reservation_id, n.interrupted_by])).to.deep.equal([[1, 'bob']]);
    expect(svc.takeNotice('alice')).to.deep.equal([]);
    await new Promise((r) => setImmediate(r));
    expect(store.last.reservations.every((r) => r.ended?.notice_pending === false), 'taken notices are persisted').to.equal(true);
  });

  it('an expiry or the owner ending it gives no notice', async () => {
    const { svc, clock } = setup();
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 1 });
    await svc.reserve('alice', { node_ids: ['n2'], message: 'm' });
    clock.advance(1000);
    await svc.end('alice', 2);
    expect(svc.takeNotice('alice')).to.deep.equal([]);
  });
});

describe('reservations: bounded history', () => {
  it('ended reservations past keepEnded are dropped, yet their ids still answer as ended, not 404', async () => {
    const { svc, store } = setup({ limits: { keepEnded: 2 } });
    for (let i = 0; i < 5; i++) {
      await svc.reserve('alice', { node_ids: ['n1'], message: `m${i}` });
      await svc.end('alice', i + 1);
    }
    expect(store.last.reservations.map((r) => r.reservation_id)).to.have.members([4, 5]);
    expect(store.last.last_reservation_id).to.equal(5);
    expect(svc.get(1)).to.equal(undefined);
    expect(await code(svc.end('bob', 1))).to.equal(undefined);
    expect(await code(svc.interrupt('bob', 1, 'x'))).to.equal(undefined);
    expect(await code(svc.extend('alice', 1, 5))).to.equal('invalid_request');
  });
});

describe('reservations: a failed write', () => {
  it('a reserve whose state cannot be written leaves the nodes free', async () => {
    let fail = true;
    const store: ReservationStore = {
      load: () => ({ last_reservation_id: 0, reservations: [] }),
      save: async () => {
        if (fail) throw new Error('disk full');
      },
    };
    const { svc } = setup({ store });
    let err: unknown;
    await svc.reserve('alice', { node_ids: ['n1', 'n2'], message: 'm', duration_secs: 60 }).catch((e: unknown) => (err = e));
    expect((err as Error).message).to.equal('disk full');
    expect(svc.active('n1')).to.equal(undefined);
    expect(svc.active('n2')).to.equal(undefined);
    fail = false;
    expect((await svc.reserve('bob', { node_ids: ['n1'], message: 'm' }))[0]!.username).to.equal('bob');
  });
});
