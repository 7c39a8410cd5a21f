// CecTransport runs cec-ctl: the exact arguments of a press, a hold, standby and power-on (a stand-in checks
// and records them; no CEC adapter here), a NACK as a warning, an unconfigured adapter, failures and timeouts.
import { expect } from 'chai';
import { CecTransport, createIrTransport } from '../../src/hardware/ir/transports/index.js';
import { parseCecCtl } from '../../src/hardware/ir/transports/cec.js';
import { capturingLogger } from '../helpers/logger.js';
import { farmRejection } from '../helpers/rejections.js';
import { waitFor } from '../helpers/wait.js';
import { makeCecStandIn, type CecStandIn } from './cec-ctl-standin.js';

const D = '-d /dev/cec0 -s';

describe('CecTransport (cec-ctl stand-in)', () => {
  let cec: CecStandIn;
  let t: CecTransport;

  beforeEach(async () => {
    cec = await makeCecStandIn();
    t = createIrTransport('cec:/dev/cec0', { cecCtl: cec.bin, timeoutMs: 3000 }) as CecTransport;
  });
  afterEach(async () => {
    await t?.close();
    await cec?.cleanup();
  });

  it('a press is User Control Pressed + Released to Playback Device 1 in one cec-ctl run', async () => {
    await t.sendKey('any', 'KEY_OK');
    await t.sendKey('any', 'key_channelup');
    await t.sendKey('any', 'f2-red');
    await t.sendKey('any', 'KEY_0');
    expect(await cec.calls()).to.deep.equal(
      ['select', 'channel-up', 'f2-red', 'number-0-or-number-10'].map((ui) => `${D} --to 4 --user-control-pressed ui-cmd=${ui} --user-control-released`),
    );
  });

  it('standby and power-on; ?to=0 (a TV) wakes with Image View On', async () => {
    await t.sendKey('any', 'KEY_STANDBY');
    await t.powerOn();
    const tv = new CecTransport('/dev/cec1?to=0', { cecCtl: cec.bin });
    await tv.sendKey('any', 'KEY_POWERON');
    await tv.standby();
    expect(tv.uri).to.equal('cec:/dev/cec1?to=0');
    await tv.close();
    expect(await cec.calls()).to.deep.equal([
      `${D} --to 4 --standby`,
      `${D} --to 4 --user-control-pressed ui-cmd=power-on-function --user-control-released`,
      '-d /dev/cec1 -s --to 0 --image-view-on',
      '-d /dev/cec1 -s --to 0 --standby',
    ]);
  });

  it('a hold repeats User Control Pressed until the release, then sends Released', async () => {
    const release = new AbortController();
    let down = false;
    const held = t.holdKey('any', 'KEY_VOLUMEUP', { maxMs: 60_000, signal: release.signal, onDown: () => (down = true) });
    // The first repeat has gone out (two runs: pressed, pressed again) before the release.
    await waitFor(async () => ((await cec.calls()).length >= 2 ? true : undefined), { what: 'a repeated User Control Pressed', timeoutMs: 10_000 });
    release.abort();
    await held;
    const calls = await cec.calls();
    expect(down).to.equal(true);
    expect(calls.at(-1)).to.equal(`${D} --to 4 --user-control-released`);
    expect(calls.slice(0, -1)).to.have.length.at.least(2);
    for (const c of calls.slice(0, -1)) expect(c).to.equal(`${D} --to 4 --user-control-pressed ui-cmd=volume-up`);
  });

  it('a NACK is a warning: the press succeeds and the log says so', async () => {
    const logger = capturingLogger();
    await t.close();
    t = new CecTransport('/dev/cec0', { cecCtl: cec.bin, logger });
    await cec.setMode('nack');
    await t.sendKey('any', 'KEY_UP');
    const warn = logger.entries.find((l) => l.level === 'warn');
    expect(warn?.msg).to.match(/did not acknowledge/);
  });

  it('an adapter without a logical address is configured (--tv) once, and the press sent', async () => {
    await cec.setMode('unconfigured');
    await t.sendKey('any', 'KEY_DOWN');
    await t.sendKey('any', 'KEY_DOWN');
    expect(await cec.calls()).to.deep.equal([
      `${D} --to 4 --user-control-pressed ui-cmd=down --user-control-released`,
      `${D} --tv --osd-name farmhand`,
      `${D} --to 4 --user-control-pressed ui-cmd=down --user-control-released`,
      `${D} --to 4 --user-control-pressed ui-cmd=down --user-control-released`,
    ]);
  });

  it('a missing device, another bus error, a missing cec-ctl and a hang are device_unavailable', async () => {
    await cec.setMode('nodevice');
    const open = await farmRejection(t.sendKey('any', 'KEY_OK'));
    expect(open).to.include({ code: 'device_unavailable' });
    expect(open.message).to.match(/Failed to open \/dev\/cec0/);
    await cec.setMode('arblost');
    expect((await farmRejection(t.sendKey('any', 'KEY_OK'))).message).to.match(/Arbitration Lost/);
    const missing = new CecTransport('/dev/cec0', { cecCtl: '/nonexistent/cec-ctl' });
    expect((await farmRejection(missing.sendKey('any', 'KEY_OK'))).message).to.match(/not found: install v4l-utils/);
    await cec.setMode('hang');
    const slow = new CecTransport('/dev/cec0', { cecCtl: cec.bin, timeoutMs: 300 });
    const e = await farmRejection(slow.sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.match(/did not finish within 300 ms/);
  });

  it('an unknown key is invalid_request and cec-ctl is not run', async () => {
    for (const k of ['KEY_NOSUCH', 'selec', 'KEY_A']) expect((await farmRejection(t.sendKey('any', k))).code, k).to.equal('invalid_request');
    expect(await cec.calls()).to.deep.equal([]);
  });

  it('bad URIs are refused at creation', () => {
    for (const u of ['cec:dev/cec0', 'cec:/dev/cec0?to=15', 'cec:/dev/cec0?to=x', 'cec:/dev/cec0?from=1', 'cec:/dev/cec0;rm']) {
      expect(() => createIrTransport(u), u).to.throw().with.property('code', 'invalid_request');
    }
    expect(createIrTransport('cec:').uri).to.equal('cec:/dev/cec0');
  });

  it('parseCecCtl counts messages tried and sent, and keeps the status lines of failures', () => {
    const out = '\nTransmit from TV to Playback Device 1 (0 to 4):\nSTANDBY (0x36):\n\tSequence: 7 Tx Timestamp: 1.2s\n\tTx, Not Acknowledged (4), Max Retries\n\nTransmit from TV to Playback Device 1 (0 to 4):\nSTANDBY (0x36):\n';
    expect(parseCecCtl(out)).to.deep.equal({ transmitted: 2, sent: 1, problems: ['Tx, Not Acknowledged (4), Max Retries'] });
  });
});
