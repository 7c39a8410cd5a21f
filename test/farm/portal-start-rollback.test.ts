/**
 * The portal's resources and the farm's are one stack (src/service/resources.ts, src/farm/portal/portal.ts and
 * farm.ts): a start that fails half-way closes what had opened in reverse, each close ended before the next, the
 * pool after everything that uses it and the portal lock last, so the next portal on the database starts at once;
 * a stop closes the same list. Before, the failure's list and the stop's were kept by hand (and the farm's parts
 * were closed by a third), and differed.
 */
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { parsePortalConfig, type PortalConfigInput } from '../../src/farm/portal/config.js';
import { startFarmPortal } from '../../src/farm/portal/farm.js';
import { silentLogger } from '../../src/logger.js';
import type { ResourceEvent } from '../../src/service/resources.js';
import { connectionString } from '../helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';

const LOCK = 'portal lock';
const POOL = 'database pool';
/** What reads or writes the database: each closed before the pool ends. */
const DATABASE_USERS = ['hub', 'outbox log', 'reservations', 'outbox listener', 'webhooks', 'audit log', 'sessions', 'wake-ups'];

function recorder(failAt?: string) {
  const events: ResourceEvent[] = [];
  return {
    events,
    opened: () => events.filter((e) => e.type === 'opened').map((e) => e.name),
    closed: () => events.filter((e) => e.type === 'closed').map((e) => e.name),
    onResource: (e: ResourceEvent) => {
      events.push(e);
      if (e.type === 'opened' && e.name === failAt) throw new Error(`injected failure after ${failAt}`);
    },
  };
}

describe('portal start and stop: one stack of resources', function () {
  this.timeout(60_000);
  let cluster: TestPostgres;
  let config: () => ReturnType<typeof parsePortalConfig>;

  before(async function () {
    cluster = await startPostgres();
    const storage = await mkdtemp(path.join(os.tmpdir(), 'farmhand-portal-rollback-'));
    const input = { listen: '127.0.0.1:0', database: connectionString(cluster), storage_dir: storage, log_level: 'silent' } as PortalConfigInput;
    config = () => parsePortalConfig(input);
  });
  after(async () => {
    await cluster?.stop();
  });

  for (const failAt of ['hub', 'retention']) {
    it(`a start failing at "${failAt}" closes everything in reverse, the pool after its users, the lock last`, async () => {
      const rec = recorder(failAt);
      const err = await startFarmPortal(config(), silentLogger, { onResource: rec.onResource }).then(
        () => undefined,
        (e: Error) => e.message,
      );
      expect(err).to.equal(`injected failure after ${failAt}`);
      const opened = rec.opened();
      expect(opened[0]).to.equal(LOCK);
      expect(rec.closed()).to.deep.equal([...opened].reverse());
      expect(rec.events.filter((e) => e.type === 'close-failed')).to.deep.equal([]);
      const closedAt = (name: string) => rec.closed().indexOf(name);
      for (const user of DATABASE_USERS) expect(closedAt(user), user).to.be.within(0, closedAt(POOL) - 1);
      // The lock is free: the next portal on this database starts (a held lock is a PortalLockHeld).
      const next = await startFarmPortal(config(), silentLogger);
      await next.stop();
    });
  }

  it('a stop closes the same list in reverse: the requests under way first, the hub before the outbox, the lock last', async () => {
    const rec = recorder();
    const portal = await startFarmPortal(config(), silentLogger, { onResource: rec.onResource });
    const opened = rec.opened();
    await portal.stop();
    const closed = rec.closed();
    expect(closed).to.deep.equal([...opened].reverse());
    expect(closed.indexOf('requests under way')).to.be.below(closed.indexOf('hub'));
    expect(closed.indexOf('hub')).to.be.below(closed.indexOf('outbox log'));
    expect(closed.at(-1)).to.equal(LOCK);
  });
});
