// `farmhand ir encode` and the irsimsend text format.
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatIrsimsend, irEncodeCommand } from '../../src/hardware/ir/lirc/index.js';
import { runCaptured } from '../helpers/cli.js';

const TWO_REMOTES = `begin remote
  name WIDE
  flags SPACE_ENC
  bits 8
  one 500 1500
  zero 500 500
  gap 50000
  begin codes
    KEY_OK 0x80
  end codes
end remote
begin remote
  name NARROW
  flags SPACE_ENC
  bits 2
  one 600 1600
  zero 600 600
  gap 40000
  begin codes
    KEY_OK 0x1
  end codes
end remote
`;

/** Run the command; returns exit code, stdout and stderr text. */
/** `farmhand ir encode ...` in this process. */
const cli = (argv: string[]) => runCaptured(irEncodeCommand, argv);

describe('formatIrsimsend', () => {
  it('writes "pulse N" / "space N" lines, then "space <gap>" after each train', () => {
    const text = formatIrsimsend([
      { frequency: 38000, dutyCycle: 50, durations: [9000, 4500, 560], gap: 40000 },
      { frequency: 38000, dutyCycle: 50, durations: [9000, 2250, 560], gap: 96000 },
    ]);
    expect(text).to.equal(
      'pulse 9000\nspace 4500\npulse 560\nspace 40000\npulse 9000\nspace 2250\npulse 560\nspace 96000\n',
    );
  });
});

describe('farmhand ir encode', () => {
  let dir: string;
  let file: string;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-ir-encode-'));
    file = join(dir, 'two.lircd.conf');
    await writeFile(file, TWO_REMOTES);
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it('without --remote uses the remote irsimsend would use (fewest bits first)', async () => {
    const r = await cli([file, 'KEY_OK']);
    expect(r.code).to.equal(0);
    expect(r.out).to.equal('pulse 600\nspace 600\npulse 600\nspace 40000\n');
  });

  it('--remote picks a remote by name (case-insensitive); --count adds repeats', async () => {
    const r = await cli([file, 'KEY_OK', '--remote', 'wide', '--count', '2']);
    expect(r.code).to.equal(0);
    const frame = 'pulse 500\nspace 1500\n' + 'pulse 500\nspace 500\n'.repeat(6) + 'pulse 500\nspace 50000\n';
    expect(r.out).to.equal(frame + frame);
  });

  it('an unknown key exits 1 naming file, line, remote and key', async () => {
    const r = await cli([file, 'KEY_NOPE']);
    expect(r.code).to.equal(1);
    expect(r.out).to.equal('');
    expect(r.err).to.contain(`${file}:12:`).and.contain('KEY_NOPE');
  });

  it('an unknown remote exits 1 listing the remotes of the file', async () => {
    const r = await cli([file, 'KEY_OK', '--remote', 'TV']);
    expect(r.code).to.equal(1);
    expect(r.err).to.contain('"TV"').and.contain('WIDE, NARROW');
  });

  it('a malformed file exits 1 naming file and line', async () => {
    const bad = join(dir, 'bad.lircd.conf');
    await writeFile(bad, 'begin remote\n  name X\n  colour red\nend remote\n');
    const r = await cli([bad, 'KEY_OK']);
    expect(r.code).to.equal(1);
    expect(r.err).to.contain(`${bad}:3:`);
  });

  it('a missing file exits 1', async () => {
    const r = await cli([join(dir, 'nope.conf'), 'KEY_OK']);
    expect(r.code).to.equal(1);
    expect(r.err).to.contain('nope.conf');
  });

  for (const argv of [[], ['only-a-file'], ['f', 'K', '--count', '0'], ['f', 'K', '--bogus']]) {
    it(`bad usage ${JSON.stringify(argv)} exits 2 with the usage line`, async () => {
      const r = await cli(argv);
      expect(r.code).to.equal(2);
      expect(r.err).to.contain('usage: farmhand ir encode');
    });
  }
});
