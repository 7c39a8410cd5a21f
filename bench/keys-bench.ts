/**
 * Test-script latency benchmark: `node --import tsx bench/keys-bench.ts`.
 *
 * The whole path a test script uses: a python3 child calls farmhand.press()
 * and farmhand.get_frame() over a real control socket (ControlServer), the
 * daemon side presses with KeyPresser (remote file read from a real git test
 * pack, encoded by LircEncoder) through the IR Toy transport over a socat pty
 * pair to the fake IR Toy process. Prints median, p90 and max of:
 *   - press() called in Python -> last byte (the chunk ending 0xFFFF) written to the serial port (target <= 20 ms);
 *   - press() called -> the fake device decoding that byte (other process);
 *   - press() call -> return in Python (includes the device's completion report);
 *   - get_frame() of a 1280x720 frame, call -> numpy BGR array in Python (target <= 20 ms).
 * Times across processes are wall clock (time.time() and performance.timeOrigin + now()).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KeyPresser } from '../src/hardware/ir/keys.js';
import { IrToyTransport } from '../src/hardware/ir/transports/irtoy.js';
import { ControlServer } from '../src/runner/control.js';
import { GitTestPack } from '../src/runner/gitTestPack.js';
import { projectRoot } from '../src/version.js';
import { startFakeIrToy, startPtyPair } from '../test/fixtures/fakeIrToy.js';
import { makeTestPack } from '../test/fixtures/testPack.js';

const RUNS = 30;
const TARGET_MS = 20;
const NEC = necRemote('benchbox', 0x10ef, { KEY_OK: 0x22dd });

/** Wall-clock ms of each completed write that ended a data block (0xFF 0xFF). */
const terminatorWrites: number[] = [];
const wallNow = () => performance.timeOrigin + performance.now();

const TimedPort = timedPortClass(() => terminatorWrites.push(wallNow()));

/** The test script's side: JSON lines {"press": [t0, t1]} and {"frame": ms}. */
const SCRIPT = `
import json, time
import farmhand
for _ in range(2):
    farmhand.press("KEY_OK")      # port open and device set-up
    time.sleep(0.15)
for _ in range(${RUNS}):
    t0 = time.time() * 1000
    farmhand.press("KEY_OK")
    t1 = time.time() * 1000
    print(json.dumps({"press": [t0, t1]}), flush=True)
    time.sleep(0.15)              # past the frame's gap, so no press waits for the one before
for _ in range(3):
    farmhand.get_frame()          # imports numpy and cv2
for _ in range(${RUNS}):
    t0 = time.perf_counter()
    f = farmhand.get_frame()
    print(json.dumps({"frame": (time.perf_counter() - t0) * 1000, "shape": list(f.shape)}), flush=True)
`;
import { timedPortClass } from './lib/timedPort.js';
import { necRemote } from '../test/fixtures/remotes.js';

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
const pct = (xs: number[], p: number): number => sorted(xs)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const line = (name: string, xs: number[]): string =>
  `${name.padEnd(52)} median ${pct(xs, 0.5).toFixed(2)} ms   p90 ${pct(xs, 0.9).toFixed(2)} ms   max ${Math.max(...xs).toFixed(2)} ms`;

async function runScript(env: Record<string, string>): Promise<Record<string, unknown>[]> {
  const child = spawn('/usr/bin/python3', ['-c', SCRIPT], {
    env: { ...process.env, ...env, PYTHONPATH: join(projectRoot, 'python') },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  if (code !== 0) throw new Error(`the Python script exited with ${String(code)}`);
  return out.trim().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'farmhand-keys-bench-'));
  const pack = await makeTestPack({ 'config/remote-control/bench.lircd.conf': NEC, 'tests/x.py': 'def test_x():\n    pass\n' });
  const pty = await startPtyPair(dir);
  const fake = await startFakeIrToy(pty.b);
  const transport = new IrToyTransport(pty.a, {}, TimedPort);
  const tp = new GitTestPack({ url: pack.dir, dir: join(dir, 'tp.git'), worktreesDir: join(dir, 'checkouts') });
  const frame = Buffer.alloc(1280 * 720 * 3, 0x40);
  // Like FfmpegFrameSource.latestFrame(): a fresh copy per call.
  const control = new ControlServer({
    keys: new KeyPresser({ testPack: tp, transport }),
    latestFrame: () => ({ data: Buffer.from(frame), width: 1280, height: 720, seq: 1, at: Date.now() }),
    tmpDir: dir,
  });
  try {
    await tp.open();
    const channel = await control.open({ resultDir: dir, testPackSha: pack.sha, remote: 'bench' });
    const lines = await runScript(channel.env);
    await channel.close();
    const presses = lines.filter((l) => 'press' in l).map((l) => l.press as [number, number]);
    const frames = lines.filter((l) => 'frame' in l).map((l) => l.frame as number);
    const writes = terminatorWrites.slice(-RUNS);
    const decoded = fake.reports.slice(-RUNS).map((r) => r.lastByteAt);
    if (writes.length !== RUNS || presses.length !== RUNS) throw new Error(`expected ${RUNS} presses, got ${presses.length} and ${writes.length} writes`);
    console.log(`${RUNS} presses of an NEC key from a python3 test script, over a control socket, KeyPresser, IR Toy transport, socat pty`);
    console.log(line('press() -> last byte written to the serial port', presses.map(([t0], i) => writes[i]! - t0)));
    console.log(line('press() -> last byte decoded by the fake IR Toy', presses.map(([t0], i) => decoded[i]! - t0)));
    console.log(line('press() call -> return (after the device reports C)', presses.map(([t0, t1]) => t1 - t0)));
    console.log(line('get_frame() 1280x720 -> numpy BGR array', frames));
    const ok = pct(presses.map(([t0], i) => writes[i]! - t0), 0.5) <= TARGET_MS && pct(frames, 0.5) <= TARGET_MS;
    console.log(`targets: medians <= ${TARGET_MS} ms -> ${ok ? 'met' : 'NOT met'}`);
  } finally {
    await control.close();
    await transport.close();
    await fake.stop();
    await pty.stop();
    await pack.cleanup();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
