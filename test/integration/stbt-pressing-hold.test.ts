// stbt.pressing(key) is a real hold on the transports that can hold a key:
// a real lircd (SEND_START / SEND_STOP; its file driver writes what it
// transmits) and the virtual set-top box (key down, key up). The script runs
// in a real python3 against the real control socket, KeyPresser and
// transport; what is observed is the receiving side: lircd's output and the
// box's held key. No timing: the script prints a line as its block starts
// (the key must be down by then), stays in the block until the test has seen
// the key repeat, and prints a line once the release is acknowledged.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { RunControlChannel } from '../../src/core/ports.js';
import { KeyPresser } from '../../src/hardware/ir/keys.js';
import { LircEncoder, formatIrsimsend } from '../../src/hardware/ir/lirc/index.js';
import { LircdTransport } from '../../src/hardware/ir/transports/lircd.js';
import type { IrTransport } from '../../src/hardware/ir/transports/types.js';
import { VirtualTransport } from '../../src/hardware/ir/transports/virtual.js';
import { VSTB_LIRCD_CONF, VSTB_REMOTE_FILE, createVirtualStb, vstbRemote } from '../../src/hardware/virtual/index.js';
import { ControlServer } from '../../src/runner/control.js';
import { projectRoot } from '../../src/version.js';
import { waitForLircdSocket } from '../helpers/lircd.js';
import { waitFor } from '../helpers/wait.js';

const SCRIPT = `
import os, sys, time
import stbt
flag = sys.argv[1]
with stbt.pressing("KEY_UP", interpress_delay_secs=0) as kp:
    print("in-block", flush=True)
    while not os.path.exists(flag):
        time.sleep(0.01)
print("released", kp.end_time is not None, flush=True)
stbt.press("KEY_OK", interpress_delay_secs=0)
print("done", flush=True)
`;

/** The script, with its stdout lines as they come. */
class Script {
  readonly lines: string[] = [];
  readonly child: ChildProcess;
  private out = '';
  exit: Promise<number | null>;
  constructor(env: Record<string, string>, flag: string) {
    this.child = spawn('/usr/bin/python3', ['-c', SCRIPT, flag], {
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', PYTHONPATH: path.join(projectRoot, 'python'), PYTHONDONTWRITEBYTECODE: '1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let err = '';
    this.child.stdout!.setEncoding('utf8').on('data', (t: string) => {
      this.out += t;
      const parts = this.out.split('\n');
      this.out = parts.pop() ?? '';
      this.lines.push(...parts);
    });
    this.child.stderr!.setEncoding('utf8').on('data', (t: string) => (err += t));
    this.exit = new Promise((resolve) => this.child.on('exit', (code) => {
      if (code !== 0) this.lines.push(`exit ${code}: ${err}`);
      resolve(code);
    }));
  }
  async line(text: string): Promise<void> {
    await waitFor(() => {
      const failed = this.lines.find((l) => l.startsWith('exit '));
      if (failed) throw new Error(failed);
      return this.lines.some((l) => l.startsWith(text));
    }, `the script to print "${text}"`);
  }
}

describe('stbt.pressing: a real hold (lircd SEND_START/SEND_STOP, virtual key down/up)', function () {
  this.timeout(60_000);
  let dir: string;
  let server: ControlServer | undefined;
  let channel: RunControlChannel | undefined;
  let script: Script | undefined;
  /** Every press the control socket asked for, to wait until each has ended. */
  let pending: Promise<unknown>[] = [];

  const testPack = {
    readFile: async (_sha: string, file: string) => (file === VSTB_REMOTE_FILE ? VSTB_LIRCD_CONF : undefined),
    config: async () => ({}),
    remoteControls: async () => ['vstb'],
  } as unknown as ConstructorParameters<typeof KeyPresser>[0]['testPack'];

  const start = async (transport: IrTransport): Promise<{ script: Script; flag: string }> => {
    const presser = new KeyPresser({ testPack, transport });
    const keys = {
      press: (key: string, opts: Parameters<KeyPresser['press']>[1]) => {
        const p = presser.press(key, opts);
        pending.push(p.catch(() => undefined));
        return p;
      },
    };
    server = new ControlServer({ keys, latestFrame: () => undefined, tmpDir: dir });
    channel = await server.open({ resultDir: dir, testPackSha: 'a'.repeat(40), remote: 'vstb' });
    const flag = path.join(dir, 'leave-the-block');
    script = new Script(channel.env, flag);
    return { script, flag };
  };

  beforeEach(async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'farmhand-pressing-'));
    pending = [];
  });
  afterEach(async () => {
    if (script && script.child.exitCode === null) script.child.kill('SIGKILL');
    await script?.exit;
    await channel?.close();
    await server?.close();
    script = channel = server = undefined;
    await rm(dir, { recursive: true, force: true });
  });

