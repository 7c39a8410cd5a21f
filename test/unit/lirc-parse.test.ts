// lircd.conf parsing: what LIRC accepts, what it derives, and how refusals
// name the file and line.
import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { Flag, lircOrder, parseLircConfig } from '../../src/hardware/ir/lirc/index.js';

const FILE = 'remote.lircd.conf';

/** A one-remote file around `body` (remote definitions) and `codes`. */
const conf = (body: string, codes = 'KEY_OK 0x1') =>
  `begin remote\n  name T\n  bits 4\n  one 500 1500\n  zero 500 500\n${body}\n  begin codes\n    ${codes}\n  end codes\nend remote\n`;

/** The FarmError parseLircConfig throws for `text`. */
function refusal(text: string): FarmError {
  try {
    parseLircConfig(text, FILE);
  } catch (e) {
    if (e instanceof FarmError) return e;
    throw e;
  }
  throw new Error('parseLircConfig accepted the file');
}

describe('parseLircConfig', () => {
  it('reads several remotes in file order, with their lines and LIRC defaults', () => {
    const text = `# two remotes\n${conf('  gap 1000')}\n${conf('  frequency 36000\n  duty_cycle 33').replace('name T', 'name U')}`;
    const [a, b] = parseLircConfig(text, FILE);
    expect(a!.name).to.equal('T');
    expect(a!.line).to.equal(2);
    expect(a!.frequency).to.equal(38000);
    expect(a!.dutyCycle).to.equal(0);
    expect(b!.name).to.equal('U');
    expect(b!.frequency).to.equal(36000);
    expect(b!.dutyCycle).to.equal(33);
    expect(a!.codes[0]).to.deep.include({ name: 'KEY_OK', line: 9, codes: [1n] });
  });

  it('numbers are C literals: 0x hex, leading-0 octal, decimal', () => {
    const [r] = parseLircConfig(conf('  gap 0x100\n  repeat_gap 010\n  plead 12'), FILE);
    expect([r!.gap, r!.repeatGap, r!.plead]).to.deep.equal([256, 8, 12]);
  });

  it('a multi-code button keeps every code; "#" after the first code starts a comment', () => {
    const [r] = parseLircConfig(conf('', 'KEY_OK 0x1 0x2 # two codes'), FILE);
    expect(r!.codes[0]!.codes).to.deep.equal([1n, 2n]);
  });

  it('toggle_bit N becomes a toggle_bit_mask counted from the most significant bit of pre+bits+post', () => {
    const [r] = parseLircConfig(conf('  pre_data_bits 2\n  pre_data 0x3\n  toggle_bit 3'), FILE);
    expect(r!.toggleBitMask).to.equal(1n << 3n);
  });

  it('RC6 with a toggle_bit and no rc6_mask gets the toggle bit as rc6_mask', () => {
    const [r] = parseLircConfig(conf('  flags RC6\n  toggle_bit 2'), FILE);
    expect(r!.rc6Mask).to.equal(1n << 2n);
  });

  it('REVERSE reverses pre_data and codes once, at load time', () => {
    const [r] = parseLircConfig(conf('  flags SPACE_ENC|REVERSE\n  pre_data_bits 4\n  pre_data 0x1', 'KEY_OK 0x3'), FILE);
    expect(r!.preData).to.equal(0x8n);
    expect(r!.codes[0]!.codes).to.deep.equal([0xcn]);
  });

  it('values wider than their bits are masked, as LIRC does', () => {
    const [r] = parseLircConfig(conf('', 'KEY_OK 0x1F'), FILE);
    expect(r!.codes[0]!.codes).to.deep.equal([0xfn]);
  });

  it('"flags A | B" with spaces reads only A (LIRC ignores the rest of the line)', () => {
    const [r] = parseLircConfig(conf('  flags RC5 | CONST_LENGTH'), FILE);
    expect(r!.flags).to.equal(Flag.RC5);
  });

  it('raw_codes: buttons with their signals, the remote becomes RAW_CODES', () => {
    const text = 'begin remote\n name R\n flags SPACE_ENC\n begin raw_codes\n  name A\n   100 200\n   300\n end raw_codes\nend remote\n';
    const [r] = parseLircConfig(text, FILE);
    expect(r!.flags & 0x7ff).to.equal(Flag.RAW_CODES);
    expect(r!.codes[0]).to.deep.include({ name: 'A', signals: [100, 200, 300] });
  });

  it('lircOrder puts non-raw remotes first, fewer bits first, like LIRC\'s loader', () => {
    const raw = 'begin remote\n name RAW\n begin raw_codes\n  name A\n   1\n end raw_codes\nend remote\n';
    const wide = conf('  pre_data_bits 8').replace('name T', 'name WIDE');
    const narrow = conf('').replace('name T', 'name NARROW');
    const order = lircOrder(parseLircConfig(raw + wide + narrow, FILE)).map((r) => r.name);
    expect(order).to.deep.equal(['NARROW', 'WIDE', 'RAW']);
  });

  describe('refuses what LIRC refuses, naming file and line', () => {
    const cases: [string, string, number, RegExp][] = [
      ['an indented comment (LIRC only skips "#" in column 0)', conf('  # note'), 6, /"#"|unknown definition/],
      ['an unknown keyword', conf('  colour red'), 6, /unknown definition/],
      ['a timing with one value', conf('  header 9000'), 6, /too few arguments/],
      ['a bad number', conf('  gap 12ab'), 6, /valid \(uint32_t\) number/],
      ['an octal number with an 8', conf('  gap 08'), 6, /valid/],
      ['an unknown flag', conf('  flags SPACE_ENC|FAST'), 6, /unknown flag/],
      ['two protocols', conf('  flags RC5|RC6'), 6, /multiple protocols/],
      ['include', conf('  include "other.conf"'), 6, /include/],
      ['begin codes outside a remote', 'begin codes\n', 1, /isn't valid/],
      ['a button without a code', conf('', 'KEY_OK'), 8, /alone/],
      ['a missing end remote', conf('').replace('end remote\n', ''), 9, /unexpected end of file/],
      ['a remote without a name', conf('').replace('  name T\n', ''), 9, /missing remote name/],
      ['a remote without codes', 'begin remote\n name T\nend remote\n', 3, /no codes/],
      ['a raw button ending on a space', 'begin remote\n name R\n begin raw_codes\n  name A\n   1 2\n end raw_codes\nend remote\n', 6, /bad signal length.*"A"/],
      ['a raw signal before any name', 'begin remote\n name R\n begin raw_codes\n   1 2 3\n end raw_codes\nend remote\n', 4, /no name/],
      ['a file without remotes', '# nothing\n', 1, /no "begin remote"/],
    ];
    for (const [what, text, line, message] of cases) {
      it(what, () => {
        const e = refusal(text);
        expect(e.code).to.equal('invalid_request');
        expect(e.message).to.match(new RegExp(`^${FILE.replace(/\./g, '\\.')}:${line}: `));
        expect(e.message).to.match(message);
        expect(e.details).to.deep.equal({ file: FILE, line });
      });
    }
  });
});
