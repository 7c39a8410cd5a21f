// RateLimiter's bookkeeping: refill, caps, bounded memory; and clients told apart by address over real sockets.
import { expect } from 'chai';
import Koa from 'koa';
import { once } from 'node:events';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { silentLogger } from '../../src/logger.js';
import { errorHandler } from '../../src/http/errors.js';
import { RateLimiter, rateLimit } from '../../src/http/rateLimit.js';

describe('RateLimiter', () => {
  let clock = 0;
  const make = (opts: { maxBuckets?: number; sweepEveryMs?: number } = {}) =>
    new RateLimiter({ requests_per_second: 10, burst: 5, artifact_burst: 50 }, { now: () => clock, ...opts });
  beforeEach(() => (clock = 0));

  const takeN = (l: RateLimiter, n: number, client = 'c', kind: 'api' | 'artifact' = 'api') =>
    Array.from({ length: n }, () => l.take(client, kind)).filter((r) => r === 0).length;

  it('allows a burst, then refills at requests_per_second, never above the burst', () => {
    const l = make();
    expect(takeN(l, 8)).to.equal(5);
    clock += 300; // 3 tokens back
    expect(takeN(l, 8)).to.equal(3);
    clock += 3_600_000; // an hour idle still leaves only a burst
    expect(takeN(l, 8)).to.equal(5);
    expect(takeN(l, 60, 'c', 'artifact')).to.equal(50);
  });

  it('a clock that steps back does not mint tokens or throw', () => {
    const l = make();
    takeN(l, 5);
    clock -= 10_000;
    expect(l.take('c', 'api')).to.equal(1);
  });

  it('memory stays bounded under a flood of distinct clients (least recently seen dropped first)', () => {
    const l = make({ maxBuckets: 100 });
    for (let i = 0; i < 5000; i++) {
      l.take(`addr:10.0.${i >> 8}.${i & 255}`, 'api');
      expect(l.size).to.be.at.most(100);
    }
    // The most recent client kept its bucket (4 left of 5).
    expect(takeN(l, 10, 'addr:10.0.19.135')).to.equal(4);
  });

  it('idle clients (buckets refilled to full) are swept, even below the cap', () => {
    const l = make({ sweepEveryMs: 60_000 });
    for (let i = 0; i < 300; i++) l.take(`client${i}`, i % 2 ? 'api' : 'artifact');
    expect(l.size).to.equal(300);
    clock += 61_000;
    l.take('new', 'api');
    expect(l.size).to.equal(1);
  });
});

describe('rate limiting by remote address', () => {
  it('two addresses without tokens have a bucket each (127.0.0.1 and 127.0.0.2, real sockets)', async () => {
    const app = new Koa();
    app.silent = true;
    app.use(errorHandler(silentLogger));
    app.use(rateLimit({ requests_per_second: 0.001, burst: 2, artifact_burst: 2 }, { now: () => 0 }));
    app.use((ctx) => (ctx.body = { ip: ctx.ip }));
    const server = http.createServer(app.callback()).listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as AddressInfo;
    const get = (localAddress: string) =>
      new Promise<number>((resolve, reject) => {
        http.get({ host: '127.0.0.1', port, path: '/api/v2/results', localAddress, agent: false }, (res) => {
          res.resume();
          resolve(res.statusCode!);
        }).on('error', reject);
      });
    try {
      const one = [await get('127.0.0.1'), await get('127.0.0.1'), await get('127.0.0.1')];
      const two = [await get('127.0.0.2'), await get('127.0.0.2'), await get('127.0.0.2')];
      expect(one).to.deep.equal([200, 200, 429]);
      expect(two).to.deep.equal([200, 200, 429]);
    } finally {
      server.close();
      await once(server, 'close');
    }
  });
});
