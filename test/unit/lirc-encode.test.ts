// The LIRC encoder on small hand-written remotes, one per encoding and rule.
// Expected trains are worked out by hand from LIRC's rules (README of the
// reference corpus, lib/transmit.c); the differential suite checks the same
// rules against irsimsend over real files.
import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { LircEncoder, encode, parseLircConfig, type IrTrain } from '../../src/hardware/ir/lirc/index.js';

const FILE = 'unit.lircd.conf';

/** The single remote of a file made of `body` and `codes`. */
const remote = (body: string, codes = 'KEY_OK 0x1') =>
  parseLircConfig(`begin remote\n  name T\n${body}\n  begin codes\n    ${codes}\n  end codes\nend remote\n`, FILE)[0]!;

/** SPACE_ENC data: a 1 is (560, 1690), a 0 is (560, 560), MSB first. */
const nec = (bits: string) => [...bits].flatMap((b) => (b === '1' ? [560, 1690] : [560, 560]));
const NEC = '  flags SPACE_ENC\n  one 560 1690\n  zero 560 560\n  ptrail 560';
const sum = (xs: number[]) => xs.reduce((a, b) => a + b, 0);
const durations = (trains: IrTrain[]) => trains.map((t) => t.durations);

/** The FarmError `fn` throws. */
function thrown(fn: () => unknown): FarmError {
  try {
    fn();
  } catch (e) {
    if (e instanceof FarmError) return e;
    throw e;
  }
  throw new Error('no error thrown');
}

