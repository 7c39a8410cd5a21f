/**
 * Crash: the real CLI daemon is SIGKILLed during a soak job of short pass/fail/error/many-files tests
 * (retention keeping only a few results) and restarted, 3 times, each kill aimed at one moment: while a
 * test process runs, while retention deletes, and the moment a run folder is created. The 50 kills at
 * random moments are `npm run soak` (bench/soak/crash.ts). The checks after each restart are in crash-lib.ts.
 */
import { expect } from 'chai';
import { runCrashCycles } from './crash-lib.js';

describe('crash: SIGKILL mid-run, during retention and at folder creation, then restart', function () {
  this.timeout(300_000);

  it('after every restart: every job exited, every listed result has all its files (the interrupted one too), no temporary file listed, no folder on disk that is not a listed result, the trash emptied', async () => {
    const lines: string[] = [];
    const report = await runCrashCycles(3, (line) => lines.push(line), ['mid-run', 'retention', 'folder']);
    expect(report.problems).to.deep.equal([]);
    expect(report.kills).to.equal(3);
    expect(report.inFlightKills, `the mid-run kill hit a run in flight:\n${lines.join('\n')}`).to.be.at.least(1);
    expect(report.orphans, 'folders left behind').to.equal(0);
    expect(report.missingFiles, 'files missing from listed results').to.equal(0);
    expect(report.resultsChecked, 'listed results checked').to.be.greaterThan(0);
  });
});
