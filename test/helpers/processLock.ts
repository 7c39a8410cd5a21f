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

/** Resolves with the release once this process holds the lock `name` (letters, digits, - and _); rejects after `timeoutMs`. */
export async function processLock(name: string, timeoutMs = 10 * 60_000): Promise<() => void> {
  const lock = path.join(os.tmpdir(), `farmhand-lock-${name}`);
  const owner = path.join(lock, 'pid');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      mkdirSync(lock);
      writeFileSync(owner, String(process.pid));
      let held = true;
      return () => {
        if (held) rmSync(lock, { recursive: true, force: true });
        held = false;
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
    }
    let pid = 0;
    try {
      pid = Number(readFileSync(owner, 'utf8'));
    } catch {
      // made, its pid not written yet
    }
    if (pid > 0 && !isAlive(pid)) {
      rmSync(lock, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`lock ${lock} still held by pid ${pid || '(unknown)'} after ${timeoutMs / 1000} s`);
    // Held by another test process, for as long as its file needs: nothing to wait on across processes but the folder.
    await new Promise((r) => setTimeout(r, 200));
  }
}
