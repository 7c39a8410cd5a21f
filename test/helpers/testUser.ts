/**
 * A real second user for the tests of `runner.run_tests_as`: created once
 * (idempotent) with useradd, as scripts/install-appliance.sh does. The suite
 * runs as root (docs/testing.md), so this works on a fresh Debian 12 machine.
 */
import { execFileSync } from 'node:child_process';
import { processLock } from './processLock.js';

export interface SystemUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * useradd/usermod, again while another process holds the shadow files' lock: the suite's files run in parallel
 * processes (docs/testing.md), and on a fresh machine two of them may create their users at the same moment.
 * The tools take the lock or fail at once ("cannot lock /etc/passwd; try again later"); there is nothing to wait
 * on but the lock, so the retry pauses 50 ms, for at most 20 s.
 */
function shadowTool(cmd: string, args: string[]): void {
  for (let tries = 0; ; tries++) {
    try {
      execFileSync(cmd, args, { stdio: 'pipe' });
      return;
    } catch (e) {
      const stderr = String((e as { stderr?: Buffer }).stderr ?? '');
      if (!/cannot lock|try again later/i.test(stderr) || tries >= 400) throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 50);
    }
  }
}

function lookUp(name: string): SystemUser | undefined {
  try {
    const [, , uid, gid] = execFileSync('getent', ['passwd', name], { encoding: 'utf8' }).trim().split(':');
    return { name, uid: Number(uid), gid: Number(gid) };
  } catch {
    return undefined;
  }
}

/** The system user `name` (no home, no shell), created when missing. */
export function ensureSystemUser(name: string): SystemUser {
  const found = lookUp(name);
  if (found) return found;
  try {
    shadowTool('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', name]);
  } catch (e) {
    // Another test process created it in between: fine.
    if (!lookUp(name)) throw e;
  }
  return lookUp(name)!;
}

/** Add `user` to `group`'s members (usermod -a -G), idempotent. */
export function addToGroup(user: string, group: string): void {
  shadowTool('usermod', ['-a', '-G', group, user]);
}

/**
 * Hold `name` for the tests of one file: resolves with the release once no other test process (this run's
 * parallel workers, another checkout's suite) runs tests as that user. A daemon running tests as a user ends
 * every process of that user it finds at start-up and at a stop (a test may leave its group), so two files
 * running tests as the same user would end each other's tests. Take it in the first `before` hook (with a
 * timeout for the wait: the other file's whole run), release it in the last `after`.
 */
export function holdSystemUser(name: string): Promise<() => void> {
  return processLock(`user-${name}`);
}
