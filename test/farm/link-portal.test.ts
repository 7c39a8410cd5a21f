/**
 * End to end: a real `farmhand serve` node joins a real portal (startPortal,
 * over a throwaway PostgreSQL) through its PortalLink, and v2 calls made to
 * the portal reach the node and come back as the node answers them.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import request from 'supertest';
import type { FarmEvent } from '../../src/core/events.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { parsePortalConfig } from '../../src/farm/portal/config.js';
import { startPortal } from '../../src/farm/portal/portal.js';
import { asUser } from '../helpers/auth.js';
import { connectionString, startTestPortal, type TestPortal } from '../helpers/farmPortal.js';
import { capturingLogger } from '../helpers/logger.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'farmhand-test';
const PASS = 'tests/basic.py::test_pass';
const WAIT = { timeoutMs: 30_000 };

describe('a node joins a real portal (link <-> hub)', function () {
  this.timeout(120_000);
  let cluster: TestPostgres;
  let t: TestPortal;
  let d: TestDaemon;
  let credDir: string;
  let token: string;
  let credential: string;
  let stopped = false;
  const events: FarmEvent[] = [];

  before(async () => {
    cluster = await startPostgres();
    t = await startTestPortal(cluster, { heartbeat_secs: 1 });
    t.portal.hub.onEvent((e) => events.push(e));
    credential = await t.registerNode(NODE);
    credDir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-cred-'));
    await writeFile(path.join(credDir, 'credential'), `${credential}\n`);
    d = await startTestDaemon({ config: { portal: { url: t.portal.url, node_credential_file: path.join(credDir, 'credential') } } });
    await waitOnline(d);
    token = t.tokenFor('alice');
    await waitFor(() => t.portal.hub.link(NODE)?.online && d.daemon.portalLink?.connected, { what: 'the node to be online on the portal', ...WAIT });
    // Its state follows the welcome, in its stream (node.state).
    await waitFor(() => t.portal.hub.link(NODE)?.snapshot, { what: "the node's state on the portal", ...WAIT });
  });
  after(async () => {
    await d?.stop();
    if (!stopped) await t?.stop();
    await cluster?.stop();
    if (credDir) await rm(credDir, { recursive: true, force: true });
  });

  const portal = () => request(t.portal.url);
  const auth = { Authorization: '' };
  beforeEach(() => (auth.Authorization = `token ${token}`));

  it('the portal lists the node from its hello and its stream: version, and its state (node.state, also in nodes.state)', async () => {
    const link = t.portal.hub.link(NODE)!;
    expect(link.version).to.be.a('string').and.not.equal('');
    expect(link.snapshot).to.include({ node_id: NODE });
    const res = await portal().get(`/api/v2/nodes/${NODE}`).set(auth);
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.include({ node_id: NODE, online: true, node_url: `${t.portal.url}/api/v2/nodes/${NODE}` });
    expect(res.body.farm).to.include({ connected: true });
    await waitFor(async () => (await t.portal.pool.query("SELECT state->'node'->>'node_id' AS id FROM nodes WHERE node_id = $1", [NODE])).rows[0]?.id === NODE, {
      what: 'the state folded into nodes.state',
      ...WAIT,
    });
  });

  it('a screenshot through the portal is the node\'s PNG, and the node records the portal user', async () => {
    const res = await portal().get(`/api/v2/nodes/${NODE}/screenshot.png`).set(auth).buffer(true);
    expect(res.status, res.text).to.equal(200);
    expect(res.headers['content-type']).to.equal('image/png');
    const body = res.body as Buffer;
    expect(body.subarray(0, 4).toString('latin1')).to.equal('\x89PNG');
    // The node's own status (asked directly, with no token it would be a 403) says alice used it.
    await waitFor(async () => (await portal().get(`/api/v2/nodes/${NODE}`).set(auth)).body.last_used_by === 'alice', { what: 'the state with alice', ...WAIT });
  });

  it('run_tests through the portal runs on the node; its links point at the portal; the events reach the hub', async () => {
    const res = await portal()
      .post('/api/v2/run_tests')
      .set(auth)
      .send({ node_id: NODE, test_pack_revision: 'main', test_cases: [PASS], shuffle: false, tags: {} });
    expect(res.status, res.text).to.equal(200);
    const uid = res.body.job_uid as string;
    expect(uid.startsWith(`/${NODE}/`)).to.equal(true);
    expect(res.body.job_url).to.equal(`${t.portal.url}/api/v2/jobs${uid}`);
    const done = await portal().get(`/api/v2/jobs${uid}/await_completion`).set(auth);
    expect(done.status, done.text).to.equal(200);
    expect(done.body).to.include({ status: 'exited' });
    expect(done.body.result_counts).to.include({ pass: 1 });
    await waitFor(() => events.some((e) => e.type === 'job.exited' && (e.data as { job_uid?: string }).job_uid === uid), { what: 'job.exited on the hub', ...WAIT });
    const started = events.find((e) => e.type === 'job.started' && (e.data as { job_uid?: string }).job_uid === uid)!;
    expect(started.data).to.include({ username: 'alice', node_id: NODE });
    // The node's direct answer with the forged headers is still a 403: only its link speaks for the portal.
    expect((await request(d.url).get(`/api/v2/jobs${uid}`).set('X-Farmhand-On-Behalf-Of', 'alice')).status).to.equal(403);
  });

  it('the portal restarts: the node reconnects, and a run made meanwhile reaches the new portal as events', async () => {
    const port = new URL(t.portal.url).port;
    await t.stop();
    stopped = true;
    await waitFor(() => !d.daemon.portalLink!.connected, { what: 'the node to see the portal gone', ...WAIT });
    // While no portal listens, the node is used directly (its own token): its events wait in its buffer.
    const bob = await asUser(d, 'bob');
    const run = await bob.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: [PASS], shuffle: false, tags: {} });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;
    expect((await bob.get(`/api/v2/jobs${uid}/await_completion`)).body.status).to.equal('exited');
    // The same portal again (same address, database and credential).
    const logger = capturingLogger();
    const again = await startPortal(
      parsePortalConfig({ listen: `127.0.0.1:${port}`, database: connectionString(cluster), storage_dir: 'farm-storage', log_level: 'silent', heartbeat_secs: 1 }),
      logger,
      {
        credentials: () => ({ verify: (id, c) => Promise.resolve(id === NODE && c === credential) }),
        tokens: () => ({ verify: (x) => (x === token ? { user: 'alice', tokenId: 'alice' } : undefined) }),
      },
    );
    try {
      const got: FarmEvent[] = [];
      again.hub.onEvent((e) => got.push(e));
      await waitFor(() => again.hub.link(NODE)?.online, { what: 'the node back on the restarted portal', ...WAIT });
      await waitFor(() => got.some((e) => e.type === 'job.exited' && (e.data as { job_uid?: string }).job_uid === uid), { what: "the meanwhile run's job.exited", ...WAIT });
      expect(got.some((e) => e.type === 'job.started' && (e.data as { username?: string }).username === 'bob')).to.equal(true);
      const res = await request(again.url).get(`/api/v2/nodes/${NODE}/thumbnail.jpg`).set(auth);
      expect(res.status, res.text).to.equal(200);
      expect(res.headers['content-type']).to.equal('image/jpeg');
    } finally {
      await again.stop();
    }
  });
});
