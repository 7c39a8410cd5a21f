/**
 * The portal's inbox of a node's events is bounded (docs/farm.md, "The portal's inbox"), with real parts: a throwaway
 * PostgreSQL stopped under a running portal and a real node joined to it. While the database is away the node's events
 * wait to be folded; past `max_node_inbox_events` the portal takes no more of them (the node keeps them in its
 * journal) instead of holding them in memory. Once the database is back, what it held is folded, it asks the node to
 * send the rest again, and every event is in the outbox once, in the node's order.
 */
import { expect } from 'chai';
import type { TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'inbox-node';
const BOUND = 20;
const SENT = 150;
const WAIT = { timeoutMs: 120_000 };

describe("farm: the portal's inbox of a node's events is bounded while PostgreSQL is away", function () {
  this.timeout(300_000);
  let cluster: TestPostgres;
  let farm: TestFarm;
  let node: TestDaemon;

  before(async function () {
    this.timeout(120_000);
    cluster = await startPostgres();
    farm = await startTestFarm({ cluster, portal: { heartbeat_secs: 2, flush_secs: 1, max_node_inbox_events: BOUND } });
    node = await farm.addNode(NODE);
  });
  after(async () => {
    await cluster?.startServer().catch(() => undefined);
    await farm?.stop();
    await cluster?.stop();
  });

  it('holds at most the bound, the node keeps the rest; once the database is back every event is folded once, in order', async () => {
    const hub = node.daemon.services.events!.hub;
    const stats = farm.portal.hub.stats as { eventsDeferred?: number; inboxPeak?: number };
    await farm.portal.hub.idle();
    // On /metrics of the portal (through replicas: of r1, which holds the node) the counters start where the hub has them.
    const metrics = async () => {
      const text = await (await fetch(`${farm.replicas?.portals[0]!.url ?? farm.url}/metrics`)).text();
      const of = (name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
      return { deferred: of('farmhand_portal_node_events_deferred_total'), peak: of('farmhand_portal_node_inbox_peak_events') };
    };
    const before = await metrics();
    expect(before.deferred).to.equal(stats.eventsDeferred);
    expect(before.peak).to.equal(stats.inboxPeak);
    await cluster.stopServer('fast');
    const first = hub.published + 1;
    for (let i = 1; i <= SENT; i++) hub.publish('key.pressed', { key: 'KEY_OK', remote: 'vstb', hold_ms: 0, source: 'api', username: `press-${i}`, result_id: null });
    const ids = hub.buffered().filter((e) => e.type === 'key.pressed').map((e) => e.id).slice(-SENT);
    expect(ids[0]).to.equal(`${hub.boot}-${first}`);
    // The portal took what it holds and no more: the others are not held anywhere but in the node's journal.
    await waitFor(() => (stats.eventsDeferred ?? 0) >= SENT - BOUND, { what: 'the portal to refuse the events past its bound', ...WAIT });
    expect(stats.inboxPeak).to.be.at.most(BOUND);
    expect(farm.portal.hub.link(NODE)?.online).to.equal(true, 'still connected: its heartbeats and forwards go on');

    await cluster.startServer();
    const folded = async () =>
      (await farm.db.query<{ node_event_id: string }>(`SELECT node_event_id FROM events_outbox WHERE node_id = $1 AND type = 'key.pressed' ORDER BY seq`, [NODE])).rows.map(
        (r) => r.node_event_id,
      );
    await waitFor(async () => (await folded()).includes(ids.at(-1)!), { what: 'the last press folded', ...WAIT });
    expect((await folded()).slice(-SENT)).to.deep.equal(ids);
    await waitFor(() => node.daemon.portalLink?.lastAcked === hub.buffered({ internal: true }).at(-1)!.id, { what: 'the node acknowledged to its last event', ...WAIT });
    expect(stats.inboxPeak).to.be.at.most(BOUND);
    // ... and moved with them: the events refused past the bound, the inbox filled to it.
    const after = await metrics();
    expect(after.deferred).to.be.at.least(before.deferred + SENT - BOUND);
    expect(after.peak).to.be.above(before.peak).and.at.most(BOUND);
  });
});
