// LircdTransport against a real lircd (Debian's lirc package), and real
// lircd's own irtoy driver as the oracle for the IR Toy transport and fake.
//
// lircd runs with --nodaemon in a temporary folder, a remote from
// lirc-compat-remotes, and either the `file` driver (it writes
// "pulse N" / "space N" lines) or the `irtoy` driver on a pty pair.
import { expect } from 'chai';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFile, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { IrToyTransport } from '../../src/hardware/ir/transports/irtoy.js';
import { LircdTransport } from '../../src/hardware/ir/transports/lircd.js';
import { startFakeIrToy, startPtyPair, stopChild } from '../fixtures/fakeIrToy.js';
import { waitForLircdSocket } from '../helpers/lircd.js';
import { rejection } from '../helpers/rejections.js';

const REMOTE_FILE = '/usr/share/lirc/remotes/leadtek/lircd.conf.RM-0010';
const REMOTE = 'RM-0010'; // NEC: header 9000 4500, one 563 1687, zero 563 562, ptrail 563, pre_data 0xC03F
const hasLircd = spawnSync('lircd', ['--version']).status === 0;

/** The NEC frame of RM-0010 for a 16-bit code, as LIRC encodes it (without the trailing gap). */
function rm0010(code: number): number[] {
  const bits = (0xc03f << 16) | code;
  const out = [9000, 4500];
  for (let i = 31; i >= 0; i--) out.push(563, (bits >>> i) & 1 ? 1687 : 562);
  out.push(563);
  return out;
}

/** "pulse 9000\nspace 4500\n..." -> [9000, 4500, ...], checking that pulses and spaces alternate. */
function parseFileDriver(text: string): number[] {
  return text
    .trim()
    .split('\n')
    .map((line, i) => {
      const [kind, n] = line.split(' ');
      expect(kind, `line ${i + 1}`).to.equal(i % 2 === 0 ? 'pulse' : 'space');
      return Number(n);
    });
}

/** `lircd --nodaemon --driver=<driver> --device=<device> ...` in `dir`; resolves once it listens. */
async function startLircd(dir: string, driver: string, device: string): Promise<{ socket: string; child: ChildProcess }> {
  const socket = join(dir, 'lircd.sock');
  await copyFile(REMOTE_FILE, join(dir, 'remote.conf'));
  const child = spawn(
    'lircd',
    ['--nodaemon', `--driver=${driver}`, `--device=${device}`, `--output=${socket}`, `--pidfile=${join(dir, 'pid')}`,
      `--logfile=${join(dir, 'lircd.log')}`, join(dir, 'remote.conf')],
    { stdio: 'ignore' },
  );
  await waitForLircdSocket(socket, child);
  return { socket, child };
}


describe('LircdTransport with a real lircd (file driver)', function () {
  this.timeout(20000);
  let dir: string;
  let lircd: { socket: string; child: ChildProcess };
  let t: LircdTransport;

  before(() => {
    // scripts/setup.sh installs Debian's lirc: its absence is a broken setup, not a reason to skip.
    expect(hasLircd, 'lircd is not installed (Debian package lirc; scripts/setup.sh installs it)').to.equal(true);
  });
  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-lircd-'));
    lircd = await startLircd(dir, 'file', join(dir, 'out.txt'));
    t = new LircdTransport(lircd.socket, { timeoutMs: 3000 });
  });
  afterEach(async () => {
    await t?.close();
    if (lircd) await stopChild(lircd.child);
    await rm(dir, { recursive: true, force: true });
  });

  it('SEND_ONCE by remote and key: the file driver writes the key\'s NEC frame', async () => {
    await t.sendKey(REMOTE, 'KEY_POWER'); // 0x00FF
    const got = parseFileDriver(await readFile(join(dir, 'out.txt'), 'utf8'));
    const want = rm0010(0x00ff);
    expect(got.slice(0, want.length)).to.deep.equal(want);
    expect(got).to.have.length(want.length + 1); // and the trailing gap
  });

  it('repeats: "SEND_ONCE remote key 2" adds two repeat codes (9000 2250 563)', async () => {
    await t.sendKey(REMOTE, 'KEY_1', { repeats: 2 }); // 0xA05F
    const got = parseFileDriver(await readFile(join(dir, 'out.txt'), 'utf8'));
    const frame = rm0010(0xa05f);
    expect(got.slice(0, frame.length)).to.deep.equal(frame);
    const rest = got.slice(frame.length + 1); // after the frame's gap
    expect([rest[0], rest[1], rest[2], rest[4], rest[5], rest[6]]).to.deep.equal([9000, 2250, 563, 9000, 2250, 563]);
  });

  it('an unknown key -> invalid_request with lircd\'s message; nothing is sent', async () => {
    const e = await rejection(t.sendKey(REMOTE, 'KEY_NO_SUCH'));
    expect(e).to.include({ name: 'FarmError', code: 'invalid_request' });
    expect((e as Error).message).to.contain('unknown command').and.contain('KEY_NO_SUCH');
    expect((await readFile(join(dir, 'out.txt'), 'utf8')).trim()).to.equal('');
  });

  it('an unknown remote -> invalid_request with lircd\'s message', async () => {
    const e = await rejection(t.sendKey('NO-SUCH-REMOTE', 'KEY_POWER'));
    expect(e).to.include({ code: 'invalid_request' });
    expect((e as Error).message).to.contain('unknown remote');
  });

  it('lircd gone -> device_unavailable', async () => {
    await stopChild(lircd.child);
    expect(await rejection(t.sendKey(REMOTE, 'KEY_POWER'))).to.include({ code: 'device_unavailable' });
  });
});

describe('LIRC\'s own irtoy driver as the oracle for the IR Toy transport', function () {
  this.timeout(20000);

  before(() => {
    expect(hasLircd, 'lircd is not installed (Debian package lirc; scripts/setup.sh installs it)').to.equal(true);
  });

  it('lircd --driver=irtoy and IrToyTransport put the same counts (within one step) on the wire', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'farmhand-lircd-irtoy-'));
    const pty = await startPtyPair(dir);
    const fake = await startFakeIrToy(pty.b);
    let lircd: { socket: string; child: ChildProcess } | undefined;
    const ours = new IrToyTransport(pty.a);
    try {
      lircd = await startLircd(dir, 'irtoy', pty.a);
      const viaLirc = new LircdTransport(lircd.socket);
      await viaLirc.sendKey(REMOTE, 'KEY_POWER');
      await viaLirc.close();
      const lirc = await fake.next();
      await stopChild(lircd.child); // it resets the device and releases the port
      await ours.send([{ frequency: 38000, dutyCycle: 33, durations: rm0010(0x00ff), gap: 40000 }]);
      const mine = await fake.next();
      expect(mine.bytes).to.equal(lirc.bytes);
      mine.counts.forEach((c, i) => expect(Math.abs(c - lirc.counts[i]!), `count ${i}`).to.be.at.most(1));
    } finally {
      await ours.close();
      if (lircd) await stopChild(lircd.child);
      await fake.stop();
      await pty.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
