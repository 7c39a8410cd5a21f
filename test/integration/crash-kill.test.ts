/**
 * Crash: the real CLI daemon is SIGKILLed at random moments during a soak
 * job of short pass/fail/error tests and restarted, 8 times (50 in
 * `bench/soak/crash.ts`). The checks after each restart are in crash-lib.ts.
 */
import { expect } from 'chai';
import { runCrashCycles } from './crash-lib.js';

describe('crash: SIGKILL at random moments during runs, then restart', function () {
  this.timeout(180_000);

  it('after every restart: state.json parses, every job is exited, every completed run is listed with all its files, the in-flight run is an error saying the daemon restarted, token and reservation intact', async () => {
    const report = await runCrashCycles(8);
    expect(report.problems).to.deep.equal([]);
    expect(report.kills).to.equal(8);
    expect(report.completedRuns, 'runs completed between the kills').to.be.greaterThan(4);
  });
});
