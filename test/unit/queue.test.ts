// The queue's pure part (src/core/queue.ts): selectors, priority and timeout checks, the order, the plan, why a job waits.
import { expect } from 'chai';
import type { Availability } from '../../src/core/availability.js';
import { FarmError } from '../../src/core/errors.js';
import {
  checkSatisfiable,
  compareWaiting,
  DEFAULT_PRIORITY,
  explainWait,
  parseLabelAssignment,
  parsePriority,
  parseQueueTimeout,
  parseSelector,
  planAssignments,
  selectorText,
  type QueueNode,
  type WaitingJob,
} from '../../src/core/queue.js';

const code = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    expect(e).to.be.instanceOf(FarmError);
    return (e as FarmError).code;
  }
  throw new Error('did not throw');
};
const message = (fn: () => unknown): string => {
  try {
    fn();
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('did not throw');
};

const AV: Availability = { kind: 'available', detail: null };
const node = (node_id: string, labels: Record<string, string>, availability: Availability = AV): QueueNode => ({ node_id, labels, availability });
const job = (queue_id: number, priority: number, queued_at: number, labels: Record<string, string>): WaitingJob => ({ queue_id, priority, queued_at, labels });

describe('queue (core)', () => {
  it('parses selectors as objects and as key=value text, keys sorted; refuses bad ones with invalid_request', () => {
    expect(parseSelector({ room: 'lab2', device: 'roku-ultra' })).to.deep.equal({ device: 'roku-ultra', room: 'lab2' });
    expect(Object.keys(parseSelector({ room: 'lab2', device: 'roku-ultra' }))).to.deep.equal(['device', 'room']);
    expect(parseSelector('room=lab2, device=roku-ultra')).to.deep.equal({ device: 'roku-ultra', room: 'lab2' });
    expect(selectorText({ room: 'lab2', device: 'roku-ultra' })).to.equal('device=roku-ultra,room=lab2');
    for (const bad of [undefined, null, [], 'device', '', {}, { Device: 'x' }, { device: '' }, { device: 3 }, 'device=a,device=b', { device: 'a b' }]) {
      expect(code(() => parseSelector(bad)), JSON.stringify(bad)).to.equal('invalid_request');
    }
    expect(parseLabelAssignment('os=tvos:17')).to.deep.equal(['os', 'tvos:17']);
    expect(code(() => parseLabelAssignment('=x'))).to.equal('invalid_request');
  });

  it('checks priority (0-100, default 50) and queue_timeout_secs', () => {
    expect(parsePriority(undefined)).to.equal(DEFAULT_PRIORITY);
    expect(parsePriority(0)).to.equal(0);
    expect(parsePriority(100)).to.equal(100);
    for (const bad of [-1, 101, 1.5, '50', true]) expect(code(() => parsePriority(bad)), String(bad)).to.equal('invalid_request');
    expect(message(() => parsePriority(101))).to.match(/0 \(lowest\) to 100 \(highest\)/);
    expect(parseQueueTimeout(null)).to.equal(null);
    expect(parseQueueTimeout(60)).to.equal(60);
    for (const bad of [0, -5, 2.5, '60', 8 * 86_400]) expect(code(() => parseQueueTimeout(bad)), String(bad)).to.equal('invalid_request');
  });

  it('refuses at once a selector no node can ever match, saying which label is unknown', () => {
    const nodes = new Map([
      ['a', { device: 'roku', room: 'lab1' }],
      ['b', { device: 'appletv', room: 'lab2' }],
    ]);
    expect(() => checkSatisfiable({ device: 'roku' }, nodes)).not.to.throw();
    expect(message(() => checkSatisfiable({ colour: 'red' }, nodes))).to.match(/unknown label "colour".*device, room/);
    expect(message(() => checkSatisfiable({ device: 'firetv' }, nodes))).to.match(/unknown label device=firetv.*appletv, roku/);
    expect(message(() => checkSatisfiable({ device: 'roku', room: 'lab2' }, nodes))).to.match(/no node has all of the labels device=roku,room=lab2/);
    expect(code(() => checkSatisfiable({ device: 'roku' }, new Map()))).to.equal('invalid_request');
  });

  it('orders by priority (highest first), then oldest, then id', () => {
    const jobs = [job(1, 10, 100, {}), job(2, 90, 300, {}), job(3, 90, 200, {}), job(4, 10, 100, {}), job(5, 100, 999, {})];
    expect(jobs.sort(compareWaiting).map((j) => j.queue_id)).to.deep.equal([5, 3, 2, 1, 4]);
  });

  it('plans: each job in order takes the first free node matching it; a job with no free match leaves nodes to later ones', () => {
    const free = [node('r2', { device: 'roku' }), node('r1', { device: 'roku' }), node('a1', { device: 'appletv' })];
    const waiting = [job(1, 50, 1, { device: 'roku' }), job(2, 90, 2, { device: 'firetv' }), job(3, 80, 3, { device: 'roku' }), job(4, 10, 4, { device: 'roku' }), job(5, 0, 5, { device: 'appletv' })];
    const plan = planAssignments(waiting, free).map((p) => [p.job.queue_id, p.node_id]);
    expect(plan).to.deep.equal([
      [3, 'r1'],
      [1, 'r2'],
      [5, 'a1'],
    ]);
    expect(planAssignments(waiting, [])).to.deep.equal([]);
  });

  it('says why a job waits: no node, all offline / in maintenance / unhealthy / busy, a mix, its position', () => {
    const sel = { device: 'roku' };
    const me = job(7, 50, 100, sel);
    const with_ = (...av: Availability['kind'][]) => av.map((kind, i) => node(`n${i}`, sel, { kind, detail: kind === 'available' ? null : 'x' }));
    expect(explainWait(me, [me], [node('x', { device: 'appletv' })])).to.include({ kind: 'no_node', matching: 0, message: 'no node has the labels device=roku' });
    expect(explainWait(me, [me], with_('offline', 'offline'))).to.include({ kind: 'offline', message: 'all 2 nodes with device=roku are offline' });
    expect(explainWait(me, [me], with_('maintenance', 'maintenance', 'maintenance'))).to.include({ kind: 'maintenance', matching: 3 });
    expect(explainWait(me, [me], with_('unhealthy'))).to.include({ kind: 'unhealthy', message: 'the one node with device=roku is unhealthy (its health check failed)' });
    const busy = explainWait(me, [me], with_('running', 'reserved', 'running'));
    expect(busy).to.include({ kind: 'busy', matching: 3 });
    expect(busy.message).to.equal('all 3 nodes with device=roku are busy (2 running a job, 1 reserved)');
    expect(busy.nodes).to.deep.equal({ running: 2, reserved: 1 });
    expect(explainWait(me, [me], with_('running', 'maintenance')).message).to.equal('none of the 2 nodes with device=roku is free: 1 running a job, 1 in maintenance');
    // Ahead: higher priority, or as high and older, for the same nodes; a job for other nodes does not count.
    const ahead = [job(1, 60, 500, sel), job(2, 50, 50, sel), job(3, 50, 200, sel), job(4, 100, 1, { device: 'appletv' }), job(5, 40, 1, sel)];
    const w = explainWait(me, [...ahead, me], [...with_('running'), node('a', { device: 'appletv' })]);
    expect(w.position).to.equal(3);
    expect(explainWait(me, [...ahead, me], with_('available'))).to.include({ kind: 'position', position: 3, message: 'position 3: 2 jobs ahead of it for the nodes with device=roku' });
  });
});
