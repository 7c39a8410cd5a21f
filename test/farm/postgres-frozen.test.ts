/**
 * The fault "PostgreSQL frozen": the server's processes stopped with SIGSTOP,
 * so its sockets stay open and nothing answers, as with a hung host or a
 * network that drops packets without a reset. A restart is refused at once
 * (test/farm/postgres-restart.test.ts); a freeze is only noticed by a timeout.
 *
 * Requests that need the database must answer 503 database_unavailable, not
 * hang with their query; a transaction caught by the freeze must leave nothing
 * half made; and once the server continues, the pool must not hand out the
 * connections still busy with the queries that timed out.
 */
import { expect } from 'chai';
import { startTestFarm, type TestFarm, throughReplicas } from '../helpers/farm.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'frozen-db-node';

describe('farm fault: PostgreSQL frozen under the portal (SIGSTOP: connections open, no answer)', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): PostgreSQL away past a lease: a replica then stops and exits by design (docs/farm.md, "Leases"), not restarted in-process.
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(120_000);
  let cluster: TestPostgres;
  let farm: TestFarm;
  let alice: string;
  let frozen = false;

  const call = async (method: string, p: string, body?: unknown) => {
    const r = await fetch(`${farm.url}${p}`, {
      method,
      headers: { Authorization: `token ${alice}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: r.status, type: r.headers.get('content-type') ?? '', body: (await r.json()) as Record<string, unknown> };
  };

  before(async () => {
    cluster = await startPostgres();
    // 1 s: the test need not wait the default 10 s for each answer; the behaviour is the same.
    farm = await startTestFarm({ cluster, portal: { database_query_timeout_secs: 1, database_pool_size: 4 } });
    await farm.addNode(NODE, { config: { capture: { uri: 'none:' } } });
    alice = await farm.tokenFor('alice');
  });
  after(async () => {
    if (frozen) await cluster.thaw();
    await farm?.stop();
    await cluster?.stop();
  });

  it('answers 503 database_unavailable instead of hanging; a reservation caught by the freeze is not made; the pool recovers after', async () => {
    // The pool holds open connections: without a query timeout, the next query would be written to one and wait forever.
    for (let i = 0; i < 4; i++) expect((await call('GET', '/api/v2/results')).status).to.equal(200);
    // Several idle connections, not one: the reservations sweeper (every second) may hold one when the request
    // comes, and the request must still find an open one (a new connection would time out connecting instead).
    await Promise.all([0, 1, 2].map(() => farm.portal.pool.query('SELECT pg_sleep(0.05)')));

    await cluster.freeze();
    frozen = true;
    const list = await call('GET', '/api/v2/results');
    expect([list.status, list.type, list.body.error]).to.deep.equal([503, 'application/json; charset=utf-8', 'database_unavailable']);
    // Its query went to an open connection and timed out (a new connection would say "cannot be reached").
    expect(list.body.message).to.contain('did not answer in time');
    const reserve = await call('POST', '/api/v2/reservations', { node_ids: [NODE], message: 'during the freeze' });
    expect([reserve.status, reserve.body.error]).to.deep.equal([503, 'database_unavailable']);
    const csv = await fetch(`${farm.url}/api/v2/results.csv`, { headers: { Authorization: `token ${alice}` } });
    expect(csv.status).to.equal(503);
    await csv.body?.cancel();

    await cluster.thaw();
    frozen = false;
    // The connections that timed out were destroyed, not pooled: every request after the thaw is answered,
    // more of them than the pool holds. The first may still meet the server catching up.
    await waitFor(async () => (await call('GET', '/api/v2/results')).status === 200, { what: 'the portal to read the database again', timeoutMs: 30_000 });
    for (let i = 0; i < 12; i++) {
      const r = await call('GET', '/api/v2/results');
      expect(r.status, `request ${i} after the thaw`).to.equal(200);
    }
    // Nothing half made: the node is free, and reserving it now works.
    const node = await call('GET', `/api/v2/nodes/${NODE}`);
    expect(node.body.reservation).to.equal(null);
    expect((await farm.db.query('SELECT count(*)::int AS n FROM reservation_nodes WHERE node_id = $1', [NODE])).rows[0].n).to.equal(0);
    const again = await call('POST', '/api/v2/reservations', { node_ids: [NODE], message: 'after the freeze' });
    expect(again.status, JSON.stringify(again.body)).to.equal(200);
  });
});
