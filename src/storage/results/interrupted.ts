/**
 * Closing a run the daemon's death interrupted: the runner writes a run's
 * metadata files and logs as it goes and at its end, so a run cut short by a
 * SIGKILL lacks some of them. At recovery each missing one is written (never
 * replacing what is there: created with O_EXCL, which also refuses a symlink
 * or a FIFO the test left under that name), so every recorded run has the
 * same set of files whatever its outcome.
 */
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { join } from 'node:path';

export interface InterruptedRun {
  test_case: string;
  test_pack_sha: string;
  /** Seconds from the run's start to the recovery. */
  duration: number;
  failure_reason: string;
  /** The line for the logs; default: the daemon stopped while the test was running. */
  note?: string;
}

/** The runner's files (metadata and logs), as an interrupted run gets them. */
export function interruptedFiles(run: InterruptedRun): Record<string, string> {
  const note = `${run.note ?? `farmhand: the daemon stopped while this test was running; ${run.failure_reason}`}\n`;
  return {
    'test-name': `${run.test_case}\n`,
    'test-args': '',
    'git-commit': `${run.test_pack_sha}\n`,
    duration: `${run.duration.toFixed(3)}\n`,
    'exit-status': '',
    'failure-reason': `${run.failure_reason}\n`,
    'stdout.log': '',
    'stderr.log': '',
    'combined.log': note,
    'farmhand.log': note,
  };
}

/**
 * Add text to the end of an existing regular file (never creating one, never
 * through a symlink, never blocking on a FIFO the test left there).
 */
export async function appendExisting(file: string, text: string): Promise<boolean> {
  let fh;
  try {
    fh = await open(file, constants.O_WRONLY | constants.O_APPEND | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch (e) {
    if (['ENOENT', 'ELOOP', 'ENXIO'].includes((e as NodeJS.ErrnoException).code ?? '')) return false;
    throw e;
  }
  try {
    const st = await fh.stat();
    // A hard link (a test gave an outside file the log's name): never appended to.
    if (!st.isFile() || st.nlink > 1) return false;
    await fh.writeFile(text);
    return true;
  } finally {
    await fh.close();
  }
}

/** Write each file of `files` that `dir` lacks; returns the names written. */
export async function writeMissing(dir: string, files: Record<string, string>): Promise<string[]> {
  const written: string[] = [];
  for (const [name, text] of Object.entries(files)) {
    let fh;
    try {
      fh = await open(join(dir, name), constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw e;
    }
    try {
      await fh.writeFile(text);
    } finally {
      await fh.close();
    }
    written.push(name);
  }
  return written;
}
