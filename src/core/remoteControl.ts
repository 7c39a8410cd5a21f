/**
 * Which remote control a run or a manual key press uses: the one rule for
 * both (spec "v2 run tests" and "v1 endpoints"). The requested remote, else
 * the test pack's `test_pack.default_remote_control`; with neither, v1 takes
 * the first remote file in alphabetical order while v2 requires one (400).
 */
import { invalid } from './errors.js';
import type { TestPack } from './ports.js';

export type RemoteRule = 'v1' | 'v2';

/** The remote's name; null only for v1 with no remote file in the test pack at all. */
export async function chooseRemote(
  testPack: Pick<TestPack, 'config' | 'remoteControls'>,
  sha: string,
  requested: string | null | undefined,
  rule: RemoteRule,
): Promise<string | null> {
  const remotes = await testPack.remoteControls(sha);
  const chosen = requested ?? (await testPack.config(sha)).test_pack?.default_remote_control ?? null;
  if (chosen !== null) {
    if (!remotes.includes(chosen)) {
      throw invalid(`remote_control: no config/remote-control/${chosen}.lircd.conf in the test pack at ${sha.slice(0, 10)}`);
    }
    return chosen;
  }
  if (rule === 'v2') throw invalid('remote_control is required: the test pack sets no test_pack.default_remote_control');
  return remotes[0] ?? null;
}
