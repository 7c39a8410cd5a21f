/**
 * For the few tests of what gets installed (the installer copies `dist/`, the `farmhand` command runs
 * `dist/main.js`): build once per test run when `dist/` is missing or older than `src/`, so `npm test`
 * works on a fresh clone by itself. Every other test runs the TypeScript sources through tsx.
 *
 * `npm test` runs files in parallel worker processes, so the check and the build hold a lock shared by every
 * process of this checkout (a folder made with mkdir, beside the other temporary files): a test never reads
 * `dist/` while another process is writing it, and two processes never build at once.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fullLaneOnly } from './lane.js';
import { isAlive } from './processes.js';

const run = promisify(execFile);
let building: Promise<void> | undefined;

/** The newest modification time of the files below `dir`. */
function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) t = Math.max(t, statSync(path.join(e.parentPath, e.name)).mtimeMs);
  }
  return t;
}

/** Run `fn` holding this checkout's build lock; a lock left by a process that has died is taken over. */
async function withBuildLock<T>(fn: () => Promise<T>): Promise<T> {
  const lock = path.join(os.tmpdir(), `farmhand-build-${createHash('sha256').update(process.cwd()).digest('hex').slice(0, 16)}.lock`);
  const owner = path.join(lock, 'pid');
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(owner, String(process.pid));
      break;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      let pid = 0;
      try {
        pid = Number(readFileSync(owner, 'utf8'));
      } catch {
        // made, its pid not written yet
      }
      if (pid > 0 && !isAlive(pid)) rmSync(lock, { recursive: true, force: true });
      // A lock held for a build (tens of seconds): no condition to wait on across processes but the folder.
      else await new Promise((r) => setTimeout(r, 200));
    }
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

/** Resolves once `dist/` is built from the current `src/` (run from the repository root, as mocha is). */
export function ensureBuilt(): Promise<void> {
  fullLaneOnly('a build of dist/ (ensureBuilt)');
  building ??= withBuildLock(async () => {
    const main = path.resolve('dist/main.js');
    const fresh = existsSync(main) && statSync(main).mtimeMs >= newest(path.resolve('src'));
    if (!fresh) await run('npm', ['run', '--silent', 'build'], { maxBuffer: 16 << 20 });
  });
  return building;
}
