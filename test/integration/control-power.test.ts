// The control socket's `power` request (stbt.PDU) and the outlets behind it:
// none (refused), virtual: (the virtual set-top box's mains), and one that fails.
import { expect } from 'chai';
import { mkdtemp, rm } from 'node:fs/promises';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FarmError } from '../../src/core/errors.js';
import type { RunControlChannel } from '../../src/core/ports.js';
import { LircEncoder } from '../../src/hardware/ir/lirc/index.js';
import { VirtualTransport } from '../../src/hardware/ir/transports/virtual.js';
import { createPowerOutlet, type PowerOutlet } from '../../src/hardware/power/index.js';
import { createVirtualStb, vstbRemote } from '../../src/hardware/virtual/index.js';
import { CONTROL_SOCKET_ENV, ControlServer } from '../../src/runner/control.js';

/** One JSON line out, one in (answers come in order on one connection). */
function asker(sock: Socket): (req: unknown) => Promise<Record<string, unknown>> {
  let buf = '';
  const waiting: ((line: string) => void)[] = [];
  sock.on('data', (d: Buffer) => {
    buf += d.toString('utf8');
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0 && waiting.length) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      waiting.shift()!(line);
    }
  });
  return (req) =>
    new Promise((resolve) => {
      waiting.push((line) => resolve(JSON.parse(line) as Record<string, unknown>));
      sock.write(`${JSON.stringify(req)}\n`);
    });
}

