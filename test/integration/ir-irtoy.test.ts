// IrToyTransport over real bytes: socat makes a pty pair, the fake IR Toy
// (a separate node process with serialport on the far end) decodes what
// arrives back to microseconds.
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IrToyTransport } from '../../src/hardware/ir/transports/irtoy.js';
import { SAMPLE_US } from '../../src/hardware/ir/transports/irtoy-protocol.js';
import type { IrTrain } from '../../src/hardware/ir/transports/types.js';
import { startFakeIrToy, startPtyPair, type FakeIrToyProcess, type PtyPair } from '../fixtures/fakeIrToy.js';
import { rejection } from '../helpers/rejections.js';

/** An NEC frame built by hand: 9000/4500 header, 32 bits of 560/560 or 560/1690, trailing 560. */
function necFrame(code: number): IrTrain {
  const durations = [9000, 4500];
  for (let i = 31; i >= 0; i--) durations.push(560, (code >>> i) & 1 ? 1690 : 560);
  durations.push(560);
  return { frequency: 38000, dutyCycle: 33, durations, gap: 40000 };
}


/** Each decoded duration within one 21.33 us step of the one sent. */
function expectWithinOneStep(got: number[], want: number[]): void {
  expect(got).to.have.length(want.length);
  got.forEach((d, i) => expect(Math.abs(d - want[i]!), `duration ${i}`).to.be.at.most(SAMPLE_US));
}

describe('IrToyTransport over a pty pair (fake IR Toy process)', function () {
  this.timeout(20000);
  let dir: string;
  let pty: PtyPair;
  let fake: FakeIrToyProcess | undefined;
  const transports: IrToyTransport[] = [];
  const open = (opts = {}): IrToyTransport => {
    const t = new IrToyTransport(pty.a, opts);
    transports.push(t);
    return t;
  };

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-irtoy-'));
    pty = await startPtyPair(dir);
  });

  afterEach(async () => {
    for (const t of transports.splice(0)) await t.close();
    await fake?.stop();
    fake = undefined;
    await pty.stop();
    await rm(dir, { recursive: true, force: true });
  });

  it('an NEC frame arrives with each duration within one 21.33 us step, at 38 kHz', async () => {
    fake = await startFakeIrToy(pty.b);
    const t = open();
    const frame = necFrame(0x20df10ef);
    await t.send([frame]);
    const r = await fake.next();
    expectWithinOneStep(r.durations, frame.durations);
    expect(r.pr2).to.equal(78);
    expect(r.frequency).to.be.closeTo(38000, 300);
    expect(r.bytes).to.equal(frame.durations.length * 2 + 2);
  });

  it('a frame and its repeat go out as one transmission with the gap between them', async () => {
    fake = await startFakeIrToy(pty.b);
    const t = open();
    const frame = necFrame(0x00ff00ff);
    const repeat: IrTrain = { frequency: 38000, dutyCycle: 33, durations: [9000, 2250, 560], gap: 96000 };
    await t.send([frame, repeat]);
    const r = await fake.next();
    expectWithinOneStep(r.durations, [...frame.durations, frame.gap, ...repeat.durations]);
  });

  it('sends queue up: three concurrent sends arrive whole and in order', async () => {
    fake = await startFakeIrToy(pty.b);
    const t = open();
    const frames = [0x1, 0x2, 0x3].map((c) => ({ ...necFrame(c), gap: 0 }));
    await Promise.all(frames.map((f) => t.send([f])));
    for (const f of frames) expectWithinOneStep((await fake.next()).durations, f.durations);
  });

  it('a device that goes silent -> device_unavailable within the timeout', async () => {
    fake = await startFakeIrToy(pty.b, 'silent');
    const t = open({ timeoutMs: 300 });
    // A timeout that did not fire would hang the send and time the test out.
    const e = await rejection(t.send([necFrame(1)]));
    expect(e).to.include({ code: 'device_unavailable' });
  });

  it('a device that goes silent once asked to transmit -> device_unavailable within the timeout', async () => {
    fake = await startFakeIrToy(pty.b, 'silent-on-transmit');
    const t = open({ timeoutMs: 300 });
    // A timeout that did not fire would hang the send and time the test out.
    const e = await rejection(t.send([necFrame(1)]));
    expect(e).to.include({ code: 'device_unavailable' });
  });

  it('the device going away and coming back: the send fails, the next one after its return works', async () => {
    fake = await startFakeIrToy(pty.b);
    const t = open({ timeoutMs: 2000 }); // each step goes through socat and a separate process: room for a loaded machine
    await t.send([necFrame(1)]);
    await fake.next();
    await fake.stop();
    expect(await rejection(t.send([necFrame(2)]))).to.include({ code: 'device_unavailable' });
    fake = await startFakeIrToy(pty.b);
    await t.send([necFrame(3)]);
    expectWithinOneStep((await fake.next()).durations, necFrame(3).durations);
  });

  it('a missing port path -> device_unavailable naming the port', async () => {
    const t = new IrToyTransport(join(dir, 'no-such-tty'));
    transports.push(t);
    const e = await rejection(t.send([necFrame(1)]));
    expect(e).to.include({ code: 'device_unavailable' });
    expect((e as Error).message).to.contain(join(dir, 'no-such-tty'));
  });
});
