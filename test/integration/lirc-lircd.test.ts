// LircEncoder.sendOnce() against lircd itself: Debian's lircd with its file
// driver writes what it transmits, `irsend SEND_ONCE` drives it. This is the
// path that honours min_repeat, which irsimsend cannot show.
import { expect } from 'chai';
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { LircEncoder, formatIrsimsend, parseLircConfig } from '../../src/hardware/ir/lirc/index.js';
import { waitForLircdSocket } from '../helpers/lircd.js';

const run = promisify(execFile);

const NEC = 'flags SPACE_ENC\n one 560 1690\n zero 560 560\n ptrail 560\n header 9000 4500\n bits 4\n repeat 9000 2250';
const REMOTES = `begin remote
 name SLOW
 ${NEC}
 gap 40000
 min_repeat 2
 begin codes
  KEY_OK 0x1
  KEY_UP 0x2 0x3
 end codes
end remote
begin remote
 name FAST
 ${NEC}
 gap 8000
 min_repeat 2
 begin codes
  KEY_OK 0x1
 end codes
end remote
begin remote
 name TOGGLE
 flags RC5|CONST_LENGTH
 bits 6
 one 889 889
 zero 889 889
 plead 889
 toggle_bit 2
 gap 113792
 begin codes
  KEY_A 0x05
  KEY_B 0x0A
 end codes
end remote
`;

/**
 * [remote, key, reps] sent in this order, one `irsend SEND_ONCE` each. irsend
 * passes `--count=N` on as lircd's repeat count only for N > 1, so reps is
 * never 1 here.
 */
const PRESSES: [string, string, number][] = [
  ['SLOW', 'KEY_OK', 0],
  ['SLOW', 'KEY_OK', 3],
  ['SLOW', 'KEY_UP', 0],
  ['FAST', 'KEY_OK', 0],
  ['TOGGLE', 'KEY_A', 0],
  ['TOGGLE', 'KEY_A', 2],
  ['TOGGLE', 'KEY_B', 0],
];

describe('LircEncoder.sendOnce vs lircd --driver=file + irsend SEND_ONCE', function () {
  this.timeout(20000);
  let dir: string;
  let lircd: ChildProcess | undefined;

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-lircd-'));
    await writeFile(join(dir, 'remotes.conf'), REMOTES);
    lircd = spawn('lircd', ['--nodaemon', '-H', 'file', '-d', join(dir, 'out'), '-o', join(dir, 'sock'),
      '-P', join(dir, 'pid'), '-L', join(dir, 'log'), '-O', '/dev/null', join(dir, 'remotes.conf')], { stdio: 'ignore' });
    await waitForLircdSocket(join(dir, 'sock'), lircd);
  });

  after(async () => {
    if (lircd && lircd.exitCode === null) {
      const exited = new Promise((r) => lircd!.once('exit', r));
      lircd.kill('SIGTERM');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  });

  it('min_repeat repeats (concatenated below 10 ms gaps, separate above), SEND_ONCE counts, multi-code buttons and toggles', async () => {
    const remotes = parseLircConfig(REMOTES, 'remotes.conf');
    const encoders = new Map(remotes.map((r) => [r.name, new LircEncoder(r)]));
    let ours = '';
    for (const [remote, key, reps] of PRESSES) {
      await run('irsend', ['-d', join(dir, 'sock'), 'SEND_ONCE', remote, key, ...(reps ? [`--count=${reps}`] : [])]);
      ours += formatIrsimsend(encoders.get(remote)!.sendOnce(key, reps));
    }
    const theirs = await readFile(join(dir, 'out'), 'utf8');
    expect(ours).to.equal(theirs);
    // Sanity: the SLOW press carries its two min_repeat repeats.
    expect(theirs.split('space 2250').length - 1).to.be.greaterThan(2);
  });
});
