/**
 * Rebuilding the index from the result folders when `index.jsonl` is lost:
 * walk `<hex>/<n>/<stamp>/result.json` and keep each record whose id maps
 * back to the folder it was found in. Folders without `result.json` are runs
 * that never finished (or are finishing now): not results, so not indexed.
 */
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { ResultRecord } from '../../core/model.js';
import { isHexDir, isNumberDir, isStampDir, parseResultId } from '../../core/ids.js';
import { checkRecord } from './record.js';
import { RECORD_FILE } from './artifacts.js';
import { readRegular } from '../safeFile.js';

/** Files read at once: enough to hide latency, few enough for a 2-core box. */
const PARALLEL = 32;

export interface ScanReport {
  records: number;
  /** Folders whose `result.json` was unreadable or did not match the folder. */
  bad: Array<{ dir: string; why: string }>;
}

/** Hand every good record to `onRecord` (as it is read, so none pile up); report the rest. */
export async function scanFolders(root: string, onRecord: (r: ResultRecord) => Promise<void> | void): Promise<ScanReport> {
  const dirs: string[] = [];
  for (const hex of await subdirs(root, isHexDir)) {
    for (const num of await subdirs(join(root, hex), isNumberDir)) {
      for (const stamp of await subdirs(join(root, hex, num), isStampDir)) dirs.push(`${hex}/${num}/${stamp}`);
    }
  }
  const report: ScanReport = { records: 0, bad: [] };
  for (let i = 0; i < dirs.length; i += PARALLEL) {
    await Promise.all(dirs.slice(i, i + PARALLEL).map((d) => readOne(root, d, report, onRecord)));
  }
  return report;
}

async function readOne(root: string, relDir: string, report: ScanReport, onRecord: (r: ResultRecord) => Promise<void> | void): Promise<void> {
  let text: string;
  try {
    // Regular files only: a test may have put a FIFO there in a folder whose run never ended.
    text = await readRegular(join(root, relDir, RECORD_FILE), 16 << 20);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') report.bad.push({ dir: relDir, why: String(e) });
    return;
  }
  let rec: ResultRecord | string;
  try {
    rec = checkRecord(JSON.parse(text));
  } catch (e) {
    rec = `not JSON: ${String(e)}`;
  }
  if (typeof rec === 'string') {
    report.bad.push({ dir: relDir, why: rec });
  } else if (parseResultId(rec.result_id)?.relDir !== relDir) {
    report.bad.push({ dir: relDir, why: `result_id ${rec.result_id} does not belong to this folder` });
  } else {
    report.records++;
    await onRecord(rec);
  }
}

/** The sub-folders of `dir` whose names `accept` takes; none when `dir` cannot be read. */
export async function subdirs(dir: string, accept: (name: string) => boolean): Promise<string[]> {
  try {
    const entries = await readdir(dir, { withFileTypes: true });
    return entries.filter((e) => e.isDirectory() && accept(e.name)).map((e) => e.name);
  } catch {
    return [];
  }
}
