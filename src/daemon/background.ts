/**
 * What start-up does not wait for, or waits for only so long: the sweep of
 * what a crash left (in the background, so start-up time does not grow with
 * the history) and the first frame of capture (bounded).
 */
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { FrameSource, Logger, TidyReport } from '../core/ports.js';
import { FfmpegFrameSource } from '../hardware/capture/index.js';
import type { ReadinessChecks } from '../service/readiness.js';
import type { FileResultRepository } from '../storage/results/index.js';
import { sweepTemps, type TempSweepReport } from '../storage/sweep.js';

/** What the sweep after start found and removed. */
export type SweepReport = TidyReport & TempSweepReport;

/**
 * The background pass after start: every result folder (results.sweep), the
 * atomic temporaries of the data directory and the per-run temporary folders
 * a crash left, all older than this process. Never rejects; logs what it
 * did (`start-up sweep done`, info) once done.
 */
export async function sweepAfterStart(o: {
  results: FileResultRepository;
  dataDir: string;
  nodeId: string;
  keep: string[];
  prefixes: string[];
  logger: Logger;
}): Promise<SweepReport | undefined> {
  // The process's start: anything older is a previous daemon's (this one holds the data directory's lock).
  const before = Math.floor(performance.timeOrigin);
  const t0 = Date.now();
  try {
    const folders = await o.results.sweep({ nodeId: o.nodeId, keep: o.keep, before });
    const temps = await sweepTemps({ dirs: [o.dataDir, path.join(o.dataDir, 'jobs'), path.join(o.dataDir, 'results')], tmpDir: tmpdir(), prefixes: o.prefixes, before });
    const report = { ...folders, ...temps };
    if (temps.atomicTemps + temps.tempFolders > 0) o.logger.warn({ ...temps }, 'deleted the temporary files and folders a crash left');
    o.logger.info({ ...report, ms: Date.now() - t0 }, 'start-up sweep done');
    return report;
  } catch (e) {
    o.logger.error({ err: e }, 'start-up sweep failed (what a crash left stays until the next start)');
    return undefined;
  }
}

/**
 * Hold start-up until capture delivers its first frame, at most `secs`: a
 * run_tests sent the moment the daemon is up must not meet "offline: waiting
 * for the first frame". Past the bound the daemon starts anyway (offline;
 * the API, /readyz and the node status say why) rather than never.
 */
export async function waitForFirstFrame(frames: FrameSource, readiness: ReadinessChecks, secs: number, logger: Logger): Promise<void> {
  if (secs <= 0 || !(frames instanceof FfmpegFrameSource)) return;
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), secs * 1000)));
  try {
    if ((await Promise.race([frames.online(), late])) !== 'late') return;
  } finally {
    clearTimeout(timer);
  }
  logger.warn({ wait_secs: secs, reason: readiness.capture().detail }, `no frame within ${secs} s of start (capture.first_frame_wait_secs): starting anyway, offline`);
}
