/** A real lircd (Debian's lirc package) started by a test. */
import type { ChildProcess } from 'node:child_process';
import { createConnection } from 'node:net';
import { waitFor } from './wait.js';

/**
 * Until lircd accepts connections on its socket: the socket file appears at bind(), before lircd
 * listens, so the file alone is not enough. Fails at once if lircd exits.
 */
export async function waitForLircdSocket(path: string, child: ChildProcess): Promise<void> {
  await waitFor(async () => {
    if (child.exitCode !== null) throw new Error(`lircd exited with ${child.exitCode}`);
    return new Promise<boolean>((resolve) => {
      const s = createConnection(path, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
  }, 'lircd (Debian package "lirc") to accept connections on its socket');
}
