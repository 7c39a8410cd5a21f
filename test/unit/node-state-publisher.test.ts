/**
 * The node's state as an internal event of its stream (src/farm/link/nodeState.ts; docs/farm.md, "The node's
 * state"): published on the node's event hub when it changes, coalesced so that the journal does not grow per use of
 * the node (a live view's every frame changes last_used_time), not served as a public event, and not published again
 * by a restart that finds the same state in the journal.
 */
import { expect } from 'chai';
import { EventHub } from '../../src/core/events.js';
import type { Availability } from '../../src/core/availability.js';
import { NodeStatePublisher } from '../../src/farm/link/nodeState.js';
import { capturingLogger } from '../helpers/logger.js';
import { waitFor } from '../helpers/wait.js';

const HOUR = 3_600_000;

describe("the node's state, published as node.state (farm link)", () => {
  let uses = 0;
  let availability: Availability = { kind: 'available', detail: null };
  const state = () => Promise.resolve({ snapshot: { node_id: 'n1', last_used_by: 'alice', last_used_time: `2026-11-26T00:00:${String(uses++ % 60).padStart(2, '0')}.000Z` }, availability });
  const publisher = (events: EventHub) => new NodeStatePublisher({ state, logger: capturingLogger(), events, debounceMs: 1, usageMs: HOUR, refreshMs: HOUR });
  const states = (hub: EventHub) => hub.buffered({ internal: true }).filter((e) => e.type === 'node.state');

  it('one event per change of what matters; 50 uses (last_used_time alone) add none; internal: not a public event', async () => {
    const hub = new EventHub({ nodeId: 'n1' });
    const p = publisher(hub);
    const seen: string[] = [];
    hub.subscribe((e) => seen.push(e.type));
    p.start();
    try {
      await waitFor(() => p.published === 1, 'the first state');
      for (let i = 1; i <= 50; i++) {
        const reads = p.reads;
        p.schedule();
        await waitFor(() => p.reads > reads, 'the state read again');
      }
      expect(states(hub)).to.have.length(1, 'no event for a use alone (the journal does not grow per frame)');
      availability = { kind: 'unhealthy', detail: 'health check failed: no signal' };
      p.schedule();
      await waitFor(() => p.published === 2, 'the changed availability published');
      expect(states(hub).map((e) => (e.data as { availability: Availability }).availability.kind)).to.deep.equal(['available', 'unhealthy']);
      // Not a public event: neither a public subscriber nor a public resume sees it.
      expect(seen).to.deep.equal([]);
      expect(hub.buffered()).to.deep.equal([]);
      expect(hub.since(states(hub)[0]!.id).events).to.deep.equal([]);
    } finally {
      p.stop();
    }
  });

  it('a restart that finds the same state in the journal publishes nothing; a different one is published', async () => {
    availability = { kind: 'available', detail: null };
    const before = new EventHub({ nodeId: 'n1' });
    const p1 = publisher(before);
    p1.start();
    await waitFor(() => p1.published === 1, 'the first state');
    p1.stop();
    // The next run's hub, filled from the journal (its history).
    const after = new EventHub({ nodeId: 'n1', history: before.buffered({ internal: true }) });
    const p2 = publisher(after);
    p2.start();
    try {
      await waitFor(() => p2.reads >= 1, 'the state read at start');
      expect(p2.published).to.equal(0);
      availability = { kind: 'licence_expired', detail: '2020-01-01' };
      p2.schedule();
      await waitFor(() => p2.published === 1, 'the changed state published');
    } finally {
      p2.stop();
    }
  });
});
