// RokuTransport against an ECP server on loopback (real HTTP): the requests a press, a hold, a launch and
// device-info make; 403 names the "Control by mobile apps" setting; unreachable and silent devices fail in time.
import { expect } from 'chai';
import { createServer } from 'node:net';
import { KeyPresser } from '../../src/hardware/ir/keys.js';
import { RokuTransport, createIrTransport } from '../../src/hardware/ir/transports/index.js';
import { farmRejection } from '../helpers/rejections.js';
import { startFakeEcp, type FakeEcp } from './roku-ecp-server.js';

const noPack = {
  readFile: () => Promise.reject(new Error('a key-map transport must not read remote files')),
  config: () => Promise.reject(new Error('unused')),
  remoteControls: () => Promise.reject(new Error('unused')),
};

/** A loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const port = (s.address() as { port: number }).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('RokuTransport (ECP over loopback HTTP)', () => {
  let ecp: FakeEcp;
  let t: RokuTransport;

  beforeEach(async () => {
    ecp = await startFakeEcp();
    t = createIrTransport(`roku:${ecp.url}`, { timeoutMs: 2000 }) as RokuTransport;
  });
  afterEach(async () => {
    await t?.close();
    await ecp?.close();
  });

  it('presses farmhand and Roku key names as POST /keypress/<Roku name>', async () => {
    for (const k of ['KEY_OK', 'KEY_UP', 'key_back', 'Home', 'instantreplay', 'KEY_7', 'Lit_é', 'KEY_POWER']) await t.sendKey('any', k);
    expect(ecp.requests).to.deep.equal(
      ['Select', 'Up', 'Back', 'Home', 'InstantReplay', 'Lit_7', 'Lit_%C3%A9', 'Power'].map((k) => ({ method: 'POST', path: `/keypress/${k}` })),
    );
    expect(t.uri).to.equal(`roku:${ecp.url}`);
  });

  it('a timed hold is keydown then keyup; a hold until released ends with keyup at the release', async () => {
    await t.sendKey('any', 'KEY_RIGHT', { holdMs: 30 });
    const release = new AbortController();
    let down = false;
    const held = t.holdKey('any', 'KEY_FASTFORWARD', { maxMs: 60_000, signal: release.signal, onDown: () => (down = true) });
    await ecp.waitFor(3);
    expect(ecp.requests[2]).to.deep.equal({ method: 'POST', path: '/keydown/Fwd' });
    release.abort();
    await held;
    expect(down).to.equal(true);
    expect(ecp.requests.map((r) => r.path)).to.deep.equal(['/keydown/Right', '/keyup/Right', '/keydown/Fwd', '/keyup/Fwd']);
  });

  it('launch and device-info', async () => {
    await t.launch('12', { contentId: 'abc 1', mediaType: 'movie' });
    const info = await t.deviceInfo();
    expect(ecp.requests).to.deep.equal([
      { method: 'POST', path: '/launch/12?contentId=abc+1&mediaType=movie' },
      { method: 'GET', path: '/query/device-info' },
    ]);
    expect(info).to.include({ 'model-name': 'Roku Ultra', 'serial-number': 'YH00AA123456', 'friendly-device-name': 'Lab & bench' });
    expect((await farmRejection(t.launch('999'))).code).to.equal('invalid_request');
    expect((await farmRejection(t.launch('../x'))).code).to.equal('invalid_request');
  });

  it('an unknown key is invalid_request and nothing is sent', async () => {
    for (const k of ['KEY_NOSUCH', 'Selectt', 'Lit_ab', 'rm -rf']) {
      const e = await farmRejection(t.sendKey('any', k));
      expect(e.code, k).to.equal('invalid_request');
      expect(e.message).to.match(/no Roku ECP equivalent/);
    }
    expect(ecp.requests).to.deep.equal([]);
  });

  it('403 is device_unavailable naming the "Control by mobile apps" setting', async () => {
    ecp.mode = 'forbidden';
    const e = await farmRejection(t.sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.match(/403/).and.match(/Control by mobile apps/);
    ecp.mode = 'error';
    expect((await farmRejection(t.sendKey('any', 'KEY_OK'))).message).to.match(/HTTP 500/);
  });

  it('a silent device fails after the timeout; an abort rejects with its reason', async () => {
    await t.close();
    t = new RokuTransport(ecp.url, { timeoutMs: 200 });
    ecp.mode = 'silent';
    const e = await farmRejection(t.sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.match(/did not answer POST \/keypress\/Select within 200 ms/);
    const ac = new AbortController();
    const p = t.sendKey('any', 'KEY_OK', { signal: ac.signal });
    ac.abort(new Error('run ended'));
    let reason: unknown;
    await p.catch((x: unknown) => (reason = x));
    expect((reason as Error).message).to.equal('run ended');
  });

  it('an unreachable device is device_unavailable at the press', async () => {
    const dead = new RokuTransport(`http://127.0.0.1:${await closedPort()}`, { timeoutMs: 2000 });
    const e = await farmRejection(dead.sendKey('any', 'KEY_OK'));
    expect(e.code).to.equal('device_unavailable');
    expect(e.message).to.match(/cannot be reached \(ECONNREFUSED\)/);
    await dead.close();
  });

  it('bad URIs are refused at creation; the port defaults to 8060', () => {
    for (const u of ['roku:', 'roku:192.168.1.2', 'roku:https://10.0.0.2:8060', 'roku:http://10.0.0.2:8060/path', 'roku:http://u@10.0.0.2']) {
      expect(() => createIrTransport(u), u).to.throw().with.property('code', 'invalid_request');
    }
    expect(createIrTransport('roku:http://10.0.0.2').uri).to.equal('roku:http://10.0.0.2:8060');
  });

  it('through the KeyPresser: no remote file is read, unknown keys are refused before anything is sent', async () => {
    const keys = new KeyPresser({ testPack: noPack, transport: t });
    await keys.press('KEY_DOWN', { remote: 'roku', testPackSha: 'a'.repeat(40) });
    await keys.press('KEY_LEFT', { remote: 'roku', testPackSha: 'a'.repeat(40), holdMs: 20 });
    const e = await farmRejection(keys.press('KEY_BOGUS', { remote: 'roku', testPackSha: 'a'.repeat(40) }));
    expect(e.code).to.equal('invalid_request');
    expect(ecp.requests.map((r) => r.path)).to.deep.equal(['/keypress/Down', '/keydown/Left', '/keyup/Left']);
  });
});
