/**
 * Power-cycles: `node --import tsx bench/power-cycle-bench.ts [--cycles N] [--net-cycles M]`.
 *
 * 1. The virtual outlet (`power.uri` virtual:) cycled N times (default 1,000, off_secs 0):
 *    a) through the node's control path a test script uses: a python3 child calls
 *       `stbt.PDU().power_cycle(off_secs=0)` N times over a real control socket (ControlServer);
 *    b) through the driver directly (PowerOutlet.cycle).
 *    The virtual box's own log of mains transitions is counted: each cycle must be exactly one
 *    off and one on, in that order (0 lost, 0 doubled), and every request answered on.
 * 2. Cycle times (off, read back, on, read back) of the SNMP driver against net-snmp's snmpd
 *    (APC PowerNet-MIB emulated by a pass_persist script) and of each HTTP family against an
 *    HTTP outlet, all on loopback, M cycles each (default 100).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../src/core/ports.js';
import { createPowerOutlet, type PowerOutlet } from '../src/hardware/power/index.js';
import { createVirtualStb } from '../src/hardware/virtual/index.js';
import { ControlServer } from '../src/runner/control.js';
import { projectRoot } from '../src/version.js';
import { startHttpOutlets, startSnmpd } from '../test/unit/power-peers.js';

const arg = (name: string, dflt: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const CYCLES = arg('cycles', 1000);
const NET_CYCLES = arg('net-cycles', 100);

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
const pct = (xs: number[], p: number): number => sorted(xs)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const describe = (xs: number[]): string => `median ${pct(xs, 0.5).toFixed(2)}  p90 ${pct(xs, 0.9).toFixed(2)}  max ${Math.max(...xs).toFixed(2)} ms`;

/** The virtual box with a logger that keeps each mains transition it logs. */
function countedBox() {
  const transitions: boolean[] = [];
  const noop = (): void => undefined;
  const logger: Logger = {
    debug: noop,
    warn: noop,
    error: noop,
    info: (o, msg) => {
      if (msg === 'virtual set-top box: mains power') transitions.push((o as { on: boolean }).on);
    },
    child: () => logger,
  };
  const stb = createVirtualStb({ width: 64, height: 36, fps: 1, logger });
  return { stb, transitions };
}

/** Lost: a cycle with no off or no on; doubled: a transition more than one off and one on per cycle. */
function verdict(what: string, cycles: number, transitions: boolean[], answeredOn: number): boolean {
  const pairs = transitions.filter((on, i) => !on && transitions[i + 1] === true).length;
  const lost = cycles - Math.min(cycles, pairs);
  const doubled = transitions.length - 2 * pairs;
  const ok = lost === 0 && doubled === 0 && answeredOn === cycles && pairs === cycles;
  console.log(`${what}: ${cycles} cycles, ${transitions.length} mains transitions (${pairs} off->on pairs), answered on ${answeredOn}: lost ${lost}, doubled ${doubled} -> ${ok ? 'met' : 'NOT met'}`);
  return ok;
}

const SCRIPT = `
import json, time
from stbt_core._power import PDU
pdu, ok, times = PDU(), 0, []
for _ in range(${CYCLES}):
    t = time.monotonic()
    pdu.power_cycle(off_secs=0)
    times.append((time.monotonic() - t) * 1000)
    ok += pdu.get() is True
print(json.dumps({"on": ok, "times": times}), flush=True)
`;

async function throughControlSocket(): Promise<boolean> {
  const dir = await mkdtemp(join(tmpdir(), 'farmhand-power-bench-'));
  const { stb, transitions } = countedBox();
  const control = new ControlServer({ keys: { press: async () => undefined }, latestFrame: () => undefined, tmpDir: dir, power: createPowerOutlet('virtual:', { virtualStb: stb })! });
  try {
    const channel = await control.open({ resultDir: dir, testPackSha: 'a'.repeat(40), remote: null });
    const child = spawn('/usr/bin/python3', ['-c', SCRIPT], { env: { ...process.env, ...channel.env, PYTHONPATH: join(projectRoot, 'python') }, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    await channel.close();
    if (code !== 0) throw new Error(`the Python script exited with ${String(code)}`);
    const r = JSON.parse(out) as { on: number; times: number[] };
    const ok = verdict('virtual: via stbt.PDU().power_cycle() over the control socket', CYCLES, transitions, r.on);
    console.log(`  one cycle, Python call to answer: ${describe(r.times)}`);
    return ok;
  } finally {
    stb.stop();
    await control.close();
    await rm(dir, { recursive: true, force: true });
  }
}

async function timedCycles(outlet: PowerOutlet, n: number): Promise<{ times: number[]; on: number }> {
  const times: number[] = [];
  let on = 0;
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    if (await outlet.cycle(0)) on += 1;
    times.push(performance.now() - t);
  }
  return { times, on };
}

async function throughDriver(): Promise<boolean> {
  const { stb, transitions } = countedBox();
  try {
    const r = await timedCycles(createPowerOutlet('virtual:', { virtualStb: stb })!, CYCLES);
    const ok = verdict('virtual: PowerOutlet.cycle() directly', CYCLES, transitions, r.on);
    console.log(`  one cycle: ${describe(r.times)}`);
    return ok;
  } finally {
    stb.stop();
  }
}

async function networkCycles(): Promise<void> {
  const agent = await startSnmpd();
  const http = await startHttpOutlets();
  try {
    const uris = [
      `snmp://private@127.0.0.1:${agent.port}/1`,
      `snmp://private@127.0.0.1:${agent.port}/2?version=2c&mib=apc-spdu`,
      `netio+http://127.0.0.1:${http.port}/1`,
      `aviosys+http://127.0.0.1:${http.port}/2`,
      `shelly+http://127.0.0.1:${http.port}/2`,
      `shelly2+http://127.0.0.1:${http.port}/3`,
      `tasmota+http://127.0.0.1:${http.port}/5`,
    ];
    console.log(`network drivers on loopback, ${NET_CYCLES} cycles each (off_secs 0; each cycle is a set, a read-back, a set, a read-back):`);
    for (const uri of uris) {
      const r = await timedCycles(createPowerOutlet(uri)!, NET_CYCLES);
      console.log(`  ${uri.replace(/\d+\//, 'PORT/').padEnd(52)} ${describe(r.times)}  (answered on ${r.on}/${NET_CYCLES})`);
    }
    const sets = (await agent.sets()).length;
    console.log(`  snmpd took ${sets} SETs for ${2 * 2 * NET_CYCLES} asked`);
  } finally {
    await agent.stop();
    await http.stop();
  }
}

const a = await throughControlSocket();
const b = await throughDriver();
await networkCycles();
console.log(`${CYCLES.toLocaleString('en')} power-cycles of the virtual outlet, 0 lost or doubled: ${a && b ? 'met' : 'NOT met'}`);
