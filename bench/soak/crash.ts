/**
 * Crash soak: SIGKILLs of the real CLI daemon at random moments during a soak
 * job (kills land in runs, at folder creation, while recording and during
 * retention, which keeps only a few results), each followed by a restart and
 * the full set of checks (test/integration/crash-lib.ts): every listed
 * result's files, every folder on disk. Prints one line per kill and the
 * figures; exits 1 if anything was lost, missing or left behind.
 *
 *   node --import tsx bench/soak/crash.ts [kills=50]
 */
import { runCrashCycles } from '../../test/integration/crash-lib.js';

const kills = Number(process.argv[2] ?? 50);
const t0 = Date.now();
const report = await runCrashCycles(kills, (line) => console.log(line));
console.log(
  `kills: ${report.kills} (during a run: ${report.inFlightKills}; leaving folders to reclaim: ${report.reclaimKills}); ` +
    `completed runs: ${report.completedRuns}; results checked: ${report.resultsChecked}; ` +
    `orphans: ${report.orphans}; missing files: ${report.missingFiles}; bytes reclaimed: ${report.bytesReclaimed} ` +
    `(${(report.bytesReclaimed / 2 ** 20).toFixed(1)} MiB); problems: ${report.problems.length}; ${((Date.now() - t0) / 1000).toFixed(0)} s`,
);
for (const p of report.problems) console.log(`PROBLEM ${p}`);
process.exitCode = report.problems.length ? 1 : 0;
