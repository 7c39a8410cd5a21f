/**
 * Child processes for benchmarks: each in its own process group with its
 * output in a log file, stopped by group (TERM, then KILL after a grace
 * period), plus a free loopback port, and a process's memory and a process
 * group's CPU time from /proc.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const CLK_TCK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;

/** A port on 127.0.0.1 that was free a moment ago (bind to 0, read it, close). */
export async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((resolve, reject) => srv.once('error', reject).listen(0, '127.0.0.1', resolve));
  const addr = srv.address();
  await new Promise<void>((resolve) => srv.close(() => resolve()));
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  return addr.port;
}

/** A child process started by {@link spawnLogged}. */
export interface Spawned {
  child: ChildProcess;
  pid: number;
  /** Resolves with the exit code (or signal name) once the process has ended. */
  exited: Promise<number | string>;
  /** End the whole process group: TERM, then KILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<number | string>;
}

/**
 * Start `cmd` in a new process group with stdout and stderr appended to
 * `logFile` (so a full pipe can never stall it) and stdin closed.
 */
export function spawnLogged(cmd: string, args: string[], logFile: string, opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}): Spawned {
  const fd = openSync(logFile, 'a');
  let child: ChildProcess;
  try {
    child = spawn(cmd, args, { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['ignore', fd, fd] });
  } finally {
    closeSync(fd); // the child holds its own copy
  }
  if (child.pid === undefined) throw new Error(`could not start ${cmd}`);
  const pid = child.pid;
  const exited = new Promise<number | string>((resolve) => {
    if (child.exitCode !== null) resolve(child.exitCode);
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown'));
    child.once('error', () => resolve('spawn error'));
  });
  let stopping: Promise<number | string> | undefined;
  const stop = (graceMs = 10_000) =>
    (stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return exited;
      signalGroup(pid, 'SIGTERM');
      const timer = setTimeout(() => signalGroup(pid, 'SIGKILL'), graceMs);
      const result = await exited;
      clearTimeout(timer);
      signalGroup(pid, 'SIGKILL'); // anything the leader left behind in its group
      return result;
    })());
  return { child, pid, exited, stop };
}

function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {
    // ESRCH: the group is gone already
  }
}

/** VmRSS (resident now) and VmHWM (peak resident) of a live process, in MiB. */
export function procMemory(pid: number): { rssMb: number; hwmMb: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (key: string) => {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB`, 'm').exec(status);
    if (!m) throw new Error(`no ${key} in /proc/${pid}/status`);
    return Number(m[1]) / 1024;
  };
  return { rssMb: kb('VmRSS'), hwmMb: kb('VmHWM') };
}

/**
 * CPU seconds (user, system) used so far by the live processes of a process
 * group (a daemon and its children, nginx's master and worker), from
 * /proc/<pid>/stat. Processes that already exited are not counted.
 */
export function groupCpuSecs(pgid: number): { user: number; system: number } {
  let user = 0;
  let system = 0;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(f[2]) !== pgid) continue; // field 5 of proc(5): pgrp
    user += Number(f[11]) / CLK_TCK; // fields 14 and 15: utime, stime
    system += Number(f[12]) / CLK_TCK;
  }
  return { user, system };
}

/** The last `lines` lines of a log file, for error messages. */
export function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * CPU seconds (utime, stime) of process `root` and every process descended from it, whatever their process
 * group: the daemon's ffmpeg runs in a group of its own (it is spawned detached, to be killed as a group),
 * so `groupCpuSecs` of the daemon leaves it out. Processes that ended are not counted.
 */
export function treeCpuSecs(root: number): { user: number; system: number } {
  const procs = new Map<number, { ppid: number; user: number; system: number }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // exited while we looked
    }
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    procs.set(Number(name), { ppid: Number(f[1]), user: Number(f[11]) / CLK_TCK, system: Number(f[12]) / CLK_TCK });
  }
  const inTree = (pid: number): boolean => {
    for (let p = pid, hops = 0; p > 1 && hops < 64; hops++) {
      if (p === root) return true;
      p = procs.get(p)?.ppid ?? 0;
    }
    return false;
  };
  let user = 0;
  let system = 0;
  for (const [pid, p] of procs) {
    if (!inTree(pid)) continue;
    user += p.user;
    system += p.system;
  }
  return { user, system };
}
