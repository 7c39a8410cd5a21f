/**
 * How much CPU a process has used, from Linux's `/proc/<pid>/stat`: the capture's watchdog tells an ffmpeg that is
 * working but starved of CPU on a loaded machine (its CPU time grows, its frames are late) from one that is stuck
 * (blocked on a card or a stream that delivers nothing: its CPU time stands still). docs/capture.md, "Stalls".
 */
import { readFileSync } from 'node:fs';

/** Clock ticks a second of `/proc/<pid>/stat`'s times (USER_HZ: 100 on every Linux architecture farmhand runs on). */
export const CLOCK_TICKS_PER_SEC = 100;

/**
 * User plus system CPU time of the whole process (all its threads), in clock ticks, from the text of
 * `/proc/<pid>/stat`; undefined when the text is not one. The command name (field 2) may hold spaces and
 * parentheses, so the fields are counted from the last `)`.
 */
export function parseCpuTicks(stat: string): number | undefined {
  const end = stat.lastIndexOf(')');
  if (end < 0) return undefined;
  // After ")": state (field 3), then ppid ... utime is field 14, stime field 15.
  const fields = stat.slice(end + 2).split(' ');
  const utime = Number(fields[11]);
  const stime = Number(fields[12]);
  return Number.isSafeInteger(utime) && Number.isSafeInteger(stime) ? utime + stime : undefined;
}

/** The process's CPU time in clock ticks, or undefined when it cannot be read (gone, not Linux). */
export function cpuTicks(pid: number): number | undefined {
  try {
    return parseCpuTicks(readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return undefined;
  }
}
