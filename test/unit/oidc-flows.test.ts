// The node's OIDC flows in memory (src/http/oidc.ts MemoryFlowStore): used once, expired after their TTL, bounded.
// The portal's (PostgreSQL) are tested through 3 replicas: test/farm/portal-oidc-replicas.test.ts.
import { expect } from 'chai';
import { FLOW_LIMIT, MemoryFlowStore, type OidcFlow } from '../../src/http/oidc.js';

const flow = (next: string): OidcFlow => ({ state: 's', nonce: 'n', verifier: 'v', next, redirectUri: 'http://127.0.0.1/app/oidc/callback' });

describe('the OIDC flows of a node (in memory)', () => {
  it('a flow is taken once: the second take finds nothing', async () => {
    const store = new MemoryFlowStore();
    await store.put('a', flow('/x'), 60_000);
    expect((await store.take('a'))?.next).to.equal('/x');
    expect(await store.take('a')).to.equal(undefined);
    expect(store.size).to.equal(0);
  });

  it('a flow past its TTL is not answered, and is swept at the next start', async () => {
    let t = 1_000;
    const store = new MemoryFlowStore(() => t);
    await store.put('old', flow('/old'), 10);
    await store.put('kept', flow('/kept'), 10);
    t += 10;
    expect(await store.take('old')).to.equal(undefined);
    await store.put('new', flow('/new'), 10);
    expect(store.size).to.equal(1);
    expect((await store.take('new'))?.next).to.equal('/new');
  });

  it(`at most ${FLOW_LIMIT} flows wait: the oldest goes`, async () => {
    const store = new MemoryFlowStore();
    for (let i = 0; i <= FLOW_LIMIT; i++) await store.put(`f${i}`, flow(`/${i}`), 60_000);
    expect(store.size).to.equal(FLOW_LIMIT);
    expect(await store.take('f0')).to.equal(undefined);
    expect((await store.take(`f${FLOW_LIMIT}`))?.next).to.equal(`/${FLOW_LIMIT}`);
  });
});
