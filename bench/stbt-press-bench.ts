/**
 * stbt press pacing: `node --import tsx bench/stbt-press-bench.ts [--presses N] [--delay S]`.
 *
 * A python3 child calls `stbt.press("KEY_OK")` N times (default 30) over a
 * real control socket (ControlServer), the daemon side pressing with
 * KeyPresser (remote read from a real git test pack, LircEncoder) through
 * the virtual IR transport, and a 1280x720 frame for each press's
 * `frame_before`. The gap is measured on the daemon's side: from one press's
 * end (KeyPresser resolved: the IR sent) to the next press's start (the
 * request arrived). Limit: every gap is `interpress_delay_secs` (default 0.3)
 * to within 10 ms. Also printed: the same gap from the Python side's Keypress
 * times.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeyPresser } from '../src/hardware/ir/keys.js';
import { VirtualTransport } from '../src/hardware/ir/transports/index.js';
import { ControlServer } from '../src/runner/control.js';
import { GitTestPack } from '../src/runner/gitTestPack.js';
import { projectRoot } from '../src/version.js';
import { necRemote } from '../test/fixtures/remotes.js';
import { makeTestPack } from '../test/fixtures/testPack.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const PRESSES = arg('presses', 30);
const DELAY = arg('delay', 0.3);
const LIMIT_MS = 10;
const wallNow = () => performance.timeOrigin + performance.now();

const SCRIPT = `
import json, stbt
out = []
for _ in range(${PRESSES}):
    k = stbt.press("KEY_OK", interpress_delay_secs=${DELAY})
    out.append([k.start_time * 1000, k.end_time * 1000])
print(json.dumps(out), flush=True)
`;

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
const pct = (xs: number[], p: number): number => sorted(xs)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const describe = (xs: number[]): string =>
  `min ${Math.min(...xs).toFixed(2)}  median ${pct(xs, 0.5).toFixed(2)}  p90 ${pct(xs, 0.9).toFixed(2)}  max ${Math.max(...xs).toFixed(2)} ms`;

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'farmhand-stbt-press-bench-'));
  const pack = await makeTestPack({ 'config/remote-control/bench.lircd.conf': necRemote('bench', 0x10ef, { KEY_OK: 0x22dd }), 'tests/x.py': 'def test_x():\n    pass\n' });
  const tp = new GitTestPack({ url: pack.dir, dir: join(dir, 'tp.git'), worktreesDir: join(dir, 'checkouts') });
  const presser = new KeyPresser({ testPack: tp, transport: new VirtualTransport() });
  const times: [number, number][] = [];
  const frame = Buffer.alloc(1280 * 720 * 3, 0x40);
  let seq = 0;
  const control = new ControlServer({
    keys: {
      press: async (key, opts) => {
        const start = wallNow();
        await presser.press(key, opts);
        times.push([start, wallNow()]);
      },
    },
    latestFrame: () => ({ data: Buffer.from(frame), width: 1280, height: 720, seq: ++seq, at: Date.now() }),
    tmpDir: dir,
  });
  try {
    await tp.open();
    const channel = await control.open({ resultDir: dir, testPackSha: pack.sha, remote: 'bench' });
    const child = spawn('/usr/bin/python3', ['-c', SCRIPT], {
      env: { ...process.env, ...channel.env, PYTHONPATH: join(projectRoot, 'python') },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    await channel.close();
    if (code !== 0) throw new Error(`the Python script exited with ${String(code)}`);
    const py = JSON.parse(out) as [number, number][];
    const gaps = times.slice(1).map(([start], i) => start - times[i]![1]);
    const pyGaps = py.slice(1).map(([start], i) => start - py[i]![1]);
    const target = DELAY * 1000;
    const worst = Math.max(...gaps.map((g) => Math.abs(g - target)));
    console.log(`${PRESSES} stbt.press() calls, interpress_delay_secs ${DELAY}: ${gaps.length} gaps (previous press's end -> next press's start)`);
    console.log(`daemon side (KeyPresser end -> next request):   ${describe(gaps)}`);
    console.log(`Python side (Keypress.end_time -> start_time):  ${describe(pyGaps)}`);
    console.log(`limit: every gap ${target.toFixed(0)} ms +- ${LIMIT_MS} ms; worst error ${worst.toFixed(2)} ms = ${(worst / LIMIT_MS).toFixed(2)} x the limit -> ${worst <= LIMIT_MS ? 'met' : 'NOT met'}`);
  } finally {
    await control.close();
    await pack.cleanup();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
