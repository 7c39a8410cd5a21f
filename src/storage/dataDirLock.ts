/**
 * Exclusive locks on files of the data directory, with kernel lock semantics:
 * an open-file-description lock (`fcntl(F_OFD_SETLK)`, through
 * fs-native-extensions) is dropped by the kernel when its holder dies, even
 * by SIGKILL, so a lock left behind never blocks the next command. The lock
 * file itself stays (removing it would race with a process that has just
 * opened it); it only holds the holder's pid and purpose, for the message a
 * second instance prints.
 *
 * Node opens files close-on-exec, so the test processes, ffmpeg and git the
 * daemon starts never inherit the lock: a test process that outlives a
 * killed daemon does not keep the next one out.
 */
import { constants } from 'node:fs';
import { mkdir, open, readFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { tryLock } from 'fs-native-extensions';

/** The daemon's lock: one `farmhand serve` per data directory. */
export const dataDirLockFile = (dataDir: string): string => join(dataDir, '.farmhand.lock');

/** The lock is held by another live process. */
export class LockHeldError extends Error {
  override readonly name = 'LockHeldError';
  constructor(
    readonly file: string,
    /** The holder's pid as it wrote it, when it could be read. */
    readonly holderPid: number | undefined,
    readonly holderPurpose: string | undefined,
    message = `${file} is held by ${holderPurpose ?? 'another farmhand process'} (pid ${holderPid ?? 'unknown'})`,
  ) {
    super(message);
  }
}

export interface FileLock {
  readonly file: string;
  /** Drop the lock (idempotent). Dying drops it too. */
  release(): Promise<void>;
}

/**
 * Take the lock on `file` now, or throw LockHeldError. With `waitMs`, keep
 * trying that long first (for short-lived holders such as another `farmhand
 * token` command). `purpose` is written into the file for the holder message.
 */
export async function lockFile(file: string, purpose: string, opts: { waitMs?: number } = {}): Promise<FileLock> {
  const deadline = Date.now() + (opts.waitMs ?? 0);
  // O_NOFOLLOW: a symlink planted at the lock's name is refused, not followed.
  const fh = await open(file, constants.O_RDWR | constants.O_CREAT | constants.O_NOFOLLOW, 0o644);
  try {
    while (!tryLock(fh.fd)) {
      if (Date.now() >= deadline) {
        const { pid, purpose: held } = await readHolder(file);
        throw new LockHeldError(file, pid, held);
      }
      await sleep(20);
    }
    await fh.truncate(0);
    await fh.write(`${process.pid} ${purpose}\n`, 0);
  } catch (e) {
    await fh.close();
    throw e;
  }
  return lockOf(file, fh);
}

/** Lock a data directory for `farmhand serve` (creating the directory). */
export async function lockDataDir(dataDir: string): Promise<FileLock> {
  await mkdir(dataDir, { recursive: true });
  try {
    return await lockFile(dataDirLockFile(dataDir), 'farmhand serve');
  } catch (e) {
    if (e instanceof LockHeldError) {
      const who = `${e.holderPurpose ?? 'another farmhand'} (pid ${e.holderPid ?? 'unknown'})`;
      throw new LockHeldError(e.file, e.holderPid, e.holderPurpose, `data directory ${dataDir} is in use by ${who}; one daemon per data directory`);
    }
    throw e;
  }
}

function lockOf(file: string, fh: FileHandle): FileLock {
  let released: Promise<void> | undefined;
  // Closing the only descriptor of the open file description drops an OFD lock.
  return { file, release: () => (released ??= fh.close()) };
}

async function readHolder(file: string): Promise<{ pid?: number; purpose?: string }> {
  const text = await readFile(file, 'utf8').catch(() => '');
  const m = /^(\d+) ?(.*)$/m.exec(text.trim());
  return m ? { pid: Number(m[1]), purpose: m[2] || undefined } : {};
}
