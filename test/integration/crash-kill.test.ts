/**
 * Crash: the real CLI daemon is SIGKILLed at random moments during a soak
 * job of short pass/fail/error/many-files tests (retention keeping only a few
 * results, so kills also land while it deletes) and restarted, 6 times (two of the kills aimed at retention) (50 in
 * `bench/soak/crash.ts`). The checks after each restart are in crash-lib.ts.
 */
import { expect } from 'chai';
import { runCrashCycles } from './crash-lib.js';

describe('crash: SIGKILL at random moments during runs, then restart', function () {
  this.timeout(300_000);

  it('after every restart: every job exited, every listed result has all its files (the interrupted one too), no temporary file listed, no folder on disk that is not a listed result, the trash emptied', async () => {
    const report = await runCrashCycles(6);
    expect(report.problems).to.deep.equal([]);
    expect(report.kills).to.equal(6);
    expect(report.orphans, 'folders left behind').to.equal(0);
    expect(report.missingFiles, 'files missing from listed results').to.equal(0);
    expect(report.completedRuns, 'runs completed between the kills').to.be.greaterThan(4);
  });
});
