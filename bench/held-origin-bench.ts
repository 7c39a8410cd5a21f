/**
 * Nothing slow on a request's path (issue 20, item 2):
 * `node --import tsx bench/held-origin-bench.ts [--secs 10]`.
 *
 * A whole daemon (real git test pack, virtual set-top box and IR) answers the
 * front door, the live view, a screenshot and a key press, one after another
 * in a loop, for `--secs` with the test-pack origin quiet, then for `--secs`
 * while the origin's `git upload-pack` is held (a fetch started by the push
 * hook blocks inside it; test/helpers/heldOrigin.ts). Prints per kind the
 * count, median and p99 of each phase and p99 held / quiet (target <= 2).
 * Wall-clock times on a shared machine: compare the two phases of one run.
 */
import { loadavg } from 'node:os';
import path from 'node:path';
import { VSTB_LIRCD_CONF } from '../src/hardware/virtual/index.js';
import { STANDARD_FILES } from '../test/fixtures/testPack.js';
import { asUser } from '../test/helpers/auth.js';
import { startTestDaemon, waitOnline } from '../test/helpers/daemon.js';
import { holdableOrigin } from '../test/helpers/heldOrigin.js';
import { waitFor } from '../test/helpers/wait.js';

const secsArg = process.argv.indexOf('--secs');
const SECS = secsArg > 0 ? Number(process.argv[secsArg + 1]) : 10;

const d = await startTestDaemon({
  files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF },
  config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 640, height: 360 } },
});
const origin = await holdableOrigin(path.join(d.dataDir, 'test-pack.git'));
try {
  await waitOnline(d);
  const { token } = await asUser(d, 'alice');
  const auth = { Authorization: `token ${token}` };
  const node = d.config.node_id;
  const kinds: Record<string, () => Promise<Response>> = {
    'front door': () => fetch(`${d.url}/`, { headers: auth }),
    'live view': () => fetch(`${d.url}/app/live`, { headers: auth }),
    screenshot: () => fetch(`${d.url}/api/v2/nodes/${node}/screenshot.png`, { headers: auth }),
    press: () => fetch(`${d.url}/api/v2/nodes/${node}/press`, { method: 'POST', headers: { ...auth, 'Content-Type': 'application/json' }, body: '{"key":"KEY_OK"}' }),
  };

  const measure = async (secs: number): Promise<Map<string, number[]>> => {
    const times = new Map<string, number[]>(Object.keys(kinds).map((k) => [k, []]));
    const end = performance.now() + secs * 1000;
    while (performance.now() < end) {
      for (const [k, call] of Object.entries(kinds)) {
        const t0 = performance.now();
        const res = await call();
        await res.arrayBuffer();
        if (res.status >= 400) throw new Error(`${k} answered ${res.status}`);
        times.get(k)!.push(performance.now() - t0);
      }
    }
    return times;
  };

  await measure(1); // warm up
  const quiet = await measure(SECS);
  await origin.hold();
  const hook = fetch(`${d.url}/github/post-receive`, { method: 'POST' });
  await waitFor(async () => (await origin.heldCount()) > 0, { what: 'the fetch to be held', timeoutMs: 30_000 });
  const held = await measure(SECS);
  const stillHeld = await origin.heldCount();
  await origin.release();
  await hook;

  const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))] ?? NaN;
  const f = (n: number) => n.toFixed(1).padStart(8);
  console.log(`held-origin bench: ${SECS} s quiet, ${SECS} s with upload-pack held (still held at the end: ${stillHeld > 0 ? 'yes' : 'NO'}); load ${loadavg().map((l) => l.toFixed(1)).join(' ')}`);
  console.log(`${'kind'.padEnd(12)} ${'n quiet'.padStart(8)} ${'med q'.padStart(8)} ${'p99 q'.padStart(8)} ${'n held'.padStart(8)} ${'med h'.padStart(8)} ${'p99 h'.padStart(8)} ${'p99 h/q'.padStart(8)}  (ms)`);
  for (const k of Object.keys(kinds)) {
    const a = quiet.get(k)!;
    const b = held.get(k)!;
    const ratio = q(b, 0.99) / q(a, 0.99);
    console.log(`${k.padEnd(12)} ${String(a.length).padStart(8)} ${f(q(a, 0.5))} ${f(q(a, 0.99))} ${String(b.length).padStart(8)} ${f(q(b, 0.5))} ${f(q(b, 0.99))} ${ratio.toFixed(2).padStart(8)}  ${ratio <= 2 ? 'ok' : 'OVER 2x'}`);
  }
} finally {
  await origin.cleanup();
  await d.stop();
}
