/**
 * What a crash leaves outside the result folders, swept in the background
 * after start (the results store sweeps its own folders):
 * - atomic-write temporaries (`.<name>.<pid>.<hex>.tmp`, see atomic.ts) in
 *   the data directory, `jobs/` and `results/`;
 * - the per-run temporary folders of the runner and of the control socket
 *   (`<tmp>/farmhand-run-<tag>-XXXXXX`, `<tmp>/farmhand-ctl-<tag>-XXXXXX`),
 *   which a run removes at its end and a crash does not.
 *
 * Only what is not in use goes: everything kept was last changed after
 * `before` (the daemon's start); an atomic temporary of a process still
 * alive (another than this one: a `farmhand token` command writing
 * tokens.json) stays too. The temporary folders carry a tag made from the
 * data directory's path, so daemons of other data directories on the same
 * machine (whose runs may be live) never have theirs swept; folders without
 * a tag (older versions) are left alone, since their owner is unknown.
 */
import { createHash } from 'node:crypto';
import { lstat, readdir, rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';

/** `.<name>.<pid>.<8 hex>.tmp`, as writeFileAtomic names its temporaries. */
const ATOMIC_TEMP = /^\..+\.(\d{1,10})\.[0-9a-f]{8}\.tmp$/;

/** The tag of a data directory in the names of its daemon's temporary folders (8 hex digits). */
export function tempTag(dataDir: string): string {
  return createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 8);
}

/** The prefixes (for mkdtemp) of the runner's and the control socket's per-run folders of a data directory. */
export function runTempPrefixes(dataDir: string): { run: string; control: string } {
  const tag = tempTag(dataDir);
  return { run: `farmhand-run-${tag}-`, control: `farmhand-ctl-${tag}-` };
}

export interface TempSweepReport {
  /** Atomic-write temporaries deleted. */
  atomicTemps: number;
  /** Per-run temporary folders deleted. */
  tempFolders: number;
}

/**
 * Delete the atomic temporaries in `dirs` and the folders in `tmpDir` named
 * with one of `prefixes`, each only when last changed before `before`
 * (ms since the epoch) and not in use.
 */
export async function sweepTemps(opts: { dirs: readonly string[]; tmpDir: string; prefixes: readonly string[]; before: number }): Promise<TempSweepReport> {
  const report: TempSweepReport = { atomicTemps: 0, tempFolders: 0 };
  for (const dir of opts.dirs) {
    for (const name of await names(dir)) {
      const m = ATOMIC_TEMP.exec(name);
      if (!m) continue;
      const pid = Number(m[1]);
      if (pid !== process.pid && alive(pid)) continue;
      if (await removeIfOld(join(dir, name), opts.before, 'file')) report.atomicTemps++;
    }
  }
  const uid = process.getuid?.();
  for (const name of await names(opts.tmpDir)) {
    if (!opts.prefixes.some((p) => name.startsWith(p) && name.length > p.length)) continue;
    if (await removeIfOld(join(opts.tmpDir, name), opts.before, 'dir', uid)) report.tempFolders++;
  }
  return report;
}

async function names(dir: string): Promise<string[]> {
  try {
    return await readdir(dir);
  } catch {
    return [];
  }
}

/** Remove `path` when it is a `kind` (never through a symlink), ours, and unchanged since before `before`. */
async function removeIfOld(path: string, before: number, kind: 'file' | 'dir', uid?: number): Promise<boolean> {
  const st = await lstat(path).catch(() => undefined);
  if (!st || (kind === 'file' ? !st.isFile() : !st.isDirectory())) return false;
  if (uid !== undefined && st.uid !== uid) return false;
  if (st.mtimeMs >= before) return false;
  await rm(path, { recursive: kind === 'dir', force: true });
  return true;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
