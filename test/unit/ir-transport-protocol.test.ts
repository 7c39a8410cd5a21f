// The IR Toy protocol's pure parts: carrier PR2, version answers, and how
// trains become transmissions of 16-bit counts of 21.333 us.
import { expect } from 'chai';
import {
  SAMPLE_US, carrierCommand, decodeCounts, parseVersion, planTransmissions, pr2For,
} from '../../src/hardware/ir/transports/irtoy-protocol.js';
import type { IrTrain } from '../../src/hardware/ir/transports/types.js';

const train = (durations: number[], gap = 0, frequency = 38000): IrTrain => ({ frequency, dutyCycle: 33, durations, gap });

describe('IR Toy protocol', () => {
  it('carrier "0x06 PR2 0x00 with PR2 = round(48e6 / (16 f) - 1)"', () => {
    for (const f of [30000, 36000, 38000, 40000, 56000]) {
      expect(pr2For(f)).to.equal(Math.round(48e6 / (16 * f) - 1));
    }
    expect([...carrierCommand(38000)]).to.deep.equal([0x06, 78, 0x00]);
  });

  it('refuses carriers PR2 cannot express', () => {
    expect(() => pr2For(5000)).to.throw().with.property('code', 'invalid_request');
    expect(() => pr2For(3e6)).to.throw().with.property('code', 'invalid_request');
  });

  it('"v -> V222": hardware 2, firmware 22; anything else is not a version', () => {
    expect(parseVersion(Buffer.from('V222'))).to.deep.equal({ hardware: 2, firmware: 22 });
    expect(parseVersion(Buffer.from('OK\r\n'))).to.equal(undefined);
  });

  it('"16-bit big-endian counts of 21.333 us, pulse first, ending 0xFF 0xFF"', () => {
    const plan = planTransmissions([train([9000, 4500, 560])]);
    expect(plan.transmissions).to.have.length(1);
    const data = plan.transmissions[0]?.data ?? Buffer.alloc(0);
    expect([...data]).to.deep.equal([0x01, 0xa6, 0x00, 0xd3, 0x00, 0x1a, 0xff, 0xff]); // 422, 211, 26
    decodeCounts(data.subarray(0, -2)).forEach((us, i) => {
      expect(Math.abs(us - [9000, 4500, 560][i]!)).to.be.at.most(SAMPLE_US / 2);
    });
  });

  it('a train ending in a space has that space folded into its gap', () => {
    const plan = planTransmissions([train([560, 560, 560, 1000], 500)]);
    expect(plan.transmissions[0]?.data.length).to.equal(3 * 2 + 2);
    expect(plan.trailingGapUs).to.equal(1500);
  });

  it('same-carrier trains share one transmission; a new carrier starts another after the gap', () => {
    const plan = planTransmissions([train([560], 1000), train([560], 2000), train([560], 3000, 36000)]);
    expect(plan.transmissions.map((t) => [t.frequency, t.data.length, t.waitBeforeUs])).to.deep.equal([
      [38000, 3 * 2 + 2, 0],
      [36000, 1 * 2 + 2, 2000],
    ]);
    expect(plan.transmissions[0]?.emitUs).to.equal(560 + 1000 + 560);
    expect(plan.trailingGapUs).to.equal(3000);
  });

  it('a gap longer than one count can hold splits the transmission and is waited out', () => {
    const plan = planTransmissions([train([560], 2_000_000), train([560], 0)]);
    expect(plan.transmissions.map((t) => t.waitBeforeUs)).to.deep.equal([0, 2_000_000]);
  });

  it('frequency 0 means 38000 Hz', () => {
    expect(planTransmissions([train([560], 0, 0)]).transmissions[0]?.frequency).to.equal(38000);
  });

  it('a pulse or space too long for 16 bits, or not a number, is invalid_request', () => {
    expect(() => planTransmissions([train([560, 1_500_000, 560])])).to.throw().with.property('code', 'invalid_request');
    expect(() => planTransmissions([train([560, -1, 560])])).to.throw().with.property('code', 'invalid_request');
    expect(() => planTransmissions([train([560], Number.POSITIVE_INFINITY)])).to.throw().with.property('code', 'invalid_request');
  });
});
