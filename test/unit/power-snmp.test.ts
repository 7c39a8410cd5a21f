/**
 * The SNMP outlet driver against net-snmp's real snmpd on loopback, whose pass_persist script
 * emulates an APC PDU's outlet control OIDs (test/unit/power-peers.ts): switching, reading back,
 * cycling, both MIBs and both versions, and each fault a clear device_unavailable without a hang.
 */
import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { createPowerOutlet, type PowerOutlet } from '../../src/hardware/power/index.js';
import { startSnmpd, type SnmpPeer } from './power-peers.js';

const RPDU = '.1.3.6.1.4.1.318.1.1.12.3.3.1.1.4';
const SPDU = '.1.3.6.1.4.1.318.1.1.4.4.2.1.3';

async function refusal(p: Promise<unknown>): Promise<FarmError> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(FarmError);
    return e as FarmError;
  }
  throw new Error('expected a refusal');
}

describe('power outlet: SNMP (APC PowerNet-MIB) against snmpd', function () {
  this.timeout(60_000);
  let agent: SnmpPeer;
  const outlet = (uri: string): PowerOutlet => createPowerOutlet(uri.replace('PORT', String(agent.port)))!;

  before(async () => {
    agent = await startSnmpd('s3cret');
  });
  after(async () => {
    await agent?.stop();
  });

  it('rPDU (the default, v1): off and on are SETs of 2 and 1 on the outlet\'s OID, read back', async () => {
    const o = outlet('snmp://s3cret@127.0.0.1:PORT/3');
    expect(await o.get()).to.equal(true);
    expect(await o.set(false)).to.equal(false);
    expect(await o.get()).to.equal(false);
    expect(await outlet('snmp://s3cret@127.0.0.1:PORT/4').get()).to.equal(true); // another outlet is untouched
    expect(await o.set(true)).to.equal(true);
    expect(await agent.sets()).to.deep.equal([`${RPDU}.3 2`, `${RPDU}.3 1`]);
    expect(o.uri).to.equal(`snmp://***@127.0.0.1:${agent.port}/3`);
  });

  it('sPDU (MasterSwitch) over v2c, and a cycle: off, then on, nothing between', async () => {
    const before = (await agent.sets()).length;
    const o = outlet('snmp://s3cret@127.0.0.1:PORT/5?mib=apc-spdu&version=2c');
    expect(await o.cycle(0)).to.equal(true);
    expect((await agent.sets()).slice(before)).to.deep.equal([`${SPDU}.5 2`, `${SPDU}.5 1`]);
  });

  it('two outlets of one PDU switched at once: every SET arrives, each outlet ends as asked', async () => {
    const before = (await agent.sets()).length;
    const a = outlet('snmp://s3cret@127.0.0.1:PORT/6');
    const b = outlet('snmp://s3cret@localhost:PORT/7?version=2c');
    const results = await Promise.all([a.set(false), b.set(false), a.set(true)]);
    expect(results).to.deep.equal([false, false, true]);
    const sets = (await agent.sets()).slice(before);
    expect(sets).to.have.members([`${RPDU}.6 2`, `${RPDU}.7 2`, `${RPDU}.6 1`]);
    expect(sets.indexOf(`${RPDU}.6 2`)).to.be.below(sets.indexOf(`${RPDU}.6 1`));
  });

  it('an outlet the PDU does not have is a clear error naming outlet and mib', async () => {
    const e = await refusal(outlet('snmp://s3cret@127.0.0.1:PORT/12?version=2c').get());
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.match(/no such outlet.*outlet number and mib/);
  });

  it('an outlet whose state the PDU cannot tell (outletUnknown) is an error, not on or off', async () => {
    const e = await refusal(outlet('snmp://s3cret@127.0.0.1:PORT/8?mib=apc-spdu').get());
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.contain('reports the outlet\'s state as 4 (neither on nor off)');
  });

  it('a wrong community or no agent: device_unavailable within the timeout, the community never shown', async () => {
    const wrong = await refusal(outlet('snmp://n0tThis@127.0.0.1:PORT/1?timeout=0.3').set(false));
    expect(wrong.code).to.equal('device_unavailable');
    expect(wrong.message).to.contain('did not answer within 0.6 s').and.contain('community');
    expect(wrong.message).not.to.contain('n0tThis');
    const none = await refusal(createPowerOutlet('snmp://s3cret@127.0.0.1:9/1?timeout=0.3')!.get());
    expect(none.message).to.contain('127.0.0.1:9').and.not.contain('s3cret');
    expect(await agent.sets()).not.to.include(`${RPDU}.1 2`);
  });
});
