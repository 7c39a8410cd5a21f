// createIrTransport hands the configured python interpreter (the daemon's `runner.python`) to the CEC transport's
// resident helper: a press through the stand-in adapter's interpreter reaches its fake kernel (the only place a
// /dev/cec97 exists here); without the option, the helper runs under the default /usr/bin/python3.
import { expect } from 'chai';
import { CecTransport, createIrTransport } from '../../src/hardware/ir/transports/index.js';
import { farmRejection } from '../helpers/rejections.js';
import { makeCecStandIn, type CecStandIn } from './cec-ctl-standin.js';

describe('createIrTransport: the CEC helper runs under the python it is given', () => {
  let cec: CecStandIn;
  const open: CecTransport[] = [];
  const make = (opts: { python?: string } = {}) => {
    const t = createIrTransport('cec:/dev/cec97', { cecCtl: cec.bin, timeoutMs: 10_000, ...opts });
    expect(t).to.be.instanceOf(CecTransport);
    open.push(t as CecTransport);
    return t as CecTransport;
  };

  beforeEach(async () => {
    cec = await makeCecStandIn();
  });
  afterEach(async () => {
    for (const t of open.splice(0)) await t.close();
    await cec?.cleanup();
  });

  it("python: the stand-in's interpreter runs the helper, and the press reaches its adapter", async () => {
    await make({ python: cec.python }).sendKey('any', 'KEY_OK');
    expect(await cec.transmits()).to.deep.equal(['/dev/cec97 04:44:00', '/dev/cec97 04:45']);
  });

  it('a python that does not exist: the press fails naming it', async () => {
    const e = await farmRejection(make({ python: '/nonexistent/python3' }).sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.contain('/nonexistent/python3 was not found');
    expect(await cec.transmits()).to.deep.equal([]);
  });

  it("no python: the default /usr/bin/python3, which meets this machine's kernel (no /dev/cec97), not the stand-in", async () => {
    const e = await farmRejection(make().sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.contain('Failed to open /dev/cec97');
    expect(await cec.transmits()).to.deep.equal([]);
  });
});