describe('LIRC encoder', () => {
  describe('SPACE_ENC', () => {
    const r = remote(`${NEC}\n  bits 8\n  header 9000 4500\n  pre_data_bits 8\n  pre_data 0xA5\n  gap 108000\n  frequency 38000`, 'KEY_OK 0x0F');

    it('header, pre_data then data most significant bit first, ptrail; gap after the train', () => {
      const [t] = encode(r, ['KEY_OK']);
      expect(t!.durations).to.deep.equal([9000, 4500, ...nec('10100101'), ...nec('00001111'), 560]);
      expect(t!.gap).to.equal(108000);
      expect(t!.frequency).to.equal(38000);
      expect(t!.dutyCycle).to.equal(50);
    });

    it('CONST_LENGTH: "gap is the whole frame length, so the trailing gap is gap - sum(frame)"', () => {
      const c = remote(`${NEC}\n  flags SPACE_ENC|CONST_LENGTH\n  bits 4\n  gap 40000`, 'KEY_OK 0x5');
      const [t] = encode(c, ['KEY_OK']);
      expect(t!.durations).to.deep.equal([...nec('0101'), 560]);
      expect(t!.gap).to.equal(40000 - sum(t!.durations));
    });

    it('pre and post pulse/space go between pre_data, data and post_data', () => {
      const p = remote(`${NEC}\n  bits 1\n  pre_data_bits 1\n  pre_data 1\n  post_data_bits 1\n  post_data 0\n  pre 300 400\n  post 500 600\n  gap 50000`, 'KEY_OK 1');
      expect(encode(p, ['KEY_OK'])[0]!.durations).to.deep.equal([...nec('1'), 300, 400, ...nec('1'), 500, 600, ...nec('0'), 560]);
    });

    it('foot goes after ptrail (space then pulse); plead before the data', () => {
      const p = remote(`${NEC}\n  bits 2\n  plead 700\n  foot 800 6000\n  gap 50000`, 'KEY_OK 0x2');
      expect(encode(p, ['KEY_OK'])[0]!.durations).to.deep.equal([700 + 560, 1690, 560, 560, 560, 6000, 800]);
    });

    it('REVERSE sends the bits least significant first', () => {
      const p = remote(`${NEC}\n  flags SPACE_ENC|REVERSE\n  bits 4\n  gap 50000`, 'KEY_OK 0x1');
      expect(encode(p, ['KEY_OK'])[0]!.durations).to.deep.equal([...nec('1000'), 560]);
    });

    it('frequency and duty_cycle of the remote are carried by every train', () => {
      const p = remote(`${NEC}\n  bits 1\n  gap 50000\n  frequency 36000\n  duty_cycle 33`, 'KEY_OK 1');
      expect(encode(p, ['KEY_OK'], { count: 2 }).map((t) => [t.frequency, t.dutyCycle])).to.deep.equal([[36000, 33], [36000, 33]]);
    });
  });

  describe('repeats', () => {
    const body = `${NEC}\n  bits 4\n  header 9000 4500\n  gap 108000`;

    it('count > 1 sends the repeat code: [plead] prepeat srepeat [ptrail]; repeat_gap after it', () => {
      const r = remote(`${body}\n  repeat 9000 2250\n  repeat_gap 96000`);
      const trains = encode(r, ['KEY_OK'], { count: 3 });
      expect(durations(trains)).to.deep.equal([[9000, 4500, ...nec('0001'), 560], [9000, 2250, 560], [9000, 2250, 560]]);
      expect(trains.map((t) => t.gap)).to.deep.equal([108000, 96000, 96000]);
    });

    it('"irsimsend sends the same key twice in a row as a repeat"', () => {
      const r = remote(`${body}\n  repeat 9000 2250`);
      expect(durations(encode(r, ['KEY_OK', 'KEY_OK']))[1]).to.deep.equal([9000, 2250, 560]);
    });

    it('REPEAT_HEADER puts the header before the repeat code', () => {
      const r = remote(`${body}\n  flags SPACE_ENC|REPEAT_HEADER\n  repeat 560 2250`);
      expect(durations(encode(r, ['KEY_OK'], { count: 2 }))[1]).to.deep.equal([9000, 4500, 560, 2250, 560]);
    });

    it('without a repeat code a repeat resends the frame; NO_HEAD_REP and NO_FOOT_REP drop header and foot', () => {
      const r = remote(`${body}\n  flags SPACE_ENC|NO_HEAD_REP|NO_FOOT_REP\n  foot 800 6000`);
      const [first, again] = durations(encode(r, ['KEY_OK'], { count: 2 }));
      expect(first).to.deep.equal([9000, 4500, ...nec('0001'), 560, 6000, 800]);
      expect(again).to.deep.equal([...nec('0001'), 560]);
    });

    it('NO_HEAD_REP with CONST_LENGTH: the first frame\'s header does not count against the length', () => {
      const r = remote(`${body}\n  flags SPACE_ENC|NO_HEAD_REP|CONST_LENGTH`);
      const [t] = encode(r, ['KEY_OK']);
      expect(t!.gap).to.equal(108000 - (sum(t!.durations) - 9000 - 4500));
    });

    it('repeat_mask is XORed into the code of a repeat', () => {
      const r = remote(`${body}\n  repeat_mask 0xF`, 'KEY_OK 0x0');
      expect(durations(encode(r, ['KEY_OK'], { count: 2 }))[1]).to.deep.equal([9000, 4500, ...nec('1111'), 560]);
    });

    it('min_repeat: ignored by irsimsend, honoured by lircd SEND_ONCE (separate trains when gap >= 10 ms)', () => {
      const r = remote(`${body}\n  repeat 9000 2250\n  min_repeat 2`);
      expect(encode(r, ['KEY_OK'])).to.have.length(1);
      expect(durations(new LircEncoder(r).sendOnce('KEY_OK'))).to.deep.equal([
        [9000, 4500, ...nec('0001'), 560], [9000, 2250, 560], [9000, 2250, 560],
      ]);
    });

    it('min_repeat with a gap under 10 ms: the repeats are concatenated into one train', () => {
      const r = remote(`${NEC}\n  bits 4\n  header 9000 4500\n  gap 8000\n  repeat 9000 2250\n  min_repeat 2`);
      const trains = new LircEncoder(r).sendOnce('KEY_OK');
      expect(durations(trains)).to.deep.equal([[9000, 4500, ...nec('0001'), 560, 8000, 9000, 2250, 560, 8000, 9000, 2250, 560]]);
      expect(trains[0]!.gap).to.equal(8000);
    });

    it('a button with several codes sends them in turn on repeats (concatenated below 10 ms)', () => {
      const slow = remote(`${NEC}\n  bits 2\n  gap 40000`, 'KEY_OK 0x1 0x2');
      expect(durations(encode(slow, ['KEY_OK'], { count: 3 }))).to.deep.equal([[...nec('01'), 560], [...nec('10'), 560], [...nec('01'), 560]]);
      const fast = remote(`${NEC}\n  bits 2\n  gap 5000`, 'KEY_OK 0x1 0x2');
      expect(durations(encode(fast, ['KEY_OK']))).to.deep.equal([[...nec('01'), 560, 5000, ...nec('10'), 560]]);
    });
  });

  describe('toggles', () => {
    it('toggle_bit: "the toggle state flips before every new press, so the first press has the toggle bit set"', () => {
      const r = remote(`${NEC}\n  bits 4\n  gap 50000\n  toggle_bit 1`, 'KEY_OK 0x1\n    KEY_UP 0x2');
      const enc = new LircEncoder(r);
      const got = [...enc.simsend('KEY_OK', 2), ...enc.simsend('KEY_UP'), ...enc.simsend('KEY_OK')];
      // Repeats (count 2) keep the state; each new press flips it, across calls.
      expect(durations(got)).to.deep.equal([nec('1001'), nec('1001'), nec('0010'), nec('1001')].map((d) => [...d, 560]));
    });

    it('a toggle_bit_mask of several bits is XORed in on every other press', () => {
      const r = remote(`${NEC}\n  bits 4\n  gap 50000\n  toggle_bit_mask 0x3`, 'KEY_OK 0x0');
      expect(durations(encode(r, ['KEY_OK', 'KEY_OK', 'KEY_OK']))).to.deep.equal([nec('0011'), nec('0000'), nec('0011')].map((d) => [...d, 560]));
    });

    it('toggle_mask XORs the masked bits on the 2nd, 4th... send of one press', () => {
      const r = remote(`${NEC}\n  bits 4\n  gap 50000\n  toggle_mask 0x1`, 'KEY_OK 0x0');
      expect(durations(encode(r, ['KEY_OK'], { count: 4 }))).to.deep.equal([nec('0000'), nec('0001'), nec('0000'), nec('0001')].map((d) => [...d, 560]));
    });
  });

  describe('biphase and other encodings', () => {
    const rc5 = `  flags RC5|CONST_LENGTH\n  bits 4\n  one 889 889\n  zero 889 889\n  pre_data_bits 2\n  pre_data 0x3\n  gap 113792`;

    it('RC5: 1 is space-then-pulse, 0 pulse-then-space, neighbours merge; plead starts the train; toggle flips', () => {
      const r = remote(`${rc5}\n  plead 889\n  toggle_bit 3`, 'KEY_OK 0x5');
      const [first, second] = encode(r, ['KEY_OK', 'KEY_OK']);
      // bits 11 1101 (toggle set): P S P S P S P S PP SS P
      expect(first!.durations).to.deep.equal([889, 889, 889, 889, 889, 889, 889, 889, 1778, 1778, 889]);
      // bits 11 0101 (toggle clear)
      expect(second!.durations).to.deep.equal([889, 889, 889, 889, 1778, 1778, 1778, 1778, 889]);
      expect(first!.gap).to.equal(113792 - sum(first!.durations));
    });

    it('RC5/SHIFT_ENC: "a leading space is dropped, and the sequence always ends on a pulse"', () => {
      const r = remote(rc5.replace('RC5', 'SHIFT_ENC'), 'KEY_OK 0x4');
      // bits 11 0100: (S) P, S P, P S, S P, P S, P S -> the first and the final space are not sent
      expect(encode(r, ['KEY_OK'])[0]!.durations).to.deep.equal([889, 889, 1778, 1778, 1778, 889, 889]);
    });

    it('RC6: bits under rc6_mask last twice as long', () => {
      const r = remote('  flags RC6\n  bits 4\n  one 444 444\n  zero 444 444\n  header 2666 889\n  rc6_mask 0x4\n  gap 100000', 'KEY_OK 0xA');
      // header P2666 S889, 1: S444 P444, 0 (wide): P888 S888, 1: S444 P444, 0: P444 S444
      expect(encode(r, ['KEY_OK'])[0]!.durations).to.deep.equal([2666, 1333, 1332, 1332, 888]);
    });

    it('SPACE_FIRST: every bit is a space then a pulse', () => {
      const r = remote('  flags SPACE_FIRST\n  bits 2\n  one 500 1000\n  zero 500 500\n  header 3000 3000\n  gap 50000', 'KEY_OK 0x2');
      expect(encode(r, ['KEY_OK'])[0]!.durations).to.deep.equal([3000, 4000, 500, 500, 500]);
    });

    it('RCMM: two bits per symbol, 00 zero, 01 one, 10 two, 11 three', () => {
      const r = remote('  flags RCMM\n  bits 4\n  header 417 278\n  zero 167 278\n  one 167 444\n  two 167 611\n  three 167 778\n  ptrail 167\n  gap 50000', 'KEY_OK 0x6');
      expect(encode(r, ['KEY_OK'])[0]!.durations).to.deep.equal([417, 278, 167, 444, 167, 611, 167]);
    });

    it('XMP: a nibble n is a pulse, then a space of zero + n * one', () => {
      const r = remote('  flags XMP\n  bits 8\n  zero 210 760\n  one 0 137\n  ptrail 210\n  gap 80000', 'KEY_OK 0x3A');
      expect(encode(r, ['KEY_OK'])[0]!.durations).to.deep.equal([210, 760 + 3 * 137, 210, 760 + 10 * 137, 210]);
    });

    it('RAW_CODES: the durations as written; CONST_LENGTH pads the gap', () => {
      const text = 'begin remote\n name R\n flags RAW_CODES|CONST_LENGTH\n gap 50000\n begin raw_codes\n  name A\n   100 200 300\n   400 500\n end raw_codes\nend remote\n';
      const [t] = encode(parseLircConfig(text, FILE)[0]!, ['A']);
      expect(t!.durations).to.deep.equal([100, 200, 300, 400, 500]);
      expect(t!.gap).to.equal(50000 - 1500);
    });
  });

  describe('refusals', () => {
    for (const flag of ['GRUNDIG', 'SERIAL', 'BO']) {
      it(`a ${flag} remote ("LIRC cannot transmit") is refused naming file, line and protocol`, () => {
        const r = remote(`  flags ${flag}\n  bits 4\n  one 500 500\n  zero 500 500\n  gap 50000`);
        const e = thrown(() => new LircEncoder(r));
        expect(e.code).to.equal('invalid_request');
        expect(e.message).to.match(new RegExp(`^${FILE}:1: .*${flag}`));
      });
    }

    it('a remote without timings (it only describes received codes) is refused', () => {
      const e = thrown(() => new LircEncoder(remote('  bits 4\n  one 0 0\n  zero 0 0\n  gap 50000')));
      expect(e.code).to.equal('invalid_request');
      expect(e.message).to.match(/no timings/);
    });

    it('an unknown key is not_found, naming the remote and the key', () => {
      const e = thrown(() => encode(remote(`${NEC}\n  bits 4\n  gap 50000`), ['KEY_NOPE']));
      expect(e.code).to.equal('not_found');
      expect(e.message).to.match(/^unit\.lircd\.conf:1: .*"T".*"KEY_NOPE"/);
    });

    it('keys are looked up case-insensitively, as LIRC does', () => {
      expect(encode(remote(`${NEC}\n  bits 4\n  gap 50000`), ['key_ok'])).to.have.length(1);
    });

    it('CONST_LENGTH with a gap shorter than the frame is refused ("too short gap"), naming the key\'s line', () => {
      const e = thrown(() => encode(remote(`${NEC}\n  flags SPACE_ENC|CONST_LENGTH\n  bits 4\n  gap 1000`), ['KEY_OK']));
      expect(e.code).to.equal('invalid_request');
      expect(e.message).to.match(/^unit\.lircd\.conf:11: .*too short gap/);
    });

    it('a raw duration of 0 is refused', () => {
      const text = 'begin remote\n name R\n gap 50000\n begin raw_codes\n  name A\n   100 0 300\n end raw_codes\nend remote\n';
      expect(thrown(() => encode(parseLircConfig(text, FILE)[0]!, ['A'])).message).to.match(/space of 0 us/);
    });

    it('more than 256 durations in one send is refused', () => {
      const r = remote(`${NEC}\n  bits 64\n  pre_data_bits 64\n  post_data_bits 64\n  gap 50000`);
      expect(thrown(() => encode(r, ['KEY_OK'])).message).to.match(/256/);
    });
  });
});
