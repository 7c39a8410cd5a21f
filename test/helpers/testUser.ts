/**
 * A real second user for the tests of `runner.run_tests_as`: created once
 * (idempotent) with useradd, as scripts/install-appliance.sh does. The suite
 * runs as root (docs/testing.md), so this works on a fresh Debian 12 machine.
 */
import { execFileSync } from 'node:child_process';

export interface SystemUser {
  name: string;
  uid: number;
  gid: number;
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
    execFileSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', name], { stdio: 'pipe' });
  } catch (e) {
    // Another test process created it in between: fine.
    if (!lookUp(name)) throw e;
  }
  return lookUp(name)!;
}

/** Add `user` to `group`'s members (usermod -a -G), idempotent. */
export function addToGroup(user: string, group: string): void {
  execFileSync('usermod', ['-a', '-G', group, user], { stdio: 'pipe' });
}
