// AdbTransport through a real adb server (Debian's adb, started here on its own port with its own HOME) and adbkit,
// against a fake device that speaks adb's transport protocol over TCP (`adb connect` reaches it): the shell
// commands a press runs, names checked first, and the failures (no server, unknown or unreachable device, a
// device without `input`, a silent device) as device_unavailable in time.
import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createConnection, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AdbTransport, createIrTransport } from '../../src/hardware/ir/transports/index.js';
import { adbServerFromEnv, networkDevice } from '../../src/hardware/ir/transports/adb.js';
import { farmRejection } from '../helpers/rejections.js';
import { waitFor } from '../helpers/wait.js';
import { startFakeAdbDevice, type FakeAdbDevice } from './adb-fake-device.js';

async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

const accepts = (port: number) =>
  new Promise<boolean | undefined>((resolve) => {
    const c = createConnection(port, '127.0.0.1');
    c.on('connect', () => (c.destroy(), resolve(true)));
    c.on('error', () => resolve(undefined));
  });

describe('AdbTransport (real adb server, fake device over TCP)', function () {
  this.timeout(30_000);
  let home: string;
  let server: ChildProcess;
  let port: number;
  let dev: FakeAdbDevice;
  let t: AdbTransport;

  before(async () => {
    home = await mkdtemp(path.join(tmpdir(), 'farmhand-adb-'));
    port = await freePort();
    server = spawn('adb', ['-P', String(port), 'nodaemon', 'server'], { env: { ...process.env, HOME: home, ADB_MDNS: '0' }, stdio: 'ignore' });
    await waitFor(() => accepts(port), { what: 'the adb server to listen', timeoutMs: 15_000 });
  });
  after(async () => {
    if (server?.exitCode === null) {
      const gone = new Promise((r) => server.once('exit', r));
      server.kill('SIGTERM');
      await gone;
    }
    await rm(home, { recursive: true, force: true });
  });
  beforeEach(async () => {
    dev = await startFakeAdbDevice();
    t = createIrTransport(`adb:${dev.serial}`, { adbServer: { host: '127.0.0.1', port }, timeoutMs: 5000 }) as AdbTransport;
  });
  afterEach(async () => {
    await t?.close();
    await dev?.close();
  });

  it('connects to a host:port device and presses keys as input keyevent <code>', async () => {
    await t.sendKey('any', 'KEY_OK');
    await t.sendKey('any', 'keycode_home');
    await t.sendKey('any', 'KEY_VOLUMEUP', { holdMs: 800 });
    await t.sendKey('any', 'KEY_Z');
    expect(dev.commands).to.deep.equal(['input keyevent 23', 'input keyevent 3', 'input keyevent --longpress 24', 'input keyevent 54']);
  });

  it('an unknown key is invalid_request and nothing runs on the device', async () => {
    for (const k of ['KEY_NOSUCH', 'KEYCODE_NOSUCH', 'KEYCODE_UNKNOWN', '23', 'KEYCODE_HOME; reboot']) {
      const e = await farmRejection(t.sendKey('any', k));
      expect(e.code, k).to.equal('invalid_request');
      expect(e.message).to.match(/no Android equivalent/);
    }
    expect(dev.commands).to.deep.equal([]);
  });

  it('a device whose shell has no input command, and a silent device, are device_unavailable', async () => {
    dev.mode = 'no-input';
    const e = await farmRejection(t.sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.match(/inaccessible or not found/);
    dev.mode = 'silent';
    const slow = new AdbTransport(dev.serial, { server: { host: '127.0.0.1', port }, timeoutMs: 500 });
    const late = await farmRejection(slow.sendKey('any', 'KEY_OK'));
    expect(late.code).to.equal('device_unavailable');
    expect(late.message).to.match(/no answer to "input keyevent 23" within 500 ms/);
    await slow.close();
  });

  it('a device the server does not have, an unreachable host:port and no adb server are device_unavailable', async () => {
    const usb = new AdbTransport('R58M000FAKE', { server: { host: '127.0.0.1', port } });
    expect((await farmRejection(usb.sendKey('any', 'KEY_OK'))).message).to.match(/adb:R58M000FAKE.*not found/);
    const gone = new AdbTransport(`127.0.0.1:${await freePort()}`, { server: { host: '127.0.0.1', port } });
    const unreachable = await farmRejection(gone.sendKey('any', 'KEY_OK'));
    expect(unreachable.code).to.equal('device_unavailable');
    const noServer = new AdbTransport(dev.serial, { server: { host: '127.0.0.1', port: await freePort() } });
    const e = await farmRejection(noServer.sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.match(/no adb server answers at 127\.0\.0\.1:\d+: start one/);
    for (const x of [usb, gone, noServer]) await x.close();
  });

  it('URIs, the server from the environment, and network serials', () => {
    for (const u of ['adb:', 'adb:has space', 'adb:a/b']) expect(() => createIrTransport(u), u).to.throw().with.property('code', 'invalid_request');
    expect(adbServerFromEnv({ ADB_SERVER_SOCKET: 'tcp:10.1.2.3:5038' })).to.deep.equal({ host: '10.1.2.3', port: 5038 });
    expect(adbServerFromEnv({ ANDROID_ADB_SERVER_PORT: '5040' })).to.deep.equal({ host: '127.0.0.1', port: 5040 });
    expect(adbServerFromEnv({})).to.deep.equal({ host: '127.0.0.1', port: 5037 });
    expect(networkDevice('192.168.1.20:5555')).to.deep.equal({ host: '192.168.1.20', port: 5555 });
    expect(networkDevice('emulator-5554')).to.equal(undefined);
  });
});
