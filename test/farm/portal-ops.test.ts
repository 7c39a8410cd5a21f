/**
 * The portal's operator contract (src/farm/portal/ops.ts; docs/farm.md, "Operating the portal"), on a
 * real farm (throwaway PostgreSQL, the real portal, a real node): `/healthz` answers, `/readyz` says
 * the database answers and the portal holds the portal lock, `/metrics` is valid Prometheus text
 * (`promtool check metrics`) whose farm-wide series move with the farm (a node joining, a reservation,
 * a forwarded request). `/readyz` turns 503 with the JSON error while PostgreSQL is stopped and back
 * to 200 once it is back and the lock is taken again; when the lock's connection is cut and another
 * session takes the lock meanwhile, the portal is not ready for good (it must stop; the command exits,
 * test/farm/portal-lock.test.ts). Every answer is checked against the OpenAPI document (farm.http).
 */
import { spawn } from 'node:child_process';
import { expect } from 'chai';
import pg from 'pg';
import { PORTAL_LOCK_KEY } from '../../src/farm/db/portalLock.js';
import { expectError } from '../helpers/errors.js';
import { startTestFarm, type TestFarm, throughReplicas } from '../helpers/farm.js';
import { connectionString } from '../helpers/farmPortal.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'farmhand-ops';
const WAIT = { timeoutMs: 60_000, maxIntervalMs: 200 };

function promtool(args: string[], input = ''): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('promtool', args, { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString()));
    child.stderr.on('data', (b: Buffer) => (out += b.toString()));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out }));
    child.stdin.end(input);
  });
}

