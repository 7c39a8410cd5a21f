/**
 * Key presses by protocol, side by side: `node --import tsx bench/remote-protocols-bench.ts [--runs N]`.
 *
 * The node's press path (KeyPresser, as v2 and stbt.press use it) with four transports, interleaved press by
 * press so the machine's load falls on each alike:
 *   - IR on the virtual box: `virtual:` with the virtual set-top box listening, the key encoded from a
 *     lircd.conf remote (the IR path every other press is compared with);
 *   - Roku ECP: `roku:` against an ECP server on loopback (real HTTP, keep-alive);
 *   - HDMI-CEC: `cec:` through its resident helper (python3 doing the CEC_TRANSMIT ioctl), on the stand-in
 *     adapter of the tests (test/unit/cec-ctl-standin.ts: the same helper, the kernel's side faked in its
 *     interpreter). A real adapter adds the CEC bus's own time, about 75 ms per message, which no stand-in has;
 *   - the floor of a process per press: execFile('/bin/true'), what a press cost when it ran cec-ctl.
 * Prints median, p90 and max per transport and what ECP and CEC add over IR at the median.
 * Target: ECP and CEC stand-ins add <= 20 ms over the IR path.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { KeyPresser } from '../src/hardware/ir/keys.js';
import { CecTransport, createIrTransport } from '../src/hardware/ir/transports/index.js';
import type { IrTransport } from '../src/hardware/ir/transports/types.js';
import { createVirtualStb } from '../src/hardware/virtual/index.js';
import { necRemote } from '../test/fixtures/remotes.js';
import { makeCecStandIn } from '../test/unit/cec-ctl-standin.js';
import { startFakeEcp } from '../test/unit/roku-ecp-server.js';

const runsArg = process.argv.indexOf('--runs');
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 200;
const TARGET_MS = 20;
const SHA = 'a'.repeat(40);
const REMOTE = necRemote('bench', 0x10ef, { KEY_OK: 0x22dd, KEY_UP: 0x609f });

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
const pct = (xs: number[], p: number): number => sorted(xs)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const line = (name: string, xs: number[]): string =>
  `${name.padEnd(36)} median ${pct(xs, 0.5).toFixed(2).padStart(6)} ms   p90 ${pct(xs, 0.9).toFixed(2).padStart(6)} ms   max ${Math.max(...xs).toFixed(2).padStart(7)} ms`;

const testPack = {
  readFile: () => Promise.resolve(REMOTE),
  config: () => Promise.resolve({}),
  remoteControls: () => Promise.resolve(['bench']),
};

async function timed(press: () => Promise<unknown>): Promise<number> {
  const t0 = performance.now();
  await press();
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const stb = createVirtualStb({ width: 320, height: 240, fps: 5, animations: false });
  const ecp = await startFakeEcp();
  const cec = await makeCecStandIn();
  const transports: Record<string, IrTransport> = {
    'IR (virtual: box)': createIrTransport('virtual:', { onVirtualEvent: stb.transportListener }),
    'Roku ECP (loopback HTTP)': createIrTransport(`roku:${ecp.url}`),
    'HDMI-CEC (helper, stand-in adapter)': new CecTransport('/dev/cec0', { cecCtl: cec.bin, python: cec.python }),
  };
  const presser = Object.fromEntries(Object.entries(transports).map(([k, t]) => [k, new KeyPresser({ testPack, transport: t })]));
  const times: Record<string, number[]> = Object.fromEntries([...Object.keys(transports), 'process floor (/bin/true)'].map((k) => [k, []]));
  const run = promisify(execFile);
  for (let i = 0; i < RUNS + 5; i++) {
    const key = i % 2 ? 'KEY_OK' : 'KEY_UP';
    for (const [name, p] of Object.entries(presser)) {
      const ms = await timed(() => p.press(key, { remote: 'bench', testPackSha: SHA }));
      if (i >= 5) times[name]!.push(ms); // the first presses warm up parsing, sockets and the page cache
    }
    const floor = await timed(() => run('/bin/true'));
    if (i >= 5) times['process floor (/bin/true)']!.push(floor);
  }
  const transmits = (await cec.transmits()).length;
  console.log(`${RUNS} presses each, interleaved; load average ${(await import('node:os')).loadavg().map((x) => x.toFixed(1)).join(' ')}`);
  for (const [name, xs] of Object.entries(times)) console.log(line(name, xs));
  const ir = pct(times['IR (virtual: box)']!, 0.5);
  for (const name of ['Roku ECP (loopback HTTP)', 'HDMI-CEC (helper, stand-in adapter)']) {
    const added = pct(times[name]!, 0.5) - ir;
    console.log(`${name} adds ${added.toFixed(2)} ms over IR at the median: ${added <= TARGET_MS ? 'within' : 'OVER'} the ${TARGET_MS} ms target`);
  }
  console.log(`(ECP requests served: ${ecp.requests.length}; CEC messages transmitted: ${transmits}, cec-ctl runs: ${(await cec.calls()).length})`);
  for (const t of Object.values(transports)) await t.close();
  await ecp.close();
  await cec.cleanup();
  stb.stop();
}

await main();
