/**
 * One list of resources for a failed start and for a stop (src/service/resources.ts, src/daemon.ts).
 *
 * Regression (issue 31): a start that failed after recovery released the data-directory lock without closing
 * `state` and the job store (the failure's undo list and the stop's list were kept by hand and had drifted), so a
 * next daemon could take the directory while their writes were still landing. Here the start is failed at a step
 * after recovery through `StartOptions.onResource`, and every close is recorded as the stack tells it.
 */
import { expect } from 'chai';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, StartupError, type StartOptions } from '../../src/daemon.js';
import { silentLogger } from '../../src/logger.js';
import type { ResourceEvent } from '../../src/service/resources.js';
import { lockDataDir } from '../../src/storage/dataDirLock.js';
import type { FileJobRepository } from '../../src/storage/jobStore.js';
import type { StateStore } from '../../src/storage/state.js';
import { jobRecord } from '../fixtures/records.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { testConfig } from '../helpers/daemon.js';
import { fullLaneOnly } from '../helpers/lane.js';

const LOCK = 'data-directory lock';
/** The resources that write into the data directory: each must be closed, its writes landed, before the lock goes. */
const WRITERS = ['state', 'job store', 'results', 'event journal', 'audit log', 'audit sessions'];

/**
 * Records the stack's events; fails the start when `failAt` has opened, with a state write under way. When the lock's
 * close begins, `atLockClose` says whether that write had landed and whether the state and the job store refuse more.
 */
function recorder(failAt?: string) {
  const events: ResourceEvent[] = [];
  const values = new Map<string, unknown>();
  const atLockClose: { writeLanded?: boolean; stateRefuses?: Promise<boolean>; jobsRefuse?: Promise<boolean> } = {};
  let landed = false;
  const refuses = (p: () => Promise<unknown>) => p().then(() => false, (e: Error) => /closed/.test(e.message));
  const onResource: StartOptions['onResource'] = (e) => {
    events.push(e);
    if (e.type === 'opened') values.set(e.name, e.value);
    if (e.type === 'closing' && e.name === LOCK) {
      atLockClose.writeLanded = landed;
      atLockClose.stateRefuses = refuses(() => (values.get('state') as StateStore).update(() => undefined));
      atLockClose.jobsRefuse = refuses(() => (values.get('job store') as FileJobRepository).save(jobRecord({ number: 999_999 })));
    }
    if (e.type === 'opened' && e.name === failAt) {
      void (values.get('state') as StateStore).update(() => undefined).then(() => (landed = true));
      throw new Error(`injected failure after ${failAt}`);
    }
  };
  return {
    events,
    atLockClose,
    onResource,
    opened: () => events.filter((e) => e.type === 'opened').map((e) => e.name),
    closed: () => events.filter((e) => e.type === 'closed').map((e) => e.name),
  };
}

describe('daemon start and stop: one stack of resources', function () {
  this.timeout(60_000);
  let pack: TestPackRepo;
  let dataDir: string;

  before(async () => {
    fullLaneOnly('a whole daemon (startDaemon)');
    pack = await makeTestPack({ 'tests/t.py': 'def test_pass():\n    pass\n' });
  });
  beforeEach(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-rollback-'));
  });

  for (const failAt of ['running job', 'requests']) {
    it(`a start failing after recovery (at "${failAt}") closes every write, then releases the lock`, async () => {
      const rec = recorder(failAt);
      const err = await startDaemon(testConfig(pack.dir, dataDir), silentLogger, rec).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(StartupError);
      expect((err as Error).message).to.contain(`injected failure after ${failAt}`);
      const opened = rec.opened();
      expect(opened[0]).to.equal(LOCK);
      expect(opened).to.include.members([...WRITERS, 'running job']);
      // Everything opened is closed, last opened first, each close ended before the next began; the lock last.
      expect(rec.closed()).to.deep.equal([...opened].reverse());
      expect(rec.events.filter((e) => e.type === 'close-failed')).to.deep.equal([]);
      const closes = rec.events.filter((e) => e.type === 'closing' || e.type === 'closed');
      for (let i = 0; i < closes.length; i += 2) expect([closes[i]!.type, closes[i + 1]?.type, closes[i + 1]?.name]).to.deep.equal(['closing', 'closed', closes[i]!.name]);
      const lockClosing = rec.events.findIndex((e) => e.type === 'closing' && e.name === LOCK);
      for (const w of WRITERS) expect(rec.events.findIndex((e) => e.type === 'closed' && e.name === w), w).to.be.within(0, lockClosing);
      // And closed for real: the write under way at the failure had landed, and both stores refuse more.
      expect(rec.atLockClose.writeLanded).to.equal(true);
      expect(await rec.atLockClose.stateRefuses).to.equal(true);
      expect(await rec.atLockClose.jobsRefuse).to.equal(true);
      // Released: another daemon can take the directory at once.
      const lock = await lockDataDir(dataDir);
      await lock.release();
    });
  }

  it('a stop closes the same list in reverse, and a daemon starts again on the directory', async () => {
    const rec = recorder();
    const daemon = await startDaemon(testConfig(pack.dir, dataDir), silentLogger, rec);
    const opened = rec.opened();
    expect(opened.at(-1)).to.equal('requests');
    await daemon.stop();
    expect(rec.closed()).to.deep.equal([...opened].reverse());
    await daemon.stop(); // again: the same, nothing closed twice
    expect(rec.closed()).to.have.length(opened.length);
    const again = await startDaemon(testConfig(pack.dir, dataDir), silentLogger);
    await again.stop();
  });
});
