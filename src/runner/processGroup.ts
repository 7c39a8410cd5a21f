/**
 * Ending process groups: a test run (or a git command) is started as the
 * leader of its own process group, so one signal reaches its children and
 * grandchildren too. "Gone" means no live member is left; zombies count as
 * gone, because reaping orphans is the init system's job, not ours.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';

/** Send a signal to every process of a group; false when the group no longer exists. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (e) {
    // EPERM: the group exists but holds a process we may not signal (setuid); it is still alive.
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** State letter, process group and start time (clock ticks after boot) of a /proc/<pid>/stat line; undefined if unreadable. */
export function parseProcStat(stat: string): { state: string; pgrp: number; startTicks: number } | undefined {
  // The command name sits in parentheses and may itself contain spaces and parentheses.
  const close = stat.lastIndexOf(')');
  if (close < 0) return undefined;
  const fields = stat.slice(close + 2).split(' ');
  const state = fields[0];
  const pgrp = Number(fields[2]);
  const startTicks = Number(fields[19]);
  if (!state || !Number.isInteger(pgrp)) return undefined;
  return { state, pgrp, startTicks };
}

/** Whether a group has a member that is not a zombie. */
export async function groupAlive(pgid: number): Promise<boolean> {
  if (!signalGroup(pgid, 0)) return false;
  let entries: string[];
  try {
    entries = await readdir('/proc');
  } catch {
    return true; // no /proc: trust kill(2), zombies included
  }
  const checks = entries
    .filter((name) => /^\d+$/.test(name))
    .map(async (name) => {
      const stat = await readFile(`/proc/${name}/stat`, 'latin1').catch(() => '');
      const parsed = parseProcStat(stat);
      return parsed !== undefined && parsed.pgrp === pgid && parsed.state !== 'Z' && parsed.state !== 'X';
    });
  return (await Promise.all(checks)).some(Boolean);
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Resolves true once `gone()` holds, false if `ms` passes first. Polls every 25 ms. */
async function waitUntil(gone: () => Promise<boolean>, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await gone()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(Math.min(25, Math.max(1, deadline - Date.now())));
  }
}

export interface TerminateOptions {
  /** Time between SIGTERM and SIGKILL. */
  graceMs: number;
  /** Extra condition for "gone" beyond the group being empty, e.g. the leader's exit event seen. */
  leaderExited?: () => boolean;
  /** Told when SIGKILL becomes necessary. */
  onKill?: () => void;
}

/**
 * SIGTERM the group, wait up to the grace period, then SIGKILL it and wait
 * (at most 5 s more) for it to be gone. Resolves true when it is gone.
 */
export async function terminateGroup(pgid: number, opts: TerminateOptions): Promise<boolean> {
  const gone = async () => (opts.leaderExited?.() ?? true) && !(await groupAlive(pgid));
  signalGroup(pgid, 'SIGTERM');
  if (await waitUntil(gone, opts.graceMs)) return true;
  opts.onKill?.();
  signalGroup(pgid, 'SIGKILL');
  return waitUntil(gone, 5000);
}

/**
 * End a test process left over from before a daemon restart. Only a process
 * whose command line shows it is a farmhand test run is touched, so a pid
 * reused by something else since is left alone. Resolves true when it was
 * ours and is now gone, false when there was nothing of ours to end.
 */
export async function endStaleTestProcess(pid: number, graceMs = 5000): Promise<boolean> {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
  if (!cmdline.split('\0').includes('farmhand.run')) return false;
  return terminateGroup(pid, { graceMs });
}

/** Scans for escaped processes before giving up on ones that keep forking new ones. */
const ESCAPE_ROUNDS = 20;

/** Whether a pid is gone (no such process, or a zombie). */
async function pidGone(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'latin1').catch(() => '');
  const state = parseProcStat(stat)?.state;
  return state === undefined || state === 'Z' || state === 'X';
}

/** Whether `dir` is `root` or inside it. */
const within = (dir: string, root: string) => dir === root || dir.startsWith(root + '/');

/** When a process started, in clock ticks after boot; undefined when it is gone. */
export async function processStartTicks(pid: number): Promise<number | undefined> {
  return parseProcStat(await readFile(`/proc/${pid}/stat`, 'latin1').catch(() => ''))?.startTicks;
}

/**
 * Processes (not this one, none older than `since` ticks) that carry `needle`
 * in their environment or have their working directory in `cwdRoot`.
 */
async function findEscaped(needle: Buffer, where: EscapedSearch): Promise<number[]> {
  const { cwdRoot, since } = where;
  const entries = await readdir('/proc').catch(() => [] as string[]);
  const found = await Promise.all(
    entries
      .filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid)
      .map(async (name) => {
        // Started before the run: not one of its descendants (say, a shell someone opened in the result folder).
        if (since !== undefined && ((await processStartTicks(Number(name))) ?? -1) < since) return undefined;
        const env = await readFile(`/proc/${name}/environ`).catch(() => undefined);
        // Prefix a NUL so the first entry matches like the others.
        if (env && Buffer.concat([Buffer.from([0]), env]).includes(needle)) return Number(name);
        if (cwdRoot === undefined) return undefined;
        const cwd = await readlink(`/proc/${name}/cwd`).catch(() => undefined);
        return cwd !== undefined && within(cwd, cwdRoot) ? Number(name) : undefined;
      }),
  );
  return found.filter((p): p is number => p !== undefined);
}

/**
 * Kill processes that left a test's process group (a daemonised descendant
 * calls setsid) but still carry the run's unique environment entry, which
 * every descendant inherits unless it clears its environment, or still work
 * in the run's folder (`where.cwdRoot`). Scans again until a scan finds
 * none (a daemon may fork while it is being killed), and resolves once every
 * one killed is gone, so nothing of the run writes into its folder after.
 * Returns their pids.
 */
export interface EscapedSearch {
  /** Also processes working in this folder (a real path): a daemon that cleared its environment. */
  cwdRoot?: string;
  /** Only processes started at or after this (clock ticks after boot): the run's leader's start. */
  since?: number;
}

export async function killEscapedProcesses(envEntry: string, where: EscapedSearch = {}): Promise<number[]> {
  const needle = Buffer.from(`\0${envEntry}\0`);
  const killed = new Set<number>();
  for (let round = 0; round < ESCAPE_ROUNDS; round++) {
    const live: number[] = [];
    for (const pid of await findEscaped(needle, where)) if (!(await pidGone(pid))) live.push(pid);
    if (live.length === 0) break;
    for (const pid of live) {
      killed.add(pid);
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    await waitUntil(async () => (await Promise.all(live.map(pidGone))).every(Boolean), 5000);
  }
  return [...killed];
}
