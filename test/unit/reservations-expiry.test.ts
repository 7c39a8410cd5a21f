// Reservation expiry: a timer set to the expiry instant (no polling), re-armed on
// extend, and persisted in the real state file so a restarted daemon ends or re-arms.
import { expect } from 'chai';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ReservationService, systemClock, type Clock, type ReservationState, type ReservationStore } from '../../src/core/reservations.js';
import { StateReservationStore, StateStore } from '../../src/storage/state.js';
import { FakeClock } from '../fixtures/fakeClock.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const at = (ms: number) => new Date(T0 + ms).toISOString();

/** Wraps a store to see what was written, and when. */
class WatchedStore implements ReservationStore {
  writes: { at: number; state: ReservationState }[] = [];
  constructor(
    private readonly inner: ReservationStore,
    private readonly clock: Clock,
  ) {}
  load = () => this.inner.load();
  save = async (s: ReservationState) => {
    this.writes.push({ at: this.clock.now(), state: structuredClone(s) });
    await this.inner.save(s);
  };
}

const memory = (): ReservationStore => {
  let s: ReservationState = { last_reservation_id: 0, reservations: [] };
  return { load: () => structuredClone(s), save: async (n) => void (s = structuredClone(n)) };
};

describe('reservations: exact expiry', () => {
  it('one timer set to the expiry instant ends it there, with no call from anyone', async () => {
    const clock = new FakeClock(T0);
    const store = new WatchedStore(memory(), clock);
    const svc = new ReservationService({ store, clock, knownNodes: () => ['n1'], isBusy: () => false });
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 90 });
    expect(clock.armed).to.deep.equal([T0 + 90_000]);
    clock.advance(89_999);
    expect(store.writes).to.have.length(1);
    clock.advance(1);
    await Promise.resolve();
    expect(store.writes).to.have.length(2);
    expect(store.writes[1]!.at).to.equal(T0 + 90_000);
    expect(store.writes[1]!.state.reservations[0]!.ended).to.include({ how: 'expired', time: at(90_000) });
    expect(clock.timers.size).to.equal(0);
  });

  it('a timer run a millisecond before Date.now() reaches the expiry (as Node may) ends it there, with no second timer', async () => {
    const clock = new FakeClock(T0);
    const svc = new ReservationService({ store: memory(), clock, knownNodes: () => ['n1'], isBusy: () => false });
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 1 });
    const [handle, timer] = [...clock.timers.entries()][0]!;
    clock.timers.delete(handle);
    clock.t = timer.at - 1; // stress-ng showed Node's timers this early by Date.now(): [1000, 1]
    timer.fn();
    expect(svc.get(1)!.ended).to.include({ how: 'expired', time: at(1000) });
    expect(clock.armed, 'no timer armed for the last millisecond').to.deep.equal([T0 + 1000]);
    expect(clock.timers.size).to.equal(0);
  });

  it('extend re-arms the timer at the new expiry', async () => {
    const clock = new FakeClock(T0);
    const svc = new ReservationService({ store: memory(), clock, knownNodes: () => ['n1'], isBusy: () => false });
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 10 });
    clock.advance(5000);
    await svc.extend('alice', 1, 10);
    expect(clock.timers.size, 'the old timer is cleared').to.equal(1);
    expect([...clock.timers.values()][0]!.at).to.equal(T0 + 20_000);
    clock.advance(14_999);
    expect(svc.get(1)!.ended).to.equal(null);
    clock.advance(1);
    expect(svc.get(1)!.ended?.time).to.equal(at(20_000));
  });

  it('a wait longer than setTimeout allows (2^31-1 ms) is split and still ends at the instant', async () => {
    const clock = new FakeClock(T0);
    const svc = new ReservationService({ store: memory(), clock, knownNodes: () => ['n1'], isBusy: () => false });
    const days40 = 40 * 86_400;
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: days40 });
    expect(clock.armed[0]).to.equal(T0 + 2 ** 31 - 1);
    clock.advance(days40 * 1000 - 1);
    expect(svc.get(1)!.ended).to.equal(null);
    clock.advance(1);
    expect(svc.get(1)!.ended?.time).to.equal(at(days40 * 1000));
  });

  it('a late timer does not let an expired reservation block the node', async () => {
    const clock = new FakeClock(T0);
    const svc = new ReservationService({ store: memory(), clock, knownNodes: () => ['n1'], isBusy: () => false });
    await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 1 });
    clock.timers.clear(); // the timer has not run yet (a busy event loop)
    clock.t += 1000;
    expect(() => svc.assertCanUse('bob', 'n1', 'run tests')).not.to.throw();
    expect(svc.get(1)!.ended).to.include({ how: 'expired', time: at(1000) });
  });

  it('with the real clock, a 1 s reservation is ended by one timer armed for its expiry (timer-driven, not polled)', async function () {
    this.timeout(10_000);
    let ended!: () => void;
    const done = new Promise<void>((r) => (ended = r));
    const inner = memory();
    const store: ReservationStore = {
      load: () => inner.load(),
      save: async (s) => {
        if (s.reservations[0]?.ended) ended();
        await inner.save(s);
      },
    };
    // The real timers, with every delay asked for written down.
    const delays: number[] = [];
    const clock: Clock = {
      now: () => systemClock.now(),
      setTimer: (fn, ms) => (delays.push(ms), systemClock.setTimer(fn, ms)),
      clearTimer: (h) => systemClock.clearTimer(h),
    };
    const svc = new ReservationService({ store, clock, knownNodes: () => ['n1'], isBusy: () => false });
    try {
      const [r] = await svc.reserve('alice', { node_ids: ['n1'], message: 'm', duration_secs: 1 });
      await done; // the end is saved by itself: nobody asked about the reservation
      expect(svc.get(1)!.ended).to.include({ how: 'expired', time: r!.expires });
      // One timer, for the whole remaining time; a poll would show many short delays.
      expect(delays, `delays asked for: ${delays.join(', ')}`).to.have.length(1);
      expect(delays[0]).to.be.within(1, 1000);
    } finally {
      svc.stop();
    }
  });
});

