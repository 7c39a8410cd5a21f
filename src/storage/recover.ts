/**
 * Recovery of the state file and of the latest job file from what else is on
 * disk, for when `state.json` or `jobs/<n>.json` is found torn or corrupt at
 * start-up (a bad disk, a hand edit, a copy cut short). Nothing here is
 * silent: the caller logs what was found and what was rebuilt, and the bad
 * file is kept beside the good one as `<name>.corrupt-<timestamp>`.
 *
 * The sources of truth, in order:
 * - `jobs/<n>.json`: the job numbers used so far, and (in each file's
 *   `job_uid`) the installation's hex digits;
 * - `results/<hex>/<n>/<stamp>/result.json`: the runs of every job, which
 *   also carry hex digits and job numbers (and survive when jobs/ does not).
 */
import { readdirSync, renameSync, statSync } from 'node:fs';
import path from 'node:path';
import type { JobRecord, ResultRecord } from '../core/model.js';
import { isHexDir, isNumberDir, isStampDir, parseJobUid } from '../core/ids.js';
import { checkRecord } from './results/record.js';
import { readRegularSync } from './safeFile.js';

/** What the disk says about the installation; undefined hex when nothing was ever run. */
export interface DiskIdentity {
  installation_hex: string | undefined;
  /** The largest job number found anywhere (0 when none). */
  max_job_number: number;
  /** Where each part came from, for the log. */
  evidence: { job_files: number; result_job_folders: number };
}

/** Move a bad file aside as `<file>.corrupt-<UTC timestamp>`; returns the new path. */
export function keepCorrupt(file: string, now: Date = new Date()): string {
  const stamp = now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
  let dest = `${file}.corrupt-${stamp}`;
  for (let i = 1; exists(dest); i++) dest = `${file}.corrupt-${stamp}-${i}`;
  renameSync(file, dest);
  return dest;
}

/** Scan `jobs/` and `results/` for the installation hex and the highest job number used. */
export function scanDiskIdentity(dataDir: string): DiskIdentity {
  const jobNumbers = listNames(path.join(dataDir, 'jobs'))
    .map((n) => /^(\d{1,15})\.json$/.exec(n)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number)
    .sort((a, b) => b - a);
  let hex: string | undefined;
  // The newest readable job file names the installation currently in use.
  for (const n of jobNumbers.slice(0, 20)) {
    const uid = readJson(path.join(dataDir, 'jobs', `${n}.json`))?.job_uid;
    hex = typeof uid === 'string' ? parseJobUid(uid)?.hex : undefined;
    if (hex) break;
  }
  const resultsDir = path.join(dataDir, 'results');
  let resultFolders = 0;
  let maxResultJob = 0;
  let newestHex: { hex: string; mtime: number } | undefined;
  for (const h of listNames(resultsDir).filter(isHexDir)) {
    const nums = listNames(path.join(resultsDir, h)).filter(isNumberDir).map(Number);
    resultFolders += nums.length;
    maxResultJob = Math.max(maxResultJob, ...nums);
    const mtime = statSync(path.join(resultsDir, h)).mtimeMs;
    if (!newestHex || mtime > newestHex.mtime) newestHex = { hex: h, mtime };
  }
  return {
    installation_hex: hex ?? newestHex?.hex,
    max_job_number: Math.max(jobNumbers[0] ?? 0, maxResultJob),
    evidence: { job_files: jobNumbers.length, result_job_folders: resultFolders },
  };
}

/** What rebuilding a job from its result folders found. */
export interface RebuiltJob {
  job: JobRecord;
  /** Completed runs found (with result.json). */
  results: number;
  /** A folder without result.json: the run that was in flight, left for JobService.recover to close. */
  inFlight: string | undefined;
}

/**
 * Rebuild job `number` of installation `hex` from its result folders. The
 * job is `exited`, unless a run folder without `result.json` exists: then
 * it is `running` with that run as `current_run`, so the normal restart
 * recovery records it as an error saying the daemon restarted.
 */
export function rebuildJob(dataDir: string, nodeId: string, hex: string, number: number, now: Date = new Date()): RebuiltJob {
  const jobUid = `/${nodeId}/${hex}/${number}`;
  const jobDir = path.join(dataDir, 'results', hex, String(number));
  const stamps = listNames(jobDir).filter(isStampDir).sort();
  const done: ResultRecord[] = [];
  let inFlight: string | undefined;
  for (const s of stamps) {
    const rec = checkRecord(readJson(path.join(jobDir, s, 'result.json')));
    if (typeof rec !== 'string' && rec.job_uid === jobUid) done.push(rec);
    else if (typeof rec === 'string') inFlight = s; // the last such folder wins: runs are sequential
  }
  const first = done[0];
  // total counts the run in flight too, as it did while the run was going (JobService.recover adds its error).
  const counts = { pass: 0, fail: 0, error: 0, total: done.length + (inFlight ? 1 : 0) };
  for (const r of done) counts[r.result]++;
  const inFlightName = inFlight ? readText(path.join(jobDir, inFlight, 'test-name')) : undefined;
  const startOf = (stamp: string) => `${stamp.slice(0, 10)}T${stamp.slice(11).replaceAll('.', ':')}.000Z`;
  const job: JobRecord = {
    job_uid: jobUid,
    number,
    status: inFlight ? 'running' : 'exited',
    start_time: first?.start_time ?? (inFlight ? startOf(inFlight) : now.toISOString()),
    end_time: inFlight ? null : now.toISOString(),
    result_counts: counts,
    test_cases: [...new Set([...done.map((r) => r.test_case), ...(inFlightName ? [inFlightName] : [])])],
    test_pack_revision: first?.test_pack_branch ?? first?.test_pack_sha ?? '',
    test_pack_sha: first?.test_pack_sha ?? '',
    test_pack_branch: first?.test_pack_branch ?? null,
    category: first?.category ?? 'default',
    soak: 'run once',
    shuffle: false,
    remote_control: null,
    tags: first?.tags ?? {},
    username: first?.username ?? '',
    current_run: inFlight
      ? { result_id: `${jobUid}/${inFlight}`, test_case: inFlightName ?? 'unknown', start_time: startOf(inFlight), pid: null }
      : null,
  };
  return { job, results: done.length, inFlight };
}

function listNames(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function readText(file: string): string | undefined {
  try {
    // A test may have left a FIFO under a result folder's names: never a blocking open at start-up.
    return readRegularSync(file, 64 << 20).trim() || undefined;
  } catch {
    return undefined;
  }
}

function readJson(file: string): Record<string, unknown> | undefined {
  const text = readText(file);
  try {
    const v: unknown = text === undefined ? undefined : JSON.parse(text);
    return typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function exists(file: string): boolean {
  try {
    statSync(file);
    return true;
  } catch {
    return false;
  }
}
