/**
 * For the few tests of what gets installed (the installer copies `dist/`, the `farmhand` command runs
 * `dist/main.js`): build once per test run when `dist/` is missing or older than `src/`, so `npm test`
 * works on a fresh clone by itself. Every other test runs the TypeScript sources through tsx.
 *
 * `npm test` runs files in parallel worker processes, so the check and the build hold a lock shared by every
 * process of this checkout (processLock.ts): a test never reads `dist/` while another process is writing it,
 * and two processes never build at once.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { fullLaneOnly } from './lane.js';
import { processLock } from './processLock.js';

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

/** Resolves once `dist/` is built from the current `src/` (run from the repository root, as mocha is). */
export function ensureBuilt(): Promise<void> {
  fullLaneOnly('a build of dist/ (ensureBuilt)');
  building ??= (async () => {
    // One lock per checkout: the path's digest names it.
    const release = await processLock(`build-${createHash('sha256').update(process.cwd()).digest('hex').slice(0, 16)}`);
    try {
      const main = path.resolve('dist/main.js');
      const fresh = existsSync(main) && statSync(main).mtimeMs >= newest(path.resolve('src'));
      if (!fresh) await run('npm', ['run', '--silent', 'build'], { maxBuffer: 16 << 20 });
    } finally {
      release();
    }
  })();
  return building;
}
