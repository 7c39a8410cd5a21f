// CecTransport through its resident helper (cec-helper.ts, python3 doing the CEC ioctls): the exact bytes of a
// press, a hold, standby and power-on as the kernel receives them (a stand-in adapter in place of the kernel's
// CEC device: no CEC adapter here), a NACK as a warning, an unconfigured adapter (configured with cec-ctl, a
// stand-in that checks its arguments), failures, timeouts and aborts; and the real kernel's answers for a
// device node that is missing or not a CEC adapter.
import { expect } from 'chai';
import { CecTransport, createIrTransport } from '../../src/hardware/ir/transports/index.js';
import { capturingLogger } from '../helpers/logger.js';
import { farmRejection } from '../helpers/rejections.js';
import { waitFor } from '../helpers/wait.js';
import { makeCecStandIn, type CecStandIn } from './cec-ctl-standin.js';

describe('CecTransport (resident helper, stand-in adapter)', () => {
  let cec: CecStandIn;
  let t: CecTransport;
  const make = (rest = '/dev/cec0', more: Record<string, unknown> = {}) => new CecTransport(rest, { cecCtl: cec.bin, python: cec.python, timeoutMs: 5000, ...more });

  beforeEach(async () => {
    cec = await makeCecStandIn();
    t = make();
  });
  afterEach(async () => {
    await t?.close();
    await cec?.cleanup();
  });

  it('a press is User Control Pressed + Released from the adapter (TV, 0) to Playback Device 1 (4); no cec-ctl run', async () => {
    await t.sendKey('any', 'KEY_OK');
    await t.sendKey('any', 'key_channelup');
    await t.sendKey('any', 'f2-red');
    await t.sendKey('any', 'KEY_0');
    // <User Control Pressed> is opcode 0x44 with the UI command (select 0x00, channel-up 0x30, f2-red 0x72,
    // number-0 0x20); <User Control Released> is 0x45 alone.
    expect(await cec.transmits()).to.deep.equal(['00', '30', '72', '20'].flatMap((ui) => [`/dev/cec0 04:44:${ui}`, '/dev/cec0 04:45']));
    expect(await cec.calls()).to.deep.equal([]);
  });

  it('standby and power-on; ?to=0 (a TV) wakes with Image View On', async () => {
    await t.sendKey('any', 'KEY_STANDBY');
    await t.powerOn();
    await cec.setLogicalAddress(4); // the adapter plays a playback device when the device under test is the TV
    const tv = make('/dev/cec1?to=0');
    await tv.sendKey('any', 'KEY_POWERON');
    await tv.standby();
    expect(tv.uri).to.equal('cec:/dev/cec1?to=0');
    await tv.close();
    expect(await cec.transmits()).to.deep.equal(['/dev/cec0 04:36', '/dev/cec0 04:44:6d', '/dev/cec0 04:45', '/dev/cec1 40:04', '/dev/cec1 40:36']);
  });

  it('a hold repeats User Control Pressed until the release, then sends Released', async () => {
    const release = new AbortController();
    let down = false;
    const held = t.holdKey('any', 'KEY_VOLUMEUP', { maxMs: 60_000, signal: release.signal, onDown: () => (down = true) });
    // The first repeat has gone out (pressed, pressed again) before the release.
    await waitFor(async () => ((await cec.transmits()).length >= 2 ? true : undefined), { what: 'a repeated User Control Pressed', timeoutMs: 10_000 });
    release.abort();
    await held;
    const sent = await cec.transmits();
    expect(down).to.equal(true);
    expect(sent.at(-1)).to.equal('/dev/cec0 04:45');
    expect(sent.slice(0, -1)).to.have.length.at.least(2);
    for (const m of sent.slice(0, -1)) expect(m).to.equal('/dev/cec0 04:44:41');
  });

  it('a NACK is a warning: the press succeeds and the log says so', async () => {
    const logger = capturingLogger();
    await t.close();
    t = make('/dev/cec0', { logger });
    await cec.setMode('nack');
    await t.sendKey('any', 'KEY_UP');
    const warn = logger.entries.find((l) => l.level === 'warn');
    expect(warn?.msg).to.match(/did not acknowledge/);
    expect(JSON.stringify(warn)).to.match(/not acknowledged, max retries/);
  });

  it('an adapter without a logical address is configured (--tv) once, and the press sent', async () => {
    await cec.setMode('unconfigured');
    await t.sendKey('any', 'KEY_DOWN');
    await t.sendKey('any', 'KEY_DOWN');
    expect(await cec.calls()).to.deep.equal(['-d /dev/cec0 -s --tv --osd-name farmhand']);
    expect(await cec.transmits()).to.deep.equal(['/dev/cec0 04:44:02', '/dev/cec0 04:45', '/dev/cec0 04:44:02', '/dev/cec0 04:45']);
  });

  it('a TV as the target: the adapter is configured as a playback device (--playback)', async () => {
    await cec.setMode('unconfigured');
    const tv = make('/dev/cec0?to=0');
    await tv.sendKey('any', 'KEY_OK');
    await tv.close();
    expect(await cec.calls()).to.deep.equal(['-d /dev/cec0 -s --playback --osd-name farmhand']);
    expect(await cec.transmits()).to.deep.equal(['/dev/cec0 40:44:00', '/dev/cec0 40:45']);
  });

  it('a missing device, another bus error, a missing python3 or cec-ctl and a hang are device_unavailable', async () => {
    await cec.setMode('nodevice');
    const open = await farmRejection(t.sendKey('any', 'KEY_OK'));
    expect(open).to.include({ code: 'device_unavailable' });
    expect(open.message).to.match(/Failed to open \/dev\/cec0: No such file or directory/);
    await cec.setMode('arblost'); // the next press starts a new helper, which opens the device again
    expect((await farmRejection(t.sendKey('any', 'KEY_OK'))).message).to.match(/could not send to logical address 4: arbitration lost, max retries/);
    const noPython = make('/dev/cec0', { python: '/nonexistent/python3' });
    expect((await farmRejection(noPython.sendKey('any', 'KEY_OK'))).message).to.match(/\/nonexistent\/python3 was not found/);
    await cec.setMode('unconfigured');
    const noCecCtl = make('/dev/cec0', { cecCtl: '/nonexistent/cec-ctl' });
    expect((await farmRejection(noCecCtl.sendKey('any', 'KEY_OK'))).message).to.match(/not found: install v4l-utils/);
    await Promise.all([noPython.close(), noCecCtl.close()]);
    await cec.setMode('hang');
    const slow = make('/dev/cec0', { timeoutMs: 300 });
    const e = await farmRejection(slow.sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.match(/did not finish within 300 ms/);
    await cec.setMode('ok'); // the stuck helper was killed: the next press has a new one
    await slow.sendKey('any', 'KEY_OK');
    await slow.close();
  });

  it('an aborted press ends the helper; the next press starts another', async () => {
    await cec.setMode('hang');
    const abort = new AbortController();
    const pressing = t.sendKey('any', 'KEY_LEFT', { signal: abort.signal });
    await waitFor(async () => ((await cec.transmits()).length >= 1 ? true : undefined), { what: 'the transmit under way', timeoutMs: 10_000 });
    abort.abort(new Error('released'));
    await pressing.then(() => expect.fail('the press resolved'), (err: Error) => expect(err.message).to.equal('released'));
    await cec.setMode('ok');
    await t.sendKey('any', 'KEY_RIGHT');
    expect(await cec.transmits()).to.deep.equal(['/dev/cec0 04:44:03', '/dev/cec0 04:44:04', '/dev/cec0 04:45']);
  });

  it('an unknown key is invalid_request and nothing is sent', async () => {
    for (const k of ['KEY_NOSUCH', 'selec', 'KEY_A']) expect((await farmRejection(t.sendKey('any', k))).code, k).to.equal('invalid_request');
    expect(await cec.transmits()).to.deep.equal([]);
    expect(await cec.calls()).to.deep.equal([]);
  });

  it('bad URIs are refused at creation', () => {
    for (const u of ['cec:dev/cec0', 'cec:/dev/cec0?to=15', 'cec:/dev/cec0?to=x', 'cec:/dev/cec0?from=1', 'cec:/dev/cec0;rm']) {
      expect(() => createIrTransport(u), u).to.throw().with.property('code', 'invalid_request');
    }
    expect(createIrTransport('cec:').uri).to.equal('cec:/dev/cec0');
  });
});

describe('CecTransport on the real kernel (Debian python3, no CEC adapter)', () => {
  it('a device node that is missing, or is not a CEC adapter, is device_unavailable saying so', async () => {
    const missing = new CecTransport('/dev/no-such-cec9', { timeoutMs: 10_000 });
    expect((await farmRejection(missing.sendKey('any', 'KEY_OK'))).message).to.match(/Failed to open \/dev\/no-such-cec9: No such file or directory/);
    const notCec = new CecTransport('/dev/null', { timeoutMs: 10_000 });
    const e = await farmRejection(notCec.sendKey('any', 'KEY_OK'));
    expect(e).to.include({ code: 'device_unavailable' });
    expect(e.message).to.match(/\/dev\/null is not a CEC device/);
    await Promise.all([missing.close(), notCec.close()]);
  });
});
