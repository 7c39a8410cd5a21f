// The portal's farm-wide event stream (the node's EventStream over the outbox) under the same rules as
// a node's (docs/events.md, "Who gets a stream"): a share per caller, slots kept for signed-in people,
// and a stream that ends once its token is revoked (`farmhand farm token revoke`: PgTokens.revoke).
// A real portal on a throwaway PostgreSQL cluster.
import { expect } from 'chai';
import http from 'node:http';
import { PgTokens } from '../../src/farm/users.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { SseClient } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';

describe('farm portal: event streams per caller, and revocation', function () {
  this.timeout(120_000);
  let farm: TestFarm;
  const held: http.ClientRequest[] = [];
  const clients: SseClient[] = [];

  before(async () => {
    farm = await startTestFarm();
  });
  after(async () => {
    for (const r of held) r.destroy();
    for (const c of clients) c.close();
    await farm?.stop();
  });

  it('anonymous streams from one address get 8 of 64; a token holder still gets one; revoking the token ends it, not another', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 70; i++) {
      const status = await new Promise<number>((resolve, reject) => {
        const req = http.get(`${farm.url}/app/events`, { agent: false, headers: { Accept: 'text/event-stream' } }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.on('error', reject);
        held.push(req);
      });
      statuses.push(status);
    }
    // The shares are each portal process's own: through n replicas behind HAProxy (roundrobin, 70 requests: more than
    // 8 at each), 8 at each (docs/testing.md, "The farm suite through replicas").
    expect(statuses.filter((s) => s === 200)).to.have.length(8 * (farm.replicas?.portals.length ?? 1));
    const alice = await farm.tokenFor('alice');
    const bob = await farm.tokenFor('bob');
    const hers = await SseClient.open(`${farm.url}/api/v2/events`, { Authorization: `token ${alice}` });
    const his = await SseClient.open(`${farm.url}/api/v2/events`, { Authorization: `token ${bob}` });
    clients.push(hers, his);
    expect([hers.res.statusCode, his.res.statusCode]).to.deep.equal([200, 200]);
    await new PgTokens(farm.db).revoke(alice.slice(3, 11));
    await waitFor(() => hers.ended, { what: "the revoked token's stream to end", timeoutMs: 30_000 });
    // The pass over the open streams that ended hers checked his too.
    expect(his.ended).to.equal(false);
  });
});
