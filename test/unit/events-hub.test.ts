// EventHub: ids, the bounded buffer and resume, subscribers, and the node health watcher. Time is a hand-moved clock.
import { expect } from 'chai';
import { EventHub, HealthWatcher, isEventId, runFinished, type FarmEvent } from '../../src/core/events.js';
import type { CaptureHealth } from '../../src/core/ports.js';
import { ReservationService } from '../../src/core/reservations.js';
import { FakeClock } from '../fixtures/fakeClock.js';
import { resultRecord } from '../fixtures/records.js';

const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const press = (key: string) => ({ key, remote: 'tv', hold_ms: 0, source: 'api' as const, username: 'alice', result_id: null });

function hub(bufferSize = 5, clock = new FakeClock(T0)) {
  return { h: new EventHub({ nodeId: 'node-1', bufferSize, now: clock.now }), clock };
}

describe('event hub', () => {
  it('ids increase within a run, carry the boot prefix, and differ across restarts', () => {
    const clock = new FakeClock(T0);
    const { h } = hub(5, clock);
    h.publish('key.pressed', press('KEY_1'));
    h.publish('key.pressed', press('KEY_2'));
    const ids = h.buffered().map((e) => e.id);
    expect(ids).to.deep.equal([`${h.boot}-1`, `${h.boot}-2`]);
    expect(ids.every(isEventId)).to.equal(true);
    clock.advance(1);
    const next = new EventHub({ nodeId: 'node-1', now: clock.now });
    next.publish('key.pressed', press('KEY_1'));
    expect(next.boot).to.not.equal(h.boot);
    expect(next.lastId).to.not.equal(ids[0]);
  });

  it('every event has its type, the time from the clock and node_id in its data', () => {
    const { h, clock } = hub();
    clock.advance(1500);
    h.publish('node.offline', { online: false, reason: 'capture stopped' });
    const [e] = h.buffered();
    expect(e).to.deep.equal({ id: `${h.boot}-1`, type: 'node.offline', time: '2030-01-01T00:00:01.500Z', data: { node_id: 'node-1', online: false, reason: 'capture stopped' } });
  });

  it('keeps only the last bufferSize events, oldest first', () => {
    const { h } = hub(3);
    for (let i = 1; i <= 7; i++) h.publish('key.pressed', press(`KEY_${i}`));
    expect(h.buffered().map((e) => (e.data as { key: string }).key)).to.deep.equal(['KEY_5', 'KEY_6', 'KEY_7']);
    expect(h.published).to.equal(7);
  });

  it('resume: the events after the id; nothing after the latest; everything with a reason when some are gone', () => {
    const { h } = hub(3);
    for (let i = 1; i <= 5; i++) h.publish('key.pressed', press(`KEY_${i}`));
    const keys = (r: { events: FarmEvent[] }) => r.events.map((e) => (e.data as { key: string }).key);
    // Buffered: 3, 4, 5. After 2, nothing is missing (3 is the next).
    expect(h.since(`${h.boot}-2`)).to.deep.include({ missed: null });
    expect(keys(h.since(`${h.boot}-2`))).to.deep.equal(['KEY_3', 'KEY_4', 'KEY_5']);
    expect(keys(h.since(`${h.boot}-4`))).to.deep.equal(['KEY_5']);
    expect(h.since(`${h.boot}-5`)).to.deep.equal({ events: [], missed: null });
    expect(h.since(undefined)).to.deep.equal({ events: [], missed: null });

    const old = h.since(`${h.boot}-1`);
    expect(old.missed).to.deep.equal({ reason: 'too_old', last_event_id: `${h.boot}-1`, oldest_event_id: `${h.boot}-3` });
    expect(keys(old)).to.deep.equal(['KEY_3', 'KEY_4', 'KEY_5']);
    expect(h.since('abc123-4').missed?.reason).to.equal('restarted');
    expect(h.since(`${h.boot}-99`).missed?.reason).to.equal('unknown_id');
    expect(h.since('not an id').missed?.reason).to.equal('unknown_id');
  });

  it('subscribers get each event synchronously; a throwing one is kept and does not stop the others', () => {
    const { h } = hub();
    const got: string[] = [];
    h.subscribe(() => {
      throw new Error('boom');
    });
    const sub = h.subscribe((e) => got.push(e.id));
    h.publish('key.pressed', press('KEY_1'));
    expect(got).to.deep.equal([`${h.boot}-1`]);
    expect(h.subscriberCount).to.equal(2);
    sub.close();
    h.publish('key.pressed', press('KEY_2'));
    expect(got).to.have.length(1);
  });

  it('a dropped subscriber is counted once and gets nothing more', () => {
    const { h } = hub();
    const got: string[] = [];
    const sub = h.subscribe((e) => got.push(e.id));
    sub.drop();
    sub.drop();
    h.publish('key.pressed', press('KEY_1'));
    expect(got).to.deep.equal([]);
    expect(h.dropped).to.equal(1);
    expect(h.subscriberCount).to.equal(0);
  });

  it('rejects a buffer size that is not a positive integer', () => {
    expect(() => new EventHub({ nodeId: 'n', bufferSize: 0 })).to.throw(/bufferSize/);
  });
});

