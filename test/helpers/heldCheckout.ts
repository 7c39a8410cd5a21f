/**
 * Holding a job before its first run: the node builds a run's working tree
 * with `git checkout-index`, which applies the test pack's `.gitattributes`
 * filters. The node's mirror is given a smudge filter `farmhand-held` (its own
 * config, as heldOrigin's upload-pack) that, while a gate file exists, marks
 * itself held and blocks on a FIFO until released; otherwise it passes the
 * file through. A commit made with `heldFiles()` names the filter, so checking
 * it out is held; every other commit checks out at once.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { chmod, mkdtemp, open, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

const FILTER = 'farmhand-held';

/** Files to add to a commit so that checking it out goes through the held filter. */
export const heldFiles = (): Record<string, string> => ({ '.gitattributes': `held.txt filter=${FILTER}\n`, 'held.txt': 'held\n' });

export interface HeldCheckout {
  /** How many checkouts are blocked in the filter now. */
  heldCount(): Promise<number>;
  /** Let every blocked checkout go on and stop holding new ones. */
  release(): Promise<void>;
  cleanup(): Promise<void>;
}

/** From now on, a checkout of a commit made with heldFiles() blocks until release(). */
export async function holdCheckouts(mirrorDir: string): Promise<HeldCheckout> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-held-checkout-'));
  const fifo = path.join(dir, 'fifo');
  const gate = path.join(dir, 'gate');
  const filter = path.join(dir, 'smudge.sh');
  await run('mkfifo', [fifo]);
  await writeFile(
    filter,
    `#!/bin/sh\nif [ -e '${gate}' ]; then\n  touch '${dir}/held.'$$\n  cat '${fifo}' >/dev/null\n  rm -f '${dir}/held.'$$\nfi\nexec cat\n`,
  );
  await chmod(filter, 0o755);
  await writeFile(gate, '');
  await run('git', ['-C', mirrorDir, 'config', `filter.${FILTER}.smudge`, filter]);
  const heldCount = async () => (await readdir(dir)).filter((f) => f.startsWith('held.')).length;
  const release = async () => {
    await rm(gate, { force: true });
    // Opening the FIFO for writing and closing it gives every blocked reader its end of file.
    while ((await heldCount()) > 0) {
      const fh = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => undefined);
      await fh?.close();
      await new Promise((r) => setImmediate(r));
    }
  };
  return {
    heldCount,
    release,
    async cleanup() {
      await release();
      await run('git', ['-C', mirrorDir, 'config', '--unset', `filter.${FILTER}.smudge`]).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