describe('ControlServer: power (stbt.PDU)', () => {
  let tmp: string;
  let server: ControlServer;
  let channel: RunControlChannel;
  let sock: Socket;
  let ask: (req: unknown) => Promise<Record<string, unknown>>;
  let lines: string[];

  async function open(power?: PowerOutlet, outlets?: ReadonlyMap<string, PowerOutlet>): Promise<void> {
    server = new ControlServer({ keys: { press: async () => undefined }, latestFrame: () => undefined, tmpDir: tmp, ...(power && { power }), ...(outlets && { outlets }) });
    channel = await server.open({ resultDir: '/results/1', testPackSha: 'a'.repeat(40), remote: 'tv' });
    lines = [];
    channel.onEvent!((t) => lines.push(t));
    sock = connect(channel.env[CONTROL_SOCKET_ENV]!);
    await new Promise<void>((resolve, reject) => sock.once('connect', resolve).once('error', reject));
    ask = asker(sock);
  }

  beforeEach(async () => {
    tmp = await mkdtemp(path.join(tmpdir(), 'farmhand-power-test-'));
  });
  afterEach(async () => {
    sock?.destroy();
    await server?.close();
    await rm(tmp, { recursive: true, force: true });
  });

  it('power.uri none: every power request is refused with not_found naming power.uri', async () => {
    await open(createPowerOutlet('none'));
    const a = await ask({ id: 1, op: 'power', on: true });
    expect(a).to.include({ id: 1, ok: false, error: 'not_found' });
    expect(a.message).to.contain('power.uri');
    expect(lines).to.deep.equal([]);
  });

  it('virtual: reads and switches the box\'s mains; off is black and deaf to keys, on is a cold boot', async () => {
    const stb = createVirtualStb({ width: 64, height: 36, fps: 1 });
    const transport = new VirtualTransport(stb.transportListener);
    const enc = new LircEncoder(vstbRemote());
    const press = (key: string) => transport.send(enc.sendOnce(key), { key: { remote: 'vstb', key } });
    try {
      await open(createPowerOutlet('virtual:', { virtualStb: stb }));
      await press('KEY_DOWN');
      expect(stb.state().homeFocus).to.equal(1);
      expect(await ask({ id: 1, op: 'power' })).to.deep.equal({ id: 1, ok: true, on: true });
      expect(await ask({ id: 2, op: 'power', on: false })).to.deep.equal({ id: 2, ok: true, on: false });
      expect(stb.state().power).to.equal(false);
      await press('KEY_POWER'); // the remote cannot wake a box without mains
      expect(stb.state().power).to.equal(false);
      expect(await ask({ id: 3, op: 'power' })).to.deep.equal({ id: 3, ok: true, on: false });
      expect(await ask({ id: 4, op: 'power', on: true })).to.deep.equal({ id: 4, ok: true, on: true });
      expect([stb.state().power, stb.state().page, stb.state().homeFocus]).to.deep.equal([true, 'home', 0]);
      expect(lines).to.deep.equal(['power off outlet=virtual:', 'power on outlet=virtual:']);
    } finally {
      stb.stop();
      await transport.close();
    }
  });

  it('refuses a bad "on", and an outlet name the node does not have (naming the ones it has)', async () => {
    const stb = createVirtualStb({ width: 64, height: 36, fps: 1 });
    try {
      await open(createPowerOutlet('virtual:', { virtualStb: stb }));
      expect(await ask({ id: 1, op: 'power', on: 'off' })).to.include({ ok: false, error: 'invalid_request' });
      const named = await ask({ id: 2, op: 'power', outlet: 'lamp' });
      expect(named).to.include({ ok: false, error: 'not_found' });
      expect(named.message).to.contain('"lamp"').and.to.contain('no named outlets');
      expect(await ask({ id: 3, op: 'power', outlet: 7 })).to.include({ ok: false, error: 'invalid_request' });
      expect(stb.mains()).to.equal(true);
    } finally {
      stb.stop();
    }
  });

  it('power.outlets: "outlet" switches that outlet, not the device\'s; an unknown name lists the known ones', async () => {
    const stb = createVirtualStb({ width: 64, height: 36, fps: 1 });
    let router = true;
    const routerOutlet: PowerOutlet = {
      uri: 'snmp://***@pdu.lab/3',
      offSecs: 5,
      get: async () => router,
      set: async (on) => (router = on),
      cycle: async () => (router = true),
    };
    try {
      await open(createPowerOutlet('virtual:', { virtualStb: stb }), new Map([['router', routerOutlet]]));
      expect(await ask({ id: 1, op: 'power', outlet: 'router', on: false })).to.deep.equal({ id: 1, ok: true, on: false });
      expect([router, stb.mains()]).to.deep.equal([false, true]);
      expect(await ask({ id: 2, op: 'power', outlet: 'router' })).to.deep.equal({ id: 2, ok: true, on: false });
      expect(await ask({ id: 3, op: 'power' })).to.deep.equal({ id: 3, ok: true, on: true }); // the device's own
      expect(await ask({ id: 4, op: 'power', outlet: 'router', cycle: true, off_secs: 0 })).to.deep.equal({ id: 4, ok: true, on: true });
      const unknown = await ask({ id: 5, op: 'power', outlet: 'lamp', on: false });
      expect(unknown).to.include({ ok: false, error: 'not_found' });
      expect(unknown.message).to.contain('"router"');
      expect(lines).to.deep.equal(['power off outlet=snmp://***@pdu.lab/3', 'power cycle (off 0 s) outlet=snmp://***@pdu.lab/3']);
    } finally {
      stb.stop();
    }
  });

  it('power.outlets without power.uri: a named outlet works, the device\'s own is still refused', async () => {
    let lamp = false;
    const lampOutlet: PowerOutlet = { uri: 'shelly+http://lamp.lab/0', offSecs: 5, get: async () => lamp, set: async (on) => (lamp = on), cycle: async () => (lamp = true) };
    await open(undefined, new Map([['lamp', lampOutlet]]));
    expect(await ask({ id: 1, op: 'power', outlet: 'lamp', on: true })).to.deep.equal({ id: 1, ok: true, on: true });
    const own = await ask({ id: 2, op: 'power', on: false });
    expect(own).to.include({ ok: false, error: 'not_found' });
    expect(own.message).to.contain('power.uri');
  });

  it('an outlet that fails or does not take the state is an error, and the log says so', async () => {
    let reads = false;
    await open({
      uri: 'test:',
      offSecs: 5,
      get: async () => reads,
      set: async (on) => {
        if (!on) throw new FarmError('device_unavailable', 'the PDU did not answer');
        return reads;
      },
      cycle: async () => reads,
    });
    expect(await ask({ id: 1, op: 'power', on: false })).to.deep.equal({ id: 1, ok: false, error: 'device_unavailable', message: 'the PDU did not answer' });
    const stuck = await ask({ id: 2, op: 'power', on: true });
    expect(stuck).to.include({ ok: false, error: 'device_unavailable' });
    expect(stuck.message).to.contain('still reads off');
    reads = true;
    expect(await ask({ id: 3, op: 'power', on: true })).to.deep.equal({ id: 3, ok: true, on: true });
    expect(lines[1]).to.equal('power off outlet=test:: failed: device_unavailable: the PDU did not answer');
  });

  it('cycle: off, off_secs, on in one request and one log line; bad cycle requests are refused', async () => {
    const stb = createVirtualStb({ width: 64, height: 36, fps: 1 });
    const seen: boolean[] = [];
    const mains = (on?: boolean): boolean => {
      if (on !== undefined && on !== stb.mains()) seen.push(on);
      return stb.mains(on);
    };
    try {
      await open(createPowerOutlet('virtual:', { virtualStb: { mains } }));
      expect(await ask({ id: 1, op: 'power', cycle: true, off_secs: 0 })).to.deep.equal({ id: 1, ok: true, on: true });
      expect(seen).to.deep.equal([false, true]);
      expect(lines).to.deep.equal(['power cycle (off 0 s) outlet=virtual:']);
      expect(await ask({ id: 2, op: 'power', cycle: 'yes' })).to.include({ ok: false, error: 'invalid_request' });
      expect(await ask({ id: 3, op: 'power', cycle: true, on: false })).to.include({ ok: false, error: 'invalid_request' });
      expect(await ask({ id: 4, op: 'power', cycle: true, off_secs: -1 })).to.include({ ok: false, error: 'invalid_request' });
      expect(seen).to.have.length(2);
    } finally {
      stb.stop();
    }
  });

  it('a switch logs power.uri with its credentials masked', async () => {
    let on = true;
    await open({ uri: 'netio+http://***@pdu.lab/1', offSecs: 5, get: async () => on, set: async (v) => (on = v), cycle: async () => true });
    expect(await ask({ id: 1, op: 'power', on: false })).to.deep.equal({ id: 1, ok: true, on: false });
    expect(lines).to.deep.equal(['power off outlet=netio+http://***@pdu.lab/1']);
    expect(createPowerOutlet('netio+http://admin:pw@pdu.lab/1')!.uri).to.equal('netio+http://***@pdu.lab/1');
  });

  it('an unreachable PDU: a clear device_unavailable at the press, logged, never a hang', async () => {
    const gone = createServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    const { port } = gone.address() as AddressInfo;
    await new Promise((resolve) => gone.close(resolve));
    await open(createPowerOutlet(`netio+http://netio:s3cret@127.0.0.1:${port}/1?timeout=2`));
    const a = await ask({ id: 1, op: 'power', cycle: true, off_secs: 0 });
    expect(a).to.include({ id: 1, ok: false, error: 'device_unavailable' });
    expect(a.message).to.contain('cannot reach').and.contain(`127.0.0.1:${port}`);
    expect(lines).to.have.length(2);
    expect(lines[1]).to.match(/^power cycle \(off 0 s\) outlet=netio\+http:\/\/\*\*\*@127\.0\.0\.1:\d+\/1\?timeout=2: failed: device_unavailable: cannot reach/);
    expect(lines.join('\n')).not.to.contain('s3cret');
  });

  it('createPowerOutlet: none is no outlet; virtual: needs the box; a bad URI is refused saying why', () => {
    expect(createPowerOutlet('none')).to.equal(undefined);
    expect(() => createPowerOutlet('virtual:')).to.throw(/virtual set-top box/);
    expect(() => createPowerOutlet('snmp://pdu')).to.throw(/outlet number/);
    expect(() => createPowerOutlet('ftp://pdu/1')).to.throw(/power\.uri "ftp:\/\/pdu\/1": unknown URI scheme/);
  });
});
