import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '../../src/logger.js';
import { SdNotify } from '../../src/service/sdNotify.js';
import { waitFor } from '../helpers/wait.js';

/** A stand-in for systemd's notify socket: a real AF_UNIX datagram socket, each message printed as JSON. */
function listen(socketPath: string): Promise<{ child: ChildProcess; messages: string[] }> {
  const script = [
    'import json, socket, sys',
    's = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)',
    `s.bind(${JSON.stringify(socketPath)})`,
    'print("ready", flush=True)',
    'while True:',
    '    print(json.dumps(s.recv(4096).decode()), flush=True)',
  ].join('\n');
  const child = spawn('/usr/bin/python3', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const messages: string[] = [];
  return new Promise((resolve) => {
    let buf = '';
    child.stdout.on('data', (b: Buffer) => {
      buf += b.toString();
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        if (line === 'ready') resolve({ child, messages });
        else messages.push(JSON.parse(line) as string);
      }
    });
  });
}

describe('sd_notify', () => {
  let dir: string;
  let listener: { child: ChildProcess; messages: string[] };
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-notify-'));
    listener = await listen(path.join(dir, 'notify'));
  });
  after(async () => {
    listener.child.kill();
    await rm(dir, { recursive: true, force: true });
  });

  it('sends READY=1 with a status, then WATCHDOG=1 at half of WATCHDOG_USEC, and STOPPING=1', async () => {
    const n = new SdNotify(silentLogger, { NOTIFY_SOCKET: path.join(dir, 'notify'), WATCHDOG_USEC: '1000000' });
    n.ready('listening on http://127.0.0.1:8080');
    // At half of 1 s the second ping comes after about a second; a wrong interval (none, or systemd's whole
    // minute) would time this wait out.
    const m = listener.messages;
    await waitFor(() => m.filter((x) => x === 'WATCHDOG=1').length >= 2, 'two watchdog pings');
    n.stopping(30);
    await waitFor(() => m.at(-1)?.startsWith('STOPPING=1'), 'STOPPING=1');
    n.close();
    expect(m[0]).to.equal(`READY=1\nSTATUS=listening on http://127.0.0.1:8080\nMAINPID=${process.pid}`);
    expect(m.at(-1)).to.equal('STOPPING=1\nEXTEND_TIMEOUT_USEC=30000000');
  });

  it('does nothing without NOTIFY_SOCKET (not under systemd)', () => {
    const n = new SdNotify(silentLogger, {});
    expect(n.enabled).to.equal(false);
    n.ready('x');
    n.close();
  });
});
