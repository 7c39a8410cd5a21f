// createIrTransport picks a transport by URI; the virtual and none transports.
import { expect } from 'chai';
import {
  IrToyTransport, LircdTransport, NoTransport, VirtualTransport, createIrTransport, type VirtualIrEvent,
} from '../../src/hardware/ir/transports/index.js';
import type { IrTrain } from '../../src/hardware/ir/transports/types.js';
import { rejection } from '../helpers/rejections.js';

const nec: IrTrain = { frequency: 38000, dutyCycle: 33, durations: [9000, 4500, 560], gap: 40000 };


describe('createIrTransport', () => {
  it('irtoy:/dev/ttyACM0, lircd:/run/lirc/lircd, virtual:, none', async () => {
    const all = ['irtoy:/dev/ttyUSB3', 'lircd:/tmp/x.sock', 'virtual:', 'none'].map((u) => createIrTransport(u));
    expect(all[0]).to.be.instanceOf(IrToyTransport).and.include({ path: '/dev/ttyUSB3', uri: 'irtoy:/dev/ttyUSB3' });
    expect(all[1]).to.be.instanceOf(LircdTransport).and.include({ socketPath: '/tmp/x.sock' });
    expect(all[2]).to.be.instanceOf(VirtualTransport);
    expect(all[3]).to.be.instanceOf(NoTransport);
    for (const t of all) await t.close();
  });

  it('an empty path means the usual device: /dev/ttyACM0, /run/lirc/lircd', async () => {
    const toy = createIrTransport('irtoy:');
    const lircd = createIrTransport('lircd:');
    expect(toy.uri).to.equal('irtoy:/dev/ttyACM0');
    expect(lircd.uri).to.equal('lircd:/run/lirc/lircd');
    await toy.close();
    await lircd.close();
  });

  it('an unknown scheme or a relative path is invalid_request', () => {
    for (const u of ['serial:/dev/ttyACM0', 'irtoy:ttyACM0', '', 'virtual']) {
      expect(() => createIrTransport(u), u).to.throw().with.property('code', 'invalid_request');
    }
  });

  it('none: send -> FarmError("device_unavailable", "no IR blaster configured")', async () => {
    const e = await rejection(createIrTransport('none').send([nec]));
    expect(e).to.include({ code: 'device_unavailable', message: 'no IR blaster configured' });
  });
});

describe('VirtualTransport', () => {
  it('hands each send, with its key label, to the listeners', async () => {
    const seen: VirtualIrEvent[] = [];
    const t = createIrTransport('virtual:', { onVirtualEvent: (e) => seen.push(e) }) as VirtualTransport;
    const more: VirtualIrEvent[] = [];
    const off = t.subscribe((e) => more.push(e));
    await t.send([nec], { key: { remote: 'stb', key: 'KEY_OK' } });
    off();
    await t.send([nec, nec]);
    expect(seen.map((e) => [e.trains.length, e.key?.key])).to.deep.equal([[1, 'KEY_OK'], [2, undefined]]);
    expect(more).to.have.length(1);
    await t.close();
  });

  it('checks trains like the real transports, and a throwing listener does not fail the send', async () => {
    const t = new VirtualTransport(() => {
      throw new Error('device bug');
    });
    await t.send([nec]);
    const e = await rejection(t.send([{ ...nec, durations: [Number.NaN] }]));
    expect(e).to.include({ code: 'invalid_request' });
    await t.close();
    expect(await rejection(t.send([nec]))).to.include({ code: 'device_unavailable' });
  });

  it('an aborted signal rejects with its reason', async () => {
    const t = new VirtualTransport();
    const e = await rejection(t.send([nec], { signal: AbortSignal.abort(new Error('stop')) }));
    expect((e as Error).message).to.equal('stop');
  });
});
