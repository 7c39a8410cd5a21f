// Node credentials on a real PostgreSQL cluster: registered once, verified in constant time,
// re-keyed, removed (with the rows that refer to the node), notified to the hub.
import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../src/farm/db/migrate.js';
import { listNodes, NODE_CREDENTIALS_CHANNEL, PgNodeCredentials, registerNode, removeNode } from '../../src/farm/nodeCredentials.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const codeOf = (p: Promise<unknown>) => p.then(() => 'resolved', (e: { code?: string }) => e.code);

describe('farm node credentials (PostgreSQL)', function () {
  this.timeout(60_000);
  let cluster: TestPostgres;
  let pool: pg.Pool;

  before(async () => {
    cluster = await startPostgres();
    pool = new pg.Pool({ host: cluster.host, port: cluster.port, user: cluster.user, database: cluster.database });
    await migrate(pool);
  });
  after(async () => {
    await pool?.end();
    await cluster?.stop();
  });

  it('registers a node and verifies its credential; wrong credentials and unknown nodes are refused', async () => {
    const cred = await registerNode(pool, 'stb-1');
    expect(cred).to.match(/^fhn_[A-Za-z0-9_-]{43}$/);
    const creds = new PgNodeCredentials(pool);
    expect(await creds.verify('stb-1', cred)).to.equal(true);
    expect(await creds.verify('stb-1', `${cred}\n`)).to.equal(true); // as read from the credential file
    expect(await creds.verify('stb-1', cred.slice(0, -1) + (cred.endsWith('A') ? 'B' : 'A'))).to.equal(false);
    expect(await creds.verify('stb-2', cred)).to.equal(false);
    expect(await creds.verify('../etc', cred)).to.equal(false);
    expect(await creds.verify('stb-1', '')).to.equal(false);
    const [node] = (await listNodes(pool)).filter((n) => n.nodeId === 'stb-1');
    expect(node).to.include({ nodeId: 'stb-1', online: false, hasCredential: true, lastSeen: null });
    // Only the hash is stored.
    const { rows } = await pool.query<{ t: string }>('SELECT row_to_json(nodes)::text AS t FROM nodes');
    expect(rows.map((r) => r.t).join()).not.to.include(cred.slice(4));
  });

  it('compares in constant time, also for an unknown node', async () => {
    const calls: number[] = [];
    const creds = new PgNodeCredentials(pool, (a, b) => {
      calls.push(b.length);
      return a.equals(b);
    });
    const cred = await registerNode(pool, 'stb-ct');
    await creds.verify('stb-ct', cred);
    await creds.verify('no-such-node', cred);
    expect(calls).to.deep.equal([32, 32]);
  });

  it('refuses a node id a node config would refuse', async () => {
    for (const id of ['', '-x', 'a b', 'a/b', 'x'.repeat(64)]) expect(await codeOf(registerNode(pool, id))).to.equal('invalid_request');
  });

  it('re-keying invalidates the old credential; both changes are notified on farm_node_credentials', async () => {
    const listener = await pool.connect();
    const seen: string[] = [];
    listener.on('notification', (n) => n.channel === NODE_CREDENTIALS_CHANNEL && seen.push(n.payload ?? ''));
    await listener.query(`LISTEN ${NODE_CREDENTIALS_CHANNEL}`);
    try {
      const creds = new PgNodeCredentials(pool);
      const old = await registerNode(pool, 'stb-rekey');
      const fresh = await registerNode(pool, 'stb-rekey');
      expect(fresh).not.to.equal(old);
      expect(await creds.verify('stb-rekey', old)).to.equal(false);
      expect(await creds.verify('stb-rekey', fresh)).to.equal(true);
      // A heartbeat flush (last_seen) is not a credential change: no notification for it.
      await pool.query("UPDATE nodes SET last_seen = now(), online = true WHERE node_id = 'stb-rekey'");
      await removeNode(pool, 'stb-rekey');
      // Notifications arrive in commit order: once the sentinel's is in, every earlier one is.
      await registerNode(pool, 'stb-sentinel');
      await waitFor(() => seen.includes('stb-sentinel'), { what: "the sentinel's notification", timeoutMs: 30_000 });
      expect(seen).to.deep.equal(['stb-rekey', 'stb-rekey', 'stb-rekey', 'stb-sentinel']);
    } finally {
      listener.release(true);
    }
  });

  it('removes a node with its jobs and reservation rows (an active one too); results stay; unknown is not found', async () => {
    const cred = await registerNode(pool, 'stb-gone');
    await registerNode(pool, 'stb-stays');
    await pool.query("INSERT INTO jobs (job_uid, node_id, username, state) VALUES ('/stb-gone/ab/1', 'stb-gone', 'alice', 'exited')");
    // One reservation per node (migration 4), both made by one request.
    const { rows } = await pool.query<{ id: string }>("INSERT INTO reservations (username) VALUES ('alice'), ('alice') RETURNING reservation_id AS id");
    await pool.query("INSERT INTO reservation_nodes (reservation_id, node_id) VALUES ($1, 'stb-gone'), ($2, 'stb-stays')", [rows[0]!.id, rows[1]!.id]);
    const removed = await removeNode(pool, 'stb-gone');
    expect(removed).to.deep.equal({ reservations: 1, activeReservations: 1, jobs: 1 });
    expect((await listNodes(pool)).map((n) => n.nodeId)).to.include('stb-stays').and.not.include('stb-gone');
    expect(await new PgNodeCredentials(pool).verify('stb-gone', cred)).to.equal(false);
    expect((await pool.query("SELECT 1 FROM reservation_nodes WHERE node_id = 'stb-stays'")).rowCount).to.equal(1);
    expect(await codeOf(removeNode(pool, 'stb-gone'))).to.equal('not_found');
  });
});
