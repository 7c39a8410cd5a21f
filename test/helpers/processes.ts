/** Process checks for tests that must leave nothing running. */
import { readdirSync, readFileSync } from 'node:fs';

/**
 * Whether a process runs: it exists and is no zombie (a zombie has ended and only waits to be
 * reaped; reaping orphans is init's job, and a container's init may not do it).
 */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return !/^[ZX]/.test(stat.slice(stat.lastIndexOf(')') + 2));
  } catch {
    return false; // gone between the two checks
  }
}

/** The pids of the live processes whose command line contains `needle` (e.g. a test's temporary folder). */
export function processesWith(needle: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    let cmd: string;
    try {
      cmd = readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ');
    } catch {
      continue;
    }
    if (cmd.includes(needle) && isAlive(pid)) pids.push(pid);
  }
  return pids;
}

/** The live ffmpeg processes whose command line contains `needle`: none must be left after a test. */
export function ffmpegChildren(needle: string): number[] {
  return processesWith(needle).filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0')[0]!.endsWith('ffmpeg');
    } catch {
      return false;
    }
  });
}