describe('node health watcher', () => {
  it('publishes node.offline and node.online on transitions only, sampling on the clock', () => {
    const clock = new FakeClock(T0);
    const { h } = hub(10, clock);
    let health: CaptureHealth = { online: false, reason: 'starting: waiting for the first frame' };
    const w = new HealthWatcher({ health: () => health, sink: h, clock, intervalMs: 1000 });
    w.start();
    expect(h.published, 'the first sample is no transition').to.equal(0);
    health = { online: true, reason: null };
    clock.advance(999);
    expect(h.published).to.equal(0);
    clock.advance(1);
    clock.advance(5000);
    health = { online: false, reason: 'stalled: no frames for 2.2 s' };
    clock.advance(1000);
    clock.advance(3000);
    expect(h.buffered().map((e) => [e.type, e.data])).to.deep.equal([
      ['node.online', { node_id: 'node-1', online: true, reason: null }],
      ['node.offline', { node_id: 'node-1', online: false, reason: 'stalled: no frames for 2.2 s' }],
    ]);
    w.stop();
    expect(clock.timers.size).to.equal(0);
    health = { online: true, reason: null };
    clock.advance(5000);
    expect(h.published).to.equal(2);
  });
});

describe('reservation events', () => {
  const store = (failSave = false) => {
    let state = { last_reservation_id: 0, reservations: [] as never[] };
    return {
      load: () => structuredClone(state),
      save: async (s: typeof state) => {
        if (failSave) throw new Error('disk full');
        state = structuredClone(s);
      },
    };
  };

  it('made, extended, interrupted, and ended at the expiry instant when the timer fires', async () => {
    const clock = new FakeClock(T0);
    const { h } = hub(20, clock);
    const svc = new ReservationService({ store: store(), knownNodes: () => ['node-1'], isBusy: () => false, clock, events: h });
    const [a] = await svc.reserve('alice', { node_ids: ['node-1'], message: 'm', duration_secs: 60 });
    await svc.extend('alice', a!.reservation_id, 60);
    clock.advance(120_000);
    const [b] = await svc.reserve('bob', { node_ids: ['node-1'], message: 'n' });
    await svc.interrupt('carol', b!.reservation_id, 'release day');
    expect(h.buffered().map((e) => e.type)).to.deep.equal(['reservation.made', 'reservation.extended', 'reservation.ended', 'reservation.made', 'reservation.interrupted']);
    const [, extended, expired, , interrupted] = h.buffered();
    expect(extended!.data).to.include({ reservation_id: a!.reservation_id, expires: '2030-01-01T00:02:00.000Z' });
    expect(expired!.data).to.include({ how: 'expired', by: null, end_time: '2030-01-01T00:02:00.000Z' });
    expect(interrupted!.data).to.include({ reservation_id: b!.reservation_id, how: 'interrupted', by: 'carol', end_message: 'release day', username: 'bob' });
  });

  it('a reservation that could not be saved publishes nothing', async () => {
    const { h } = hub();
    const svc = new ReservationService({ store: store(true), knownNodes: () => ['node-1'], isBusy: () => false, clock: new FakeClock(T0), events: h });
    let failed = false;
    await svc.reserve('alice', { node_ids: ['node-1'], message: 'm' }).catch(() => (failed = true));
    expect(failed).to.equal(true);
    expect(h.published).to.equal(0);
  });
});

describe('run.finished payload', () => {
  it('reads infrastructure_error from the stored record when it has one, else null', () => {
    const rec = resultRecord({ result: 'error', failure_reason: 'InfrastructureError: capture_lost: the capture stopped' });
    expect(runFinished(rec)).to.include({ result: 'error', infrastructure_error: null, result_id: rec.result_id });
    expect(runFinished({ ...rec, infrastructure_error: 'capture_lost' })).to.include({ infrastructure_error: 'capture_lost' });
  });
});
