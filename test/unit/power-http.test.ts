/**
 * The HTTP outlet drivers against an HTTP server on loopback that speaks each family's protocol
 * (test/unit/power-peers.ts): the exact requests, the read-back, credentials (sent, never shown),
 * and faults (refused, unreachable, slow, not an outlet) as clear errors within the timeout.
 * The per-PDU queue: concurrent requests to one PDU never overlap at the peer.
 */
import { expect } from 'chai';
import { FarmError } from '../../src/core/errors.js';
import { createPowerOutlet, type PowerOutlet } from '../../src/hardware/power/index.js';
import { busyPdus } from '../../src/hardware/power/serialise.js';
import { startHttpOutlets, type HttpPeer } from './power-peers.js';

async function refusal(p: Promise<unknown>): Promise<FarmError> {
  try {
    await p;
  } catch (e) {
    expect(e).to.be.instanceOf(FarmError);
    return e as FarmError;
  }
  throw new Error('expected a refusal');
}

const CASES: Array<{ uri: string; outlet: number; off: string; on: string; read: string }> = [
  { uri: 'netio+http://netio:pw@127.0.0.1:PORT/2', outlet: 2, off: 'POST /netio.json', on: 'POST /netio.json', read: 'GET /netio.json' },
  { uri: 'aviosys+http://admin:12345678@127.0.0.1:PORT/3', outlet: 3, off: 'GET /set.cmd?cmd=setpower+p63=0', on: 'GET /set.cmd?cmd=setpower+p63=1', read: 'GET /set.cmd?cmd=getpower' },
  { uri: 'aviosys+http://admin:12345678@127.0.0.1:PORT/4?base=60', outlet: 3, off: 'GET /set.cmd?cmd=setpower+p63=0', on: 'GET /set.cmd?cmd=setpower+p63=1', read: 'GET /set.cmd?cmd=getpower' },
  { uri: 'shelly+http://admin:pw@127.0.0.1:PORT/0', outlet: 1, off: 'GET /relay/0?turn=off', on: 'GET /relay/0?turn=on', read: 'GET /relay/0' },
  { uri: 'shelly2+http://127.0.0.1:PORT/1', outlet: 2, off: 'GET /rpc/Switch.Set?id=1&on=false', on: 'GET /rpc/Switch.Set?id=1&on=true', read: 'GET /rpc/Switch.GetStatus?id=1' },
  { uri: 'tasmota+http://admin:pw@127.0.0.1:PORT/2', outlet: 2, off: 'GET /cm?cmnd=Power2%20Off&user=admin&password=pw', on: 'GET /cm?cmnd=Power2%20On&user=admin&password=pw', read: 'GET /cm?cmnd=Power2&user=admin&password=pw' },
];

