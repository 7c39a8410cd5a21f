/**
 * A lock shared by every process on the machine: `npm test` runs test files in parallel worker processes
 * (docs/testing.md, "Where the time goes"), and what is machine-wide (dist/, a system user whose processes a
 * daemon ends) must be used by one file at a time. The lock is a folder made with mkdir in the temporary
 * folder, holding the owner's pid; a lock whose owner has died is taken over. A holder that ends without
 * releasing (a worker ends with the run) leaves a lock the next taker finds dead.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isAlive } from './processes.js';
import { waitFor } from './wait.js';

/** Resolves with the release once this process holds the lock `name` (letters, digits, - and _); rejects after `timeoutMs`. */
export async function processLock(name: string, timeoutMs = 10 * 60_000): Promise<() => void> {
  const lock = path.join(os.tmpdir(), `farmhand-lock-${name}`);
  const owner = path.join(lock, 'pid');
  /** One try: the release when taken; throws "held by ..." (not yet, for waitFor's message) while another holds it. */
  const take = (): { release: () => void } | { failed: unknown } => {
    try {
      mkdirSync(lock);
      writeFileSync(owner, String(process.pid));
      let held = true;
      return {
        release: () => {
          if (held) rmSync(lock, { recursive: true, force: true });
          held = false;
        },
      };
    } catch (e) {
      // Anything but "already there" is not worth waiting for (a read-only or full /tmp).
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') return { failed: e };
    }
    let pid = 0;
    try {
      pid = Number(readFileSync(owner, 'utf8'));
    } catch {
      // made, its pid not written yet
    }
    if (pid > 0 && !isAlive(pid)) {
      rmSync(lock, { recursive: true, force: true });
      return take();
    }
    throw new Error(`still held by pid ${pid || '(unknown)'}`);
  };
  // Held by another test process, for as long as its file needs: nothing to wait on across processes but the folder.
  const got = await waitFor(take, { what: `the lock ${lock}`, timeoutMs, maxIntervalMs: 200 });
  if ('failed' in got) throw got.failed;
  return got.release;
}
