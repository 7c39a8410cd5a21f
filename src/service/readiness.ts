/**
 * Is the node ready to run tests? The checks behind `/readyz`, the start-up
 * wait and systemd's READY status (docs/operations.md, "Health and
 * readiness"): capture delivering frames, the test pack reachable, the data
 * directory writable, free space above the retention floor. Each check says
 * why it failed in a short line that names no secret (the full reason is in
 * the log and the v2 node status, which need a token).
 */
import { randomBytes } from 'node:crypto';
import { rm, statfs, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { CaptureHealth } from '../core/ports.js';

export const READINESS_CHECKS = ['capture', 'test_pack', 'data_dir', 'disk'] as const;
export type ReadinessCheck = (typeof READINESS_CHECKS)[number];

export interface CheckResult {
  ok: boolean;
  /** What was found: why it failed, or what passed. */
  detail: string;
}

export interface Readiness {
  ready: boolean;
  /** Names of the failed checks, in the order of READINESS_CHECKS. */
  failed: ReadinessCheck[];
  checks: Record<ReadinessCheck, CheckResult>;
}

export interface ReadinessOptions {
  /** Capture health; undefined when the node has no capture (`none:`), which passes. */
  capture: (() => CaptureHealth) | undefined;
  /** The test pack's current problem ("unreachable, retrying: ..."); undefined when fetchable. */
  testPackProblem: () => string | undefined;
  dataDir: string;
  /** `retention.min_free_mb`: below it the node is not ready. */
  minFreeMb: number;
  /** Free bytes on the data directory's filesystem (default: statfs, unprivileged). */
  diskFree?: (dir: string) => Promise<number>;
}

export async function statfsFreeBytes(dir: string): Promise<number> {
  const s = await statfs(dir);
  return s.bavail * s.bsize;
}

export class ReadinessChecks {
  constructor(private readonly o: ReadinessOptions) {}

  /** Every check, run now (a small file write and a statfs; the others read memory). */
  async check(): Promise<Readiness> {
    const [data_dir, disk] = await Promise.all([this.dataDir(), this.disk()]);
    const checks: Record<ReadinessCheck, CheckResult> = { capture: this.capture(), test_pack: this.testPack(), data_dir, disk };
    const failed = READINESS_CHECKS.filter((c) => !checks[c].ok);
    return { ready: failed.length === 0, failed, checks };
  }

  /** Capture alone (synchronous): what start-up waits for. */
  capture(): CheckResult {
    if (!this.o.capture) return { ok: true, detail: 'no capture configured (capture none:)' };
    const h = this.o.capture();
    return h.online ? { ok: true, detail: 'delivering frames' } : { ok: false, detail: `no frames: ${h.reason ?? 'offline'}` };
  }

  private testPack(): CheckResult {
    // The problem text carries git's message, which may name the URL: only that it failed is said here.
    return this.o.testPackProblem() === undefined ? { ok: true, detail: 'reachable' } : { ok: false, detail: 'unreachable, retrying (the log and the v2 node status say why)' };
  }

  /** A real write (a read-only remount or a permission change fails it; access(2) would not see every case). */
  private async dataDir(): Promise<CheckResult> {
    const probe = path.join(this.o.dataDir, `.readyz.${process.pid}.${randomBytes(4).toString('hex')}.tmp`);
    try {
      await writeFile(probe, 'ok\n', { flag: 'wx' });
      return { ok: true, detail: 'writable' };
    } catch (e) {
      return { ok: false, detail: `not writable: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
    } finally {
      await rm(probe, { force: true }).catch(() => undefined);
    }
  }

  private async disk(): Promise<CheckResult> {
    const floor = this.o.minFreeMb;
    try {
      const freeMb = Math.floor((await (this.o.diskFree ?? statfsFreeBytes)(this.o.dataDir)) / 2 ** 20);
      const detail = `${freeMb} MiB free, floor ${floor} MiB (retention.min_free_mb)`;
      return { ok: freeMb >= floor, detail };
    } catch (e) {
      return { ok: false, detail: `cannot read free space: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}` };
    }
  }
}

/** One line for a person (systemd's STATUS, the log): "ready" or what failed. */
export function describeReadiness(r: Readiness): string {
  return r.ready ? 'ready' : `not ready: ${r.failed.map((c) => `${c}: ${r.checks[c].detail}`).join('; ')}`;
}
