/**
 * A whole farmhand daemon as a separate process, the way systemd runs it:
 * `node --import tsx src/main.ts serve --config <file>` (tsx, so no build
 * step), or `node dist/main.js ...` from a build made into a temporary
 * folder. The config is the tests' `testConfig` with the benchmark's
 * overrides, written to a JSON file. Start-up is timed from spawn to the
 * first 200 over HTTP. mem-probe.mjs is preloaded, so the benchmark can ask
 * for the daemon's heap figures.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { testConfig, type TestConfig } from '../../test/helpers/daemon.js';
import { waitFor200 } from './http.js';
import { freePort, groupCpuSecs, spawnLogged, tail, type Spawned } from './processes.js';

/** The repository's root (bench/lib/../..). */
export const PROJECT_ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MEM_PROBE = fileURLToPath(new URL('./mem-probe.mjs', import.meta.url));

/** A daemon process and what the benchmark needs to talk to it. */
export interface BenchDaemon {
  url: string;
  pid: number;
  proc: Spawned;
  /** Milliseconds from spawn to the first 200. */
  startMs: number;
  /** CPU milliseconds (user + system) the daemon's process group had used when the first 200 came. */
  startCpuMs: number;
  logFile: string;
  /** Heap figures (bytes) from inside the daemon: process.memoryUsage() and V8's heap spaces. */
  heap(): Promise<NodeJS.MemoryUsage & { spaces: Record<string, number> }>;
  stop(): Promise<number | string>;
}

/**
 * Write `<workDir>/farmhand.json` for a daemon on a free loopback port with
 * `dataDir` and the test pack at `packDir`; returns the file's path.
 */
export async function writeDaemonConfig(workDir: string, packDir: string, dataDir: string, overrides: TestConfig): Promise<string> {
  const port = await freePort();
  const cfg = testConfig(packDir, dataDir, { ...overrides, listen: `127.0.0.1:${port}` });
  const file = join(workDir, 'farmhand.json');
  writeFileSync(file, JSON.stringify(cfg, null, 2));
  return file;
}

/**
 * Compile src/ with tsconfig.build.json into `<appDir>/dist`, beside links to
 * the repository's package.json, node_modules, python/ and src/ (the daemon finds
 * them relative to dist/). The repository's own dist/ is left alone. Type
 * errors elsewhere in a tree being edited do not stop the emit; a missing
 * main.js does. Then package.json's `postbuild` runs in `<appDir>` (a link
 * to src/ is there for it), as after `npm run build`: it copies the web
 * pages' static files into dist/. Returns the path of main.js.
 */
export async function buildInto(appDir: string): Promise<string> {
  mkdirSync(appDir, { recursive: true });
  for (const name of ['package.json', 'node_modules', 'python', 'src']) symlinkSync(join(PROJECT_ROOT, name), join(appDir, name));
  const tsc = join(PROJECT_ROOT, 'node_modules/typescript/bin/tsc');
  const outDir = join(appDir, 'dist');
  await promisify(execFile)(process.execPath, [tsc, '-p', join(PROJECT_ROOT, 'tsconfig.build.json'), '--outDir', outDir], { maxBuffer: 16 << 20 }).catch(
    (e: { stdout?: string }) => {
      const errors = (e.stdout ?? '').split('\n').filter((l) => l.includes('error TS')).length;
      console.log(`(tsc reported ${errors} type errors; the emitted JavaScript is used anyway)`);
    },
  );
  const main = join(outDir, 'main.js');
  if (!existsSync(main)) throw new Error(`the build wrote no ${main}`);
  // Then package.json's own postbuild, as `npm run build` runs it (it copies the files dist/ needs beside the code).
  const postbuild = (JSON.parse(readFileSync(join(PROJECT_ROOT, 'package.json'), 'utf8')) as { scripts?: Record<string, string> }).scripts?.postbuild;
  if (postbuild) await promisify(execFile)('/bin/sh', ['-c', postbuild], { cwd: appDir });
  return main;
}

/**
 * Spawn the daemon and wait until `probePath` answers 200 (at most
 * `timeoutMs`). `builtMain` runs that main.js instead of src/main.ts under
 * tsx. `cpuProfDir` adds `--cpu-prof`: V8 writes the profile there when the
 * daemon exits cleanly (SIGTERM).
 */
export async function startBenchDaemon(opts: {
  configFile: string;
  logFile: string;
  probePath: string;
  timeoutMs?: number;
  builtMain?: string;
  cpuProfDir?: string;
  /** Modules preloaded after tsx (bench probes written in TypeScript) and extra environment. */
  preload?: string[];
  env?: Record<string, string>;
}): Promise<BenchDaemon> {
  const cfg = JSON.parse(readFileSync(opts.configFile, 'utf8')) as { listen: string };
  const url = `http://${cfg.listen}`;
  const memFile = `${opts.configFile}.mem.json`;
  const prof = opts.cpuProfDir ? ['--cpu-prof', '--cpu-prof-dir', opts.cpuProfDir] : [];
  const preload = (opts.preload ?? []).flatMap((m) => ['--import', m]);
  const entry = opts.builtMain ? [opts.builtMain] : ['--import', 'tsx', ...preload, join(PROJECT_ROOT, 'src/main.ts')];
  const args = [...prof, '--import', MEM_PROBE, ...entry, 'serve', '--config', opts.configFile];
  const env = { ...process.env, FARMHAND_BENCH_MEM_FILE: memFile, ...opts.env };
  const t0 = performance.now();
  const proc = spawnLogged(process.execPath, args, opts.logFile, { cwd: PROJECT_ROOT, env });
  let alive = true;
  void proc.exited.then(() => (alive = false));
  let answeredAt: number;
  try {
    answeredAt = await waitFor200(`${url}${opts.probePath}`, t0 + (opts.timeoutMs ?? 60_000), () => alive);
  } catch (e) {
    await proc.stop(2_000);
    throw new Error(`the daemon did not start: ${(e as Error).message}\n--- its log:\n${tail(opts.logFile)}`);
  }
  const cpu = groupCpuSecs(proc.pid);
  const startCpuMs = (cpu.user + cpu.system) * 1000;
  const heap = async () => {
    writeFileSync(memFile, '');
    process.kill(proc.pid, 'SIGUSR2');
    for (let i = 0; i < 100; i++) {
      await new Promise((r) => setTimeout(r, 20));
      const text = readFileSync(memFile, 'utf8');
      if (text) return JSON.parse(text) as NodeJS.MemoryUsage & { spaces: Record<string, number> };
    }
    throw new Error('the daemon did not answer the memory probe');
  };
  return { url, pid: proc.pid, proc, startMs: answeredAt - t0, startCpuMs, logFile: opts.logFile, heap, stop: () => proc.stop(15_000) };
}
