/**
 * IR Toy transport benchmark: `node --import tsx bench/ir-bench.ts`.
 * Sends a hand-built NEC frame (9000/4500 header, 32 bits of 560/560 or
 * 560/1690, trailing 560: about 68 ms of IR) 50 times over a socat pty pair
 * to the fake IR Toy process, which answers at once (no emit time). Prints
 * the median, p90 and max of:
 *   - send() -> the last byte (the chunk ending 0xFFFF) written to the serial port (target <= 20 ms);
 *   - send() -> the fake device decoding that last byte (other process, wall clock);
 *   - send() -> send() resolved (after the device's t/count/C report);
 * plus the first send (port open and device set-up) and the worst timing
 * error of the decoded durations.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IrToyTransport } from '../src/hardware/ir/transports/irtoy.js';
import { SAMPLE_US } from '../src/hardware/ir/transports/irtoy-protocol.js';
import type { IrTrain } from '../src/hardware/ir/transports/types.js';
import { startFakeIrToy, startPtyPair } from '../test/fixtures/fakeIrToy.js';
import { timedPortClass } from './lib/timedPort.js';

const RUNS = 50;
const TARGET_MS = 20;

/** Time of the last completed write that ended a data block (0xFF 0xFF). */
let lastTerminatorWrite = 0;

const TimedPort = timedPortClass(() => (lastTerminatorWrite = performance.now()));

function necFrame(address: number, command: number): IrTrain {
  const bits = ((address & 0xff) | ((~address & 0xff) << 8) | ((command & 0xff) << 16) | ((~command & 0xff) << 24)) >>> 0;
  const durations = [9000, 4500];
  for (let i = 0; i < 32; i++) durations.push(560, (bits >>> i) & 1 ? 1690 : 560); // LSB first
  durations.push(560);
  return { frequency: 38000, dutyCycle: 33, durations, gap: 40000 };
}

const sorted = (xs: number[]): number[] => [...xs].sort((a, b) => a - b);
const pct = (xs: number[], p: number): number => sorted(xs)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;
const line = (name: string, xs: number[]): string =>
  `${name.padEnd(44)} median ${pct(xs, 0.5).toFixed(2)} ms   p90 ${pct(xs, 0.9).toFixed(2)} ms   max ${Math.max(...xs).toFixed(2)} ms`;

async function main(): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'farmhand-ir-bench-'));
  const pty = await startPtyPair(dir);
  const fake = await startFakeIrToy(pty.b);
  const t = new IrToyTransport(pty.a, {}, TimedPort);
  const frame = necFrame(0x04, 0x08);
  const irMs = frame.durations.reduce((a, b) => a + b, 0) / 1000;
  try {
    const t0 = performance.now();
    await t.send([frame]);
    const first = performance.now() - t0;
    await fake.next();
    const toWritten: number[] = [];
    const toDecoded: number[] = [];
    const toResolved: number[] = [];
    let worstErrUs = 0;
    for (let i = 0; i < RUNS; i++) {
      await new Promise((r) => setTimeout(r, 50)); // past the frame's 40 ms gap, so no send waits for it
      const start = performance.now();
      await t.send([frame]);
      toResolved.push(performance.now() - start);
      toWritten.push(lastTerminatorWrite - start);
      const r = await fake.next();
      toDecoded.push(r.lastByteAt - (performance.timeOrigin + start));
      r.durations.forEach((d, j) => (worstErrUs = Math.max(worstErrUs, Math.abs(d - frame.durations[j]!))));
    }
    console.log(`NEC frame: ${frame.durations.length} durations, ${irMs.toFixed(1)} ms of IR, ${frame.durations.length * 2 + 2} bytes; ${RUNS} sends over a pty`);
    console.log(`first send (open + reset/v/s set-up + transmit): ${first.toFixed(1)} ms`);
    console.log(line('send() -> last byte written to the port', toWritten));
    console.log(line('send() -> last byte decoded by the fake', toDecoded));
    console.log(line('send() -> resolved (t/count/C received)', toResolved));
    console.log(`worst decoded timing error: ${worstErrUs.toFixed(2)} us (one step is ${SAMPLE_US.toFixed(2)} us)`);
    const med = pct(toWritten, 0.5);
    console.log(`target: median <= ${TARGET_MS} ms -> ${med <= TARGET_MS ? 'met' : 'NOT met'}`);
  } finally {
    await t.close();
    await fake.stop();
    await pty.stop();
    await rm(dir, { recursive: true, force: true });
  }
}

await main();
