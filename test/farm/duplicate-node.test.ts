/**
 * Two nodes with the same node id and credential (a copied config): the
 * newest connection wins, and the replaced node stops reconnecting, saying
 * why, instead of the two taking the id from each other forever (flapping).
 * Real portal, real PostgreSQL, two real in-process `farmhand serve` daemons.
 */
import { expect } from 'chai';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { capturingLogger } from '../helpers/logger.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'farmhand-twin';

describe('farm fault: two nodes with the same node id', function () {
  this.timeout(120_000);
  let farm: TestFarm;
  let twin: TestDaemon | undefined;

  before(async () => {
    farm = await startTestFarm();
  });
  after(async () => {
    await twin?.stop();
    await farm?.stop();
  });

  it('the newer connection replaces the older; the replaced node stops reconnecting and says why (no flapping)', async () => {
    const first = await farm.addNode(NODE);
    const firstLink = first.daemon.portalLink!;
    const logger = capturingLogger();
    twin = await startTestDaemon({ pack: first.pack, config: { node_id: NODE, portal: first.config.portal! }, logger });
    const twinLink = twin.daemon.portalLink!;
    await waitFor(() => twinLink.connected, { what: 'the second node connected', timeoutMs: 30_000 });
    await waitFor(() => firstLink.replaced, { what: 'the first node told it was replaced', timeoutMs: 30_000 });
    expect(firstLink.connected).to.equal(false);
    const welcomes = { first: firstLink.connections, twin: twinLink.connections };
    // Long enough for several reconnects of a flapping pair (the back-off starts at 500 ms): the twin keeps
    // the id, the first never comes back. Waited on the twin's heartbeats reaching the portal, not a sleep.
    const since = farm.portal.hub.link(NODE)!.lastSeen!.getTime();
    await waitFor(() => (farm.portal.hub.link(NODE)?.lastSeen?.getTime() ?? 0) > since + 5000, { what: 'five seconds of heartbeats', timeoutMs: 30_000 });
    expect(firstLink.connections).to.equal(welcomes.first);
    expect(twinLink.connections).to.equal(welcomes.twin);
    expect(twinLink.connected).to.equal(true);
    expect(farm.portal.hub.link(NODE)).to.deep.include({ online: true });
    expect(twinLink.replaced).to.equal(undefined);
    // The portal never saw it go offline.
    const { rows } = await farm.db.query<{ n: string }>(`SELECT count(*) AS n FROM events_outbox WHERE type = 'node.offline' AND node_id = $1`, [NODE]);
    expect(rows[0]!.n).to.equal('0');
  });
});
