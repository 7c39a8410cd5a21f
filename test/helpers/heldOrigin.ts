/**
 * Holding the test-pack origin: the node's mirror is pointed at a wrapper
 * `upload-pack` (`remote.origin.uploadpack`, the fetching side's own config)
 * that, while a gate file exists, marks itself held and blocks on a FIFO
 * until released; otherwise it runs `git upload-pack` at once. Every fetch
 * (and `ls-remote`) of the mirror goes through it.
 */
import { execFile } from 'node:child_process';
import { constants } from 'node:fs';
import { chmod, mkdtemp, open, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface HeldOrigin {
  /** From now on, fetches block (a fetch already past the gate is not held). */
  hold(): Promise<void>;
  /** How many upload-packs are blocked now. */
  heldCount(): Promise<number>;
  /** Let every blocked upload-pack go on and stop holding new ones. */
  release(): Promise<void>;
  cleanup(): Promise<void>;
}

export async function holdableOrigin(mirrorDir: string): Promise<HeldOrigin> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-held-origin-'));
  const fifo = path.join(dir, 'fifo');
  const gate = path.join(dir, 'gate');
  const wrapper = path.join(dir, 'upload-pack.sh');
  await run('mkfifo', [fifo]);
  await writeFile(
    wrapper,
    `#!/bin/sh\nif [ -e '${gate}' ]; then\n  touch '${dir}/held.'$$\n  cat '${fifo}' >/dev/null\n  rm -f '${dir}/held.'$$\nfi\nexec git upload-pack "$@"\n`,
  );
  await chmod(wrapper, 0o755);
  await run('git', ['-C', mirrorDir, 'config', 'remote.origin.uploadpack', wrapper]);
  const heldCount = async () => (await readdir(dir)).filter((f) => f.startsWith('held.')).length;
  const release = async () => {
    await rm(gate, { force: true });
    // Opening the FIFO for writing and closing it gives every blocked reader its end of file.
    // Non-blocking: with no reader left (ENXIO) there is nobody to release.
    while ((await heldCount()) > 0) {
      const fh = await open(fifo, constants.O_WRONLY | constants.O_NONBLOCK).catch(() => undefined);
      await fh?.close();
      await new Promise((r) => setImmediate(r));
    }
  };
  return {
    hold: () => writeFile(gate, ''),
    heldCount,
    release,
    async cleanup() {
      await release();
      await run('git', ['-C', mirrorDir, 'config', '--unset', 'remote.origin.uploadpack']).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