/** The value of one series (`name{a="b"}` exactly as exposed), or undefined when absent. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('farm portal: /healthz, /readyz and /metrics', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): one process's /readyz (its lock), /metrics and counters: through HAProxy each request is another replica's.
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(240_000);
  let farm: TestFarm;
  let token: string;

  const metrics = async () => {
    const r = await farm.http.get('/metrics');
    expect(r.status, r.text).to.equal(200);
    expect(r.headers['content-type']).to.match(/^text\/plain; version=0\.0\.4/);
    return r.text;
  };

  before(async function () {
    this.timeout(180_000);
    farm = await startTestFarm({ portal: { heartbeat_secs: 2, flush_secs: 1 } });
    token = await farm.tokenFor('olga');
  });
  after(async () => {
    await farm?.stop();
  });

  it('/healthz answers with the version; /readyz: the database answers and the lock is held', async () => {
    const h = await farm.http.get('/healthz');
    expect(h.status, h.text).to.equal(200);
    expect(h.body).to.include({ status: 'ok', starting: false });
    expect(h.body.version).to.be.a('string');
    const r = await farm.http.get('/readyz');
    expect(r.status, r.text).to.equal(200);
    expect(r.headers['cache-control']).to.equal('no-store');
    expect(r.body).to.deep.equal({
      ready: true,
      failed: [],
      checks: { database: { ok: true, detail: 'answers' }, portal_lock: { ok: true, detail: 'held by this portal' } },
    });
  });

  it('/metrics is valid Prometheus text and its farm-wide series move with the farm', async () => {
    const empty = await metrics();
    const check = await promtool(['check', 'metrics'], empty);
    expect(check.code, check.out).to.equal(0);
    expect(sample(empty, 'farmhand_portal_nodes_online')).to.equal(0);
    expect(sample(empty, 'farmhand_portal_lock_held')).to.equal(1);
    expect(sample(empty, 'farmhand_portal_lock_reacquired_total')).to.equal(0);
    expect(sample(empty, 'farmhand_portal_jobs_running')).to.equal(0);
    expect(sample(empty, 'farmhand_portal_uploads_in_flight')).to.equal(0);
    expect(sample(empty, 'farmhand_portal_forwards_in_flight')).to.equal(0);
    const pool = { total: sample(empty, 'farmhand_portal_database_pool{state="total"}'), idle: sample(empty, 'farmhand_portal_database_pool{state="idle"}') };
    expect(pool.total).to.be.within(1, 10);
    expect(pool.idle).to.be.within(0, pool.total!);
    // (A caller waits while its connection is being made, too: the scrape's own query may be one.)
    expect(sample(empty, 'farmhand_portal_database_pool{state="waiting"}')).to.be.at.least(0);

    await farm.addNode(NODE);
    // Available once its snapshot says it could take a job (a node just started may still be fetching its test pack).
    const joined = await waitFor(async () => {
      const t = await metrics();
      return sample(t, 'farmhand_portal_nodes_available') === 1 ? t : undefined;
    }, { what: 'the node available in the metrics', ...WAIT });
    expect(sample(joined, 'farmhand_portal_nodes_online')).to.equal(1);

    // A forwarded request counts; a reservation makes the node unavailable.
    const before = sample(joined, 'farmhand_portal_forwards_total')!;
    const node = await farm.http.get(`/api/v2/nodes/${NODE}`).set('Authorization', `token ${token}`);
    expect(node.status, node.text).to.equal(200);
    expect(sample(await metrics(), 'farmhand_portal_forwards_total')).to.be.greaterThan(before);
    const made = await farm.http.post('/api/v2/reservations').set('Authorization', `token ${token}`).send({ node_ids: [NODE], message: 'metrics' });
    expect(made.status, made.text).to.equal(200);
    const reserved = await metrics();
    expect(sample(reserved, 'farmhand_portal_nodes_online')).to.equal(1);
    expect(sample(reserved, 'farmhand_portal_nodes_available')).to.equal(0);
    const id = (made.body as { reservations: Array<{ reservation_id: number }> }).reservations[0]!.reservation_id;
    expect((await farm.http.delete(`/api/v2/reservations/${id}`).set('Authorization', `token ${token}`)).status).to.equal(204);
    expect(sample(await metrics(), 'farmhand_portal_nodes_available')).to.equal(1);
  });

  it('/readyz answers 503 while PostgreSQL is stopped, and 200 again once it is back and the lock is taken again', async () => {
    await farm.cluster.stopServer('fast');
    let stopped = true;
    try {
      const down = await waitFor(
        async () => {
          const r = await farm.http.get('/readyz');
          return r.status === 503 ? r : undefined;
        },
        { what: '/readyz to answer 503', ...WAIT },
      );
      expectError(down, 503, 'not_ready');
      expect(down.body.failed).to.include('database');
      // Said without the database's address or socket path: /readyz is open to anyone.
      expect(down.body.checks.database).to.deep.equal({ ok: false, detail: 'does not answer (the log says why)' });
      expect(down.text).not.to.include(farm.cluster.host);
      // The lock went with its connection: the portal must not count itself the farm's only portal meanwhile.
      await waitFor(async () => (await farm.http.get('/readyz')).body.checks?.portal_lock?.ok === false, { what: 'the lock seen lost', ...WAIT });
      expect(farm.portal.lock.held).to.equal(false);
      // /healthz: the process itself is fine.
      expect((await farm.http.get('/healthz')).status).to.equal(200);
      await farm.cluster.startServer();
      stopped = false;
      const up = await waitFor(
        async () => {
          const r = await farm.http.get('/readyz');
          return r.status === 200 ? r : undefined;
        },
        { what: '/readyz to answer 200 again', ...WAIT },
      );
      expect(up.body.checks.portal_lock).to.deep.equal({ ok: true, detail: 'held by this portal' });
      const text = await metrics();
      expect(sample(text, 'farmhand_portal_lock_held')).to.equal(1);
      expect(sample(text, 'farmhand_portal_lock_reacquired_total')).to.equal(1);
    } finally {
      if (stopped) await farm.cluster.startServer();
    }
  });

  it('the lock`s connection cut while another session waits for the lock: the portal is not ready for good', async () => {
    const other = new pg.Client({ connectionString: connectionString(farm.cluster), application_name: 'the other portal' });
    const admin = new pg.Client({ connectionString: connectionString(farm.cluster) });
    other.on('error', () => undefined);
    await other.connect();
    await admin.connect();
    try {
      // The other session queues for the lock; PostgreSQL grants it the moment the portal's backend ends,
      // before the portal can take it again.
      const otherPid = (await other.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
      const granted = other.query('SELECT pg_advisory_lock($1::bigint)', [PORTAL_LOCK_KEY]);
      await waitFor(async () => (await admin.query(`SELECT 1 FROM pg_locks WHERE pid = $1 AND locktype = 'advisory' AND NOT granted`, [otherPid])).rowCount === 1, {
        what: 'the other session waiting for the lock',
        ...WAIT,
      });
      const held = await admin.query<{ pid: number }>(`SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'farmhand-portal %'`);
      expect(held.rows.map((r) => r.pid)).to.deep.equal([farm.portal.lock.backendPid]);
      await admin.query('SELECT pg_terminate_backend($1)', [farm.portal.lock.backendPid]);
      await granted;
      const lost = await waitFor(
        async () => {
          const r = await farm.http.get('/readyz');
          return r.status === 503 && r.body.checks?.portal_lock?.detail === 'another portal took it: this portal must stop' ? r : undefined;
        },
        { what: '/readyz to say another portal took the lock', ...WAIT },
      );
      expectError(lost, 503, 'not_ready');
      expect(lost.body.failed).to.deep.equal(['portal_lock']);
      expect(farm.portal.lock.lostToAnother).to.equal(true);
      expect(sample(await metrics(), 'farmhand_portal_lock_held')).to.equal(0);
    } finally {
      await other.end().catch(() => undefined);
      await admin.end();
    }
  });
});
