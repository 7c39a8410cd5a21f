// IrToyTransport against serialport's MockBinding: the exact bytes written,
// and the handling of the answers a (fake) device gives.
import { expect } from 'chai';
import { SerialPortMock } from 'serialport';
import { IrToyTransport, type PortClass } from '../../src/hardware/ir/transports/irtoy.js';
import { SAMPLE_US } from '../../src/hardware/ir/transports/irtoy-protocol.js';
import type { IrTrain } from '../../src/hardware/ir/transports/types.js';
import { FakeIrToyDevice, type FakeOptions, type TransmitReport } from '../fixtures/fakeIrToy.js';
import { rejection } from '../helpers/rejections.js';
import { waitFor } from '../helpers/wait.js';

const PATH = '/dev/fake-irtoy';
/** @serialport/binding-mock's MockBinding (its ESM entry has no type declarations; serialport re-exports it typed). */
const MockBinding = SerialPortMock.binding;

/** A mock port class whose writes reach a FakeIrToyDevice, whose answers come back as serial data. */
function scripted(opts: FakeOptions = {}) {
  const reports: TransmitReport[] = [];
  const ports: SerialPortMock[] = [];
  /** Each write the binding got, in order. */
  const writes: Buffer[] = [];
  let device: FakeIrToyDevice | undefined;
  class ScriptedPort extends SerialPortMock {
    constructor(o: { path: string; baudRate: number; autoOpen: false }) {
      super(o);
      ports.push(this);
      this.on('open', () => {
        const binding = this.port;
        if (!binding) throw new Error('mock port without binding');
        // A fresh device per open, as a replugged one would be.
        device = new FakeIrToyDevice(opts, (b) => setImmediate(() => binding.emitData(b)), (r) => reports.push(r));
        const write = binding.write.bind(binding);
        binding.write = async (buf: Buffer) => {
          await write(buf);
          writes.push(Buffer.from(buf));
          device?.feed(buf);
        };
      });
    }
  }
  /** Every byte the transport wrote, across reopenings. */
  const written = (): number[] => ports.flatMap((p) => [...(p.port?.recording ?? Buffer.alloc(0))]);
  /** Whether the current device is taking pulse data. */
  const transmitting = () => device?.transmitting ?? false;
  return { Port: ScriptedPort as PortClass, reports, ports, writes, written, transmitting };
}

const train = (durations: number[], gap = 0, frequency = 38000): IrTrain => ({ frequency, dutyCycle: 33, durations, gap });


