/**
 * Maintenance through the farm's portal (docs/api-notes.md, "Maintenance"), with a real portal, PostgreSQL and
 * node: a farm administrator's `POST /api/v2/nodes/<id>/maintenance` reaches the node; the portal's node
 * status says why it is not available, the portal refuses reservations (409) and the node refuses runs (503);
 * a `run` user is refused by the portal (403) before anything reaches the node; the portal's audit rows and
 * the node's own entries (via portal) name the administrator; taken out, the node is reservable again.
 */
import { expect } from 'chai';
import path from 'node:path';
import request from 'supertest';
import { parseAuditQuery } from '../../src/core/audit.js';
import { queryAuditDir } from '../../src/storage/auditLog.js';
import type { TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'maint-n1';

describe('maintenance through the portal', function () {
  this.timeout(180_000);
  let farm: TestFarm;
  let node: TestDaemon;
  let admin: string;
  let runner: string;
  const as = (token: string) => ({
    get: (p: string) => request(farm.url).get(p).set('Authorization', `token ${token}`),
    post: (p: string) => request(farm.url).post(p).set('Authorization', `token ${token}`),
    delete: (p: string) => request(farm.url).delete(p).set('Authorization', `token ${token}`),
  });
  const farmNode = async () => {
    const res = await as(runner).get(`/api/v2/nodes/${NODE}`);
    expect(res.status, res.text).to.equal(200);
    return res.body as { available: boolean; not_available_reason: string | null };
  };
  /** The portal's list of nodes: built from what the node last sent (its snapshot), not asked afresh. */
  const listed = async () => ((await as(runner).get('/api/v2/nodes')).body as { node_id: string; available: boolean; not_available_reason: string | null }[]).find((n) => n.node_id === NODE)!;

  before(async () => {
    farm = await startTestFarm();
    node = await farm.addNode(NODE, { config: { capture: { uri: 'none:' } } });
    admin = await farm.tokenFor('ada', 'admin');
    runner = await farm.tokenFor('rob', 'run');
  });
  after(() => farm?.stop());

  it('a run user is refused by the portal (403); the node never hears of it', async () => {
    const denied = await as(runner).post(`/api/v2/nodes/${NODE}/maintenance`).send({ on: true, message: 'mine' });
    expectError(denied, 403, 'forbidden');
    expect(denied.body.message).to.match(/^run may not put nodes in maintenance/);
    const page = await queryAuditDir(path.join(node.dataDir, 'audit'), parseAuditQuery({ action: 'node.maintenance' }, () => true));
    expect(page.entries).to.deep.equal([]);
    expect((await farmNode()).available).to.equal(true);
  });

  it('an admin puts the node in maintenance: the portal shows why, refuses reservations (409), the node refuses runs (503); out again: reservable', async () => {
    const on = await as(admin).post(`/api/v2/nodes/${NODE}/maintenance`).send({ on: true, message: 'new IR blaster' });
    expect(on.status, on.text).to.equal(200);
    expect(on.body.maintenance).to.include({ message: 'new IR blaster', by: 'ada' });
    const reason = `in maintenance: new IR blaster (ada, since ${on.body.maintenance.since})`;
    // The portal's view (the node, the list, the reservations' check) follows the node's next snapshot, sent
    // after the forwarded answer.
    await waitFor(async () => (await listed()).not_available_reason === reason, { what: "the node's snapshot to reach the portal", timeoutMs: 30_000 });
    expect((await listed()).available).to.equal(false);
    expect(await farmNode()).to.include({ available: false, not_available_reason: reason });

    const reserve = await as(runner).post('/api/v2/reservations').send({ node_ids: [NODE], message: 'nightly' });
    expectError(reserve, 409, 'conflict');
    expect(reserve.body.message).to.contain('in maintenance: new IR blaster');
    const run = await as(runner).post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/pass.py::test_pass'] });
    expectError(run, 503, 'device_unavailable');
    expect(run.body.message).to.contain('is in maintenance: new IR blaster');

    const off = await as(admin).post(`/api/v2/nodes/${NODE}/maintenance`).send({ on: false });
    expect(off.status, off.text).to.equal(200);
    expect(off.body.maintenance).to.equal(null);
    await waitFor(async () => (await listed()).available, { what: 'the portal to see the node in service', timeoutMs: 30_000 });
    const made = await as(runner).post('/api/v2/reservations').send({ node_ids: [NODE], message: 'nightly' });
    expect(made.status, made.text).to.equal(200);
    expect((await as(runner).delete(`/api/v2/reservations/${made.body.reservations[0].reservation_id}`)).status).to.equal(204);
  });

  it('audited as node.maintenance on the farm (the portal\'s rows) and on the node (via portal)', async () => {
    const farmRows = await waitFor(async () => {
      const { rows } = await farm.db.query<{ who: string; via: string; node_id: string; target: string; detail: Record<string, unknown>; outcome: number }>(
        "SELECT who, via, node_id, target, detail, outcome FROM audit WHERE action = 'node.maintenance' ORDER BY id",
      );
      return rows.length >= 3 ? rows : undefined;
    }, 'the portal\'s audit rows');
    expect(farmRows.map((r) => [r.who, r.via, r.node_id, r.outcome, r.detail])).to.deep.equal([
      ['rob', 'token', NODE, 403, { on: true, message: 'mine' }],
      ['ada', 'token', NODE, 200, { on: true, message: 'new IR blaster' }],
      ['ada', 'token', NODE, 200, { on: false }],
    ]);
    const api = await as(admin).get('/api/v2/audit?action=node.maintenance');
    expect(api.status, api.text).to.equal(200);
    expect(api.body.entries).to.have.length(3);

    const page = await queryAuditDir(path.join(node.dataDir, 'audit'), parseAuditQuery({ action: 'node.maintenance' }, () => true));
    expect(page.entries.map((e) => [e.who, e.via, e.node, e.outcome, e.detail]).reverse()).to.deep.equal([
      ['ada', 'portal', NODE, 200, { on: true, message: 'new IR blaster' }],
      ['ada', 'portal', NODE, 200, { on: false }],
    ]);
  });
});