describe('reservations: across a daemon restart (real state file)', () => {
  let dir: string;
  let opened: StateStore[];
  /** Open the state file as a daemon does; afterEach closes it, as a daemon's stop does (its writes land first). */
  const openState = async () => {
    const s = await StateStore.open(dir);
    opened.push(s);
    return s;
  };
  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'farmhand-resv-'));
    opened = [];
  });
  afterEach(async () => {
    for (const s of opened) await s.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('on start, expired reservations end at their expiry and the others re-arm; ids continue', async () => {
    const c1 = new FakeClock(T0);
    const s1 = new ReservationService({ store: new StateReservationStore(await openState()), clock: c1, knownNodes: () => ['a', 'b', 'c', 'd'], isBusy: () => false });
    await s1.start();
    await s1.reserve('alice', { node_ids: ['a'], message: 'short', duration_secs: 2 });
    await s1.reserve('bob', { node_ids: ['b'], message: 'long', duration_secs: 100 });
    await s1.reserve('carol', { node_ids: ['c'], message: 'forever' });
    await s1.interrupt('dave', 3, 'need it'); // a pending notice for carol
    s1.stop();

    const onDisk = JSON.parse(await readFile(path.join(dir, 'state.json'), 'utf8')) as { last_reservation_id: number };
    expect(onDisk.last_reservation_id).to.equal(3);

    const c2 = new FakeClock(T0);
    c2.t = T0 + 5000; // the daemon was down for 5 s
    const st2 = await openState();
    const s2 = new ReservationService({ store: new StateReservationStore(st2), clock: c2, knownNodes: () => ['a', 'b', 'c', 'd'], isBusy: () => false });
    await s2.start();
    expect(s2.get(1)!.ended).to.include({ how: 'expired', time: at(2000) });
    expect(s2.active('b')?.reservation_id).to.equal(2);
    expect(c2.armed, 'b re-armed at its own expiry').to.deep.equal([T0 + 100_000]);
    expect(s2.takeNotice('carol').map((n) => n.message)).to.deep.equal(['need it']);
    const [d] = await s2.reserve('erin', { node_ids: ['d'], message: 'm' });
    expect(d!.reservation_id).to.equal(4);
    c2.advance(95_000);
    expect(s2.get(2)!.ended?.time).to.equal(at(100_000));

    // The ended expiry was written, so a third start has nothing to do for it.
    s2.stop();
    await st2.close(); // as a daemon's stop: the expiry written in the background lands first
    const s3 = new ReservationService({ store: new StateReservationStore(await openState()), clock: c2, knownNodes: () => ['a', 'b', 'c', 'd'], isBusy: () => false });
    expect(s3.get(2)!.ended?.how).to.equal('expired');
    expect(s3.takeNotice('carol'), 'a notice is shown once, also across restarts').to.deep.equal([]);
  });

  it('an older state file without reservation fields opens with none', async () => {
    const { writeFile } = await import('node:fs/promises');
    await writeFile(path.join(dir, 'state.json'), JSON.stringify({ installation_hex: 'beef', last_job_number: 7 }));
    const state = await openState();
    expect(state.data).to.include({ installation_hex: 'beef', last_job_number: 7, last_reservation_id: 0, node_usage: null });
    const svc = new ReservationService({ store: new StateReservationStore(state), clock: new FakeClock(T0), knownNodes: () => ['a'], isBusy: () => false });
    expect((await svc.reserve('alice', { node_ids: ['a'], message: 'm' }))[0]!.reservation_id).to.equal(1);
  });
});