describe('IrToyTransport (MockBinding)', () => {
  beforeEach(() => MockBinding.createPort(PATH, { echo: false, record: true }));
  afterEach(() => MockBinding.reset());

  it('initialises with reset x5, v, s, then sends carrier 0x06 PR2 0x00, 0x24 0x25 0x26 0x03, data and 0xFFFF', async () => {
    const s = scripted();
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    await t.send([train([9000, 4500, 560])]);
    await t.close();
    const c = (us: number): number[] => {
      const n = Math.round(us / SAMPLE_US);
      return [n >> 8, n & 0xff];
    };
    const pr2 = Math.round(48e6 / (16 * 38000) - 1); // 78
    expect(pr2).to.equal(78);
    expect(s.written()).to.deep.equal([
      0, 0, 0, 0, 0, 0x76, 0x73, // init
      0x06, 78, 0x00, 0x24, 0x25, 0x26, 0x03, // carrier + transmit
      ...c(9000), ...c(4500), ...c(560), 0xff, 0xff, // data
      0, 0, 0, 0, 0, // reset on close
    ]);
    expect(t.version).to.deep.equal({ hardware: 2, firmware: 22 });
  });

  it('frequency 0 means 38000 Hz; 36 kHz gives PR2 = round(48e6 / (16 f) - 1) = 82', async () => {
    const s = scripted();
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    await t.send([train([500, 500, 500], 0, 0)]);
    await t.send([train([500, 500, 500], 0, 36000)]);
    await t.close();
    expect(s.reports.map((r) => r.pr2)).to.deep.equal([78, 82]);
  });

  it('writes data in the chunks the device grants: 62 + 62 + 12 for 136 bytes', async () => {
    const s = scripted({ grant: 62 });
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    const durations = Array.from({ length: 67 }, (_, i) => (i % 2 ? 1690 : 560)); // 134 + 2 bytes
    await t.send([train(durations)]);
    await t.close();
    // reset, v, s, carrier + start, three chunks, reset on close
    expect(s.writes.map((w) => w.length)).to.deep.equal([5, 1, 1, 7, 62, 62, 12, 5]);
    expect([...(s.writes[6] ?? [])].slice(-2)).to.deep.equal([0xff, 0xff]);
    expect(s.reports).to.have.length(1);
    expect(s.reports[0]?.bytes).to.equal(136);
    expect(s.reports[0]?.counts).to.deep.equal(durations.map((d) => Math.round(d / SAMPLE_US)));
  });

  it('never writes more than the grant at once (grant of 10 bytes)', async () => {
    const s = scripted({ grant: 10 });
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    await t.send([train(Array.from({ length: 41 }, () => 600))]); // 84 bytes
    await t.close();
    expect(s.writes.slice(4, -1).map((w) => w.length)).to.deep.equal([10, 10, 10, 10, 10, 10, 10, 10, 4]);
    expect(s.reports[0]?.bytes).to.equal(84);
  });

  it('sends repeats with the same carrier in one transmission, the gap as a space', async () => {
    const s = scripted();
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    await t.send([train([9000, 4500, 560], 40000), train([9000, 2250, 560], 96000)]);
    await t.close();
    expect(s.reports).to.have.length(1);
    const got = s.reports[0]?.durations ?? [];
    const want = [9000, 4500, 560, 40000, 9000, 2250, 560];
    expect(got).to.have.length(want.length);
    got.forEach((d, i) => expect(Math.abs(d - (want[i] ?? 0))).to.be.at.most(SAMPLE_US / 2));
  });

  it('accepts a device that sends no handshake byte after the last chunk', async () => {
    const s = scripted({ skipFinalGrant: true });
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    await t.send([train([560, 560, 560])]);
    await t.send([train([560, 560, 560])]);
    await t.close();
    expect(s.reports).to.have.length(2);
  });

  it('an F answer (underrun) rejects with device_unavailable and the next send starts afresh', async () => {
    const s = scripted({ mode: 'fail' });
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    const e = await rejection(t.send([train([560, 560, 560])]));
    expect(e).to.include({ name: 'FarmError', code: 'device_unavailable' });
    expect((e as Error).message).to.match(/underrun/);
    await rejection(t.send([train([560])]));
    await t.close();
    expect(s.ports).to.have.length(2); // reopened after the failure
  });

  it('a byte count that differs from the bytes sent rejects with device_unavailable', async () => {
    const s = scripted({ mode: 'short-count' });
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    const e = await rejection(t.send([train([560, 560, 560])]));
    await t.close();
    expect(e).to.include({ code: 'device_unavailable' });
    expect((e as Error).message).to.match(/received 6 of the 8 bytes/);
  });

  it('a silent device rejects with device_unavailable within the timeout, never hangs', async () => {
    const s = scripted({ mode: 'silent' });
    const t = new IrToyTransport(PATH, { flushMs: 1, timeoutMs: 150 }, s.Port);
    // A timeout that did not fire would hang the send and time the test out.
    const e = await rejection(t.send([train([560])]));
    await t.close();
    expect(e).to.include({ code: 'device_unavailable' });
    expect((e as Error).message).to.contain(PATH);
  });

  it('a device that is not an IR Toy (wrong version answer) is device_unavailable', async () => {
    const s = scripted({ version: 'OK12' });
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    const e = await rejection(t.send([train([560])]));
    await t.close();
    expect(e).to.include({ code: 'device_unavailable' });
    expect((e as Error).message).to.match(/not an IR Toy/);
  });

  it('a missing port is device_unavailable with a message naming the port', async () => {
    const s = scripted();
    const t = new IrToyTransport('/dev/no-such-irtoy', {}, s.Port);
    const e = await rejection(t.send([train([560])]));
    await t.close();
    expect(e).to.include({ code: 'device_unavailable' });
    expect((e as Error).message).to.contain('/dev/no-such-irtoy');
  });

  it('an abort while queued behind another send rejects with the reason and sends nothing', async () => {
    const s = scripted();
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    const first = t.send([train([560, 560, 560])]);
    const ac = new AbortController();
    const second = t.send([train([560, 560, 560])], { signal: ac.signal });
    ac.abort(new Error('stop'));
    const e = await rejection(second);
    await first;
    await t.close();
    expect((e as Error).message).to.equal('stop');
    expect(s.reports).to.have.length(1);
  });

  it('an abort mid-transmission ends the data with 0xFFFF and resets the device', async () => {
    const s = scripted({ mode: 'silent-on-transmit' });
    const t = new IrToyTransport(PATH, { flushMs: 1, timeoutMs: 5000 }, s.Port);
    const ac = new AbortController();
    const p = t.send([train([560, 560, 560])], { signal: ac.signal });
    await waitFor(s.transmitting, 'the transmission to start');
    ac.abort();
    const e = await rejection(p);
    await t.close();
    expect((e as Error).name).to.equal('AbortError');
    expect(s.written().slice(-7)).to.deep.equal([0xff, 0xff, 0, 0, 0, 0, 0]);
  });

  it('unplugged mid-transmission -> device_unavailable at once, not after the timeout', async () => {
    const s = scripted({ mode: 'silent-on-transmit' });
    // A timeout longer than the test's own: only the unplugging can end this send in time.
    const t = new IrToyTransport(PATH, { flushMs: 1, timeoutMs: 600_000 }, s.Port);
    const p = t.send([train([560, 560, 560])]);
    await waitFor(s.transmitting, 'the transmission to start');
    s.ports[0]!.close(undefined, Object.assign(new Error('unplugged'), { disconnected: true }));
    const e = await rejection(p);
    expect(e).to.include({ code: 'device_unavailable' });
    expect((e as Error).message).to.match(/disconnected/);
    await t.close();
  });

  it('rejects what the IR Toy cannot send with invalid_request, before touching the port', async () => {
    const s = scripted();
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    const long = await rejection(t.send([train([560, 2_000_000, 560])]));
    const carrier = await rejection(t.send([train([560], 0, 5000)]));
    const nan = await rejection(t.send([train([560, Number.NaN, 560])]));
    await t.close();
    for (const e of [long, carrier, nan]) expect(e).to.include({ code: 'invalid_request' });
    expect(s.ports).to.have.length(0);
  });

  it('after close, send is device_unavailable', async () => {
    const s = scripted();
    const t = new IrToyTransport(PATH, { flushMs: 1 }, s.Port);
    await t.close();
    const e = await rejection(t.send([train([560])]));
    expect(e).to.include({ code: 'device_unavailable' });
  });
});