describe('power outlet: HTTP families against an HTTP outlet on loopback', function () {
  this.timeout(30_000);
  const peers: HttpPeer[] = [];
  const peer = async (o: Parameters<typeof startHttpOutlets>[0] = {}): Promise<HttpPeer> => {
    const p = await startHttpOutlets(o);
    peers.push(p);
    return p;
  };
  const outlet = (uri: string, p: HttpPeer): PowerOutlet => createPowerOutlet(uri.replace('PORT', String(p.port)))!;
  afterEach(async () => {
    await Promise.all(peers.splice(0).map((p) => p.stop()));
    expect(busyPdus()).to.equal(0);
  });

  for (const c of CASES) {
    it(`${c.uri.split(':')[0]}${c.uri.includes('base=') ? ' (base=60)' : ''}: the family's requests switch outlet ${c.outlet}; read back; cycle`, async () => {
      const creds = /\/\/([^:]+):([^@]+)@/.exec(c.uri);
      const p = await peer(creds ? { user: creds[1]!, password: creds[2]! } : {});
      const o = outlet(c.uri, p);
      expect(await o.get()).to.equal(true);
      expect(await o.set(false)).to.equal(false);
      expect(p.outlets.get(c.outlet)).to.equal(false);
      expect([...p.outlets].filter(([, on]) => !on).map(([n]) => n)).to.deep.equal([c.outlet]);
      expect(p.requests.slice(0, 3)).to.deep.equal([c.read, c.off, c.read]);
      expect(await o.cycle(0)).to.equal(true);
      expect(p.requests.slice(3)).to.deep.equal([c.off, c.read, c.on, c.read]);
      expect(p.outlets.get(c.outlet)).to.equal(true);
      expect(o.uri).not.to.contain(creds?.[2] ?? '\0');
    });
  }

  it('two outlets of one PDU asked at once: the peer never holds two requests; another PDU\'s outlet switches too', async () => {
    const p = await peer({ delayMs: 20 });
    // The peer can see overlap: two requests sent straight at it at once are held together.
    await Promise.all([fetch(`http://127.0.0.1:${p.port}/relay/0`).then((r) => r.text()), fetch(`http://127.0.0.1:${p.port}/relay/1`).then((r) => r.text())]);
    expect(p.maxInFlight).to.equal(2);
    p.maxInFlight = 0;
    const a = outlet('shelly+http://127.0.0.1:PORT/0', p);
    const b = outlet('shelly+http://127.0.0.1:PORT/1', p);
    const c = outlet('tasmota+http://127.0.0.1:PORT/3', p);
    const other = await peer({ delayMs: 20 });
    const d = outlet('shelly+http://127.0.0.1:PORT/2', other);
    const results = await Promise.all([a.set(false), b.set(false), c.cycle(0), a.get(), b.set(true), d.set(false)]);
    // a.get() ran before or after a's switch (both were asked at once); the switches all held.
    expect([...results.slice(0, 3), ...results.slice(4)]).to.deep.equal([false, false, true, true, false]);
    expect(p.maxInFlight).to.equal(1);
    expect([p.outlets.get(1), p.outlets.get(2), p.outlets.get(3), other.outlets.get(3)]).to.deep.equal([false, true, true, false]);
  });

  it('wrong credentials: a clear refusal naming power.uri, the password not in it', async () => {
    const p = await peer({ user: 'admin', password: 'right' });
    for (const uri of ['netio+http://admin:Wr0ng@127.0.0.1:PORT/1', 'tasmota+http://admin:Wr0ng@127.0.0.1:PORT/1']) {
      const e = await refusal(outlet(uri, p).set(false));
      expect(e.code).to.equal('device_unavailable');
      expect(e.message).to.contain('HTTP 401').and.contain('power.uri').and.not.contain('Wr0ng');
    }
    expect(p.outlets.get(1)).to.equal(true);
  });

  it('unreachable, too slow, or not that kind of device: device_unavailable saying what to check', async () => {
    const gone = await peer();
    const port = gone.port;
    await gone.stop();
    const refused = await refusal(createPowerOutlet(`shelly+http://127.0.0.1:${port}/0?timeout=2`)!.set(false));
    expect(refused.message).to.contain('cannot reach').and.contain('ECONNREFUSED');
    const slow = await peer({ delayMs: 2000 });
    const late = await refusal(outlet('netio+http://127.0.0.1:PORT/1?timeout=0.2', slow).get());
    expect(late.message).to.contain('did not answer within 0.2 s');
    const other = await peer();
    const wrong = await refusal(outlet('netio+http://127.0.0.1:PORT/9', other).get());
    expect(wrong.message).to.contain('not as a netio device with outlet 9');
    const failing = await peer({ status: 500 });
    expect((await refusal(outlet('shelly2+http://127.0.0.1:PORT/0', failing).set(true))).message).to.contain('HTTP 500');
  });

  it('a relay that does not switch: the read-back says so (set resolves with the state read, cycle fails)', async () => {
    const p = await peer({ stuck: [1] });
    const o = outlet('shelly+http://127.0.0.1:PORT/0?timeout=0.3', p);
    expect(await o.set(false)).to.equal(true);
    expect(p.requests.filter((r) => r === 'GET /relay/0?turn=off')).to.have.length(1);
    expect(p.requests.filter((r) => r === 'GET /relay/0').length).to.be.greaterThan(1);
    const e = await refusal(o.cycle(0));
    expect(e.message).to.contain('still reads on after switching it off');
    expect(p.requests).not.to.include('GET /relay/0?turn=on');
  });
});
