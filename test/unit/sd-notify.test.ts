import { expect } from 'chai';
import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '../../src/logger.js';
import { SdNotify } from '../../src/service/sdNotify.js';
import { notifySocket } from '../helpers/notifySocket.js';
import { waitFor } from '../helpers/wait.js';

describe('sd_notify', () => {
  let dir: string;
  let listener: { child: ChildProcess; messages: string[] };
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-notify-'));
    listener = await notifySocket(path.join(dir, 'notify'));
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