  describe('on a real lircd', () => {
    let lircd: ChildProcess;
    beforeEach(async () => {
      await writeFile(path.join(dir, 'vstb.conf'), VSTB_LIRCD_CONF);
      lircd = spawn('lircd', ['--nodaemon', '-H', 'file', '-d', path.join(dir, 'out'), '-o', path.join(dir, 'sock'),
        '-P', path.join(dir, 'pid'), '-L', path.join(dir, 'log'), '-O', '/dev/null', path.join(dir, 'vstb.conf')], { stdio: 'ignore' });
      await waitForLircdSocket(path.join(dir, 'sock'), lircd);
    });
    afterEach(async () => {
      if (lircd.exitCode === null) {
        const exited = new Promise((r) => lircd.once('exit', r));
        lircd.kill('SIGTERM');
        await exited;
      }
    });

    it('repeats the key while the block runs and not after the release is acknowledged', async () => {
      const out = path.join(dir, 'out');
      const sent = () => readFile(out, 'utf8').catch(() => '');
      const repeatFrame = formatIrsimsend(new LircEncoder(vstbRemote()).simsend('KEY_UP', 2).slice(1));
      const count = (text: string) => text.split(repeatFrame).length - 1;
      const { script: s, flag } = await start(new LircdTransport(path.join(dir, 'sock')));
      await s.line('in-block');
      // The block started once lircd had the key down: its first frame is out already.
      const press = formatIrsimsend(new LircEncoder(vstbRemote()).sendOnce('KEY_UP'));
      expect((await sent()).startsWith(press), await sent()).to.equal(true);
      // Held: lircd keeps sending the key's repeat frames while the script is inside its block.
      await waitFor(async () => count(await sent()) >= 3, 'lircd to send 3 repeats of the held key');
      await writeFile(flag, '');
      await s.line('released True');
      const atRelease = await sent();
      await s.line('done');
      expect(await s.exit).to.equal(0);
      // After the release was acknowledged, lircd sent the next key and nothing else: no repeat of the held key.
      const after = (await sent()).slice(atRelease.length);
      expect(after).to.equal(formatIrsimsend(new LircEncoder(vstbRemote()).sendOnce('KEY_OK')));
    });

    it('a run that ends while the key is held stops lircd repeating (SEND_STOP)', async () => {
      const out = path.join(dir, 'out');
      const { script: s } = await start(new LircdTransport(path.join(dir, 'sock')));
      await s.line('in-block');
      await waitFor(async () => (await readFile(out, 'utf8').catch(() => '')).includes('space 2250'), 'lircd to repeat the held key');
      // The run ends (a timeout or a stop) with the script still inside its block.
      s.child.kill('SIGKILL');
      await channel!.close();
      await Promise.all(pending);
      const atEnd = await readFile(out, 'utf8');
      // lircd is not repeating any more: it takes the next key at once (it refuses any send while repeating).
      await new LircdTransport(path.join(dir, 'sock')).sendKey('vstb', 'KEY_OK');
      expect((await readFile(out, 'utf8')).slice(atEnd.length)).to.equal(formatIrsimsend(new LircEncoder(vstbRemote()).sendOnce('KEY_OK')));
    });
  });

  describe('on the virtual set-top box', () => {
    it('holds the key down from inside the block until the release, then presses the next key', async () => {
      const box = createVirtualStb({ width: 64, height: 36, fps: 25, now: () => 1_790_000_000_000 });
      const seen: string[] = [];
      const transport = new VirtualTransport((e) => {
        box.transportListener(e);
        seen.push(`${e.hold ?? 'press'} ${e.key?.key ?? '?'} held=${box.heldKey() ?? '-'}`);
      });
      try {
        const { script: s, flag } = await start(transport);
        await s.line('in-block');
        // The block started once the box had the key down.
        expect(box.heldKey()).to.equal('KEY_UP');
        expect(seen).to.deep.equal(['down KEY_UP held=KEY_UP']);
        await writeFile(flag, '');
        await s.line('released True');
        // The key was up on the box before pressing() returned (the script may be pressing KEY_OK by now).
        expect(box.heldKey()).to.equal(undefined);
        expect(seen.slice(0, 2)).to.deep.equal(['down KEY_UP held=KEY_UP', 'up KEY_UP held=-']);
        await s.line('done');
        expect(await s.exit).to.equal(0);
        expect(seen).to.deep.equal(['down KEY_UP held=KEY_UP', 'up KEY_UP held=-', 'press KEY_OK held=-']);
      } finally {
        box.stop();
      }
    });
  });
});
