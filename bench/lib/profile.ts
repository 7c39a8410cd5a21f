/**
 * Reading a V8 `.cpuprofile` (from `node --cpu-prof`) into the functions
 * that took the most self time, so a missed target can be explained from
 * the benchmark's own output without opening a profiler UI.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

/** A function's share of the profile. */
export interface Hotspot {
  /** `name (file:line)`, the file relative to `root`. */
  where: string;
  selfMs: number;
  /** Percent of all sampled time, idle included. */
  percent: number;
}

/**
 * A span of time in microseconds of the monotonic clock: V8 stamps profile
 * samples with it, and `process.hrtime` reads the same clock, so another
 * process can name the part of a profile it cares about.
 */
export interface Window {
  fromUs: number;
  toUs: number;
}

/** Now, on the clock of profile samples. */
export const monotonicUs = (): number => Number(process.hrtime.bigint() / 1000n);

/** The newest main-thread profile in `dir` (`CPU.<date>.<time>.<pid>.0.<n>.cpuprofile`; tsx's loader thread writes another). */
export function mainThreadProfile(dir: string): string | undefined {
  const files = readdirSync(dir).filter((f) => /^CPU\.\d+\.\d+\.\d+\.0\.\d+\.cpuprofile$/.test(f));
  const newest = files.sort().pop();
  return newest === undefined ? undefined : join(dir, newest);
}

/**
 * Functions by self time, largest first; samples of V8's `(idle)`,
 * `(program)` and `(garbage collector)` pseudo-nodes are kept, because GC
 * time is often the answer. With a window, only the samples taken in it.
 */
export function topSelfTime(file: string, root: string, limit = 15, window?: Window): { totalMs: number; idleMs: number; top: Hotspot[] } {
  const prof = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const self = new Map<string, number>();
  let total = 0;
  let idle = 0;
  let at = prof.startTime;
  prof.samples.forEach((id, i) => {
    const dt = (prof.timeDeltas[i] ?? 0) / 1000;
    at += prof.timeDeltas[i] ?? 0;
    if (window && (at < window.fromUs || at > window.toUs)) return;
    total += dt;
    const cf = byId.get(id)?.callFrame;
    if (!cf) return;
    if (cf.functionName === '(idle)') idle += dt;
    const url = cf.url.replace(/^file:\/\//, '');
    const where = url ? `${cf.functionName || '(anonymous)'} (${relative(root, url)}:${cf.lineNumber + 1})` : cf.functionName;
    self.set(where, (self.get(where) ?? 0) + dt);
  });
  const top = [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([where, selfMs]) => ({ where, selfMs, percent: (100 * selfMs) / total }));
  return { totalMs: total, idleMs: idle, top };
}
