/**
 * Which remote control a run or a manual key press uses: the one rule for
 * both (spec "v2 run tests" and "v1 endpoints"). The requested remote, else
 * the test pack's `test_pack.default_remote_control`; with neither, v1 takes
 * the first remote file in alphabetical order while v2 requires one (400).
 */
import { invalid } from './errors.js';
import type { EventSink, KeyPressedData } from './events.js';
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

/**
 * A press function that publishes `key.pressed` once the press succeeded
 * (a refused or failed press publishes nothing). `origin` says who pressed,
 * read at the time of the press.
 */
export function announcePresses<O extends { remote: string; holdMs?: number }>(
  press: (key: string, opts: O) => Promise<void>,
  sink: EventSink | undefined,
  origin: () => Pick<KeyPressedData, 'source' | 'username' | 'result_id'>,
): (key: string, opts: O) => Promise<void> {
  if (!sink) return press;
  return async (key, opts) => {
    await press(key, opts);
    sink.publish('key.pressed', { key, remote: opts.remote, hold_ms: opts.holdMs ?? 0, ...origin() });
  };
}
