/**
 * Crash soak: 50 SIGKILLs of the real CLI daemon at random moments during a
 * soak job, each followed by a restart and the full set of checks
 * (test/integration/crash-lib.ts). Prints one line per kill and a summary;
 * exits 1 if anything was lost or wrong.
 *
 *   node --import tsx bench/soak/crash.ts [kills=50]
 */
import { runCrashCycles } from '../../test/integration/crash-lib.js';

const kills = Number(process.argv[2] ?? 50);
const t0 = Date.now();
const report = await runCrashCycles(kills, (line) => console.log(line));
console.log(
  `crashes survived: ${report.kills - new Set(report.problems.map((p) => p.split(':')[0])).size}/${report.kills}; ` +
    `kills during a run: ${report.inFlightKills}; completed runs checked: ${report.completedRuns}; problems: ${report.problems.length}; ` +
    `${((Date.now() - t0) / 1000).toFixed(0)} s`,
);
for (const p of report.problems) console.log(`PROBLEM ${p}`);
process.exitCode = report.problems.length ? 1 : 0;
