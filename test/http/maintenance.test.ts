/**
 * Maintenance of a node on a real node daemon (docs/api-notes.md, "Maintenance"): an administrator puts the
 * node in maintenance with a message and takes it out (`POST /api/v2/nodes/<id>/maintenance`); meanwhile
 * reservations are refused with 409 and runs (v2 and v1) with 503, the v2 status says why, a restart keeps
 * it, and each switch is in the audit trail as `node.maintenance`. Roles: the table's matrix
 * (test/http/endpoint-roles.test.ts) covers the route; the 403 for `run` is checked here too.
 */
import { expect } from 'chai';
import { startDaemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/logger.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { client as request } from '../helpers/contract.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';

const NODE = 'farmhand-test';
const RUN = { node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/pass.py::test_pass'] };

describe('maintenance of a node', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let admin: string;
  let runner: string;
  const as = (token: string) => {
    const h = request(d.daemon.url);
    return {
      get: (p: string) => h.get(p).set('Authorization', `token ${token}`),
      post: (p: string) => h.post(p).set('Authorization', `token ${token}`),
    };
  };
  const status = async () => {
    const res = await as(runner).get(`/api/v2/nodes/${NODE}`);
    expect(res.status, res.text).to.equal(200);
    return res.body as { available: boolean; not_available_reason: string | null; maintenance?: { message: string; by: string; since: string } };
  };
  const maintenance = (token: string, body: unknown) => as(token).post(`/api/v2/nodes/${NODE}/maintenance`).send(body as object);

  before(async () => {
    d = await startTestDaemon({ config: { capture: { uri: 'none:' } } });
    const store = new TokenStore(tokensFile(d.dataDir));
    admin = (await store.create('ada', { role: 'admin' })).token;
    runner = (await store.create('rob', { role: 'run' })).token;
  });
  after(() => d?.stop());

  it('is refused below admin (403) and for a bad body (400), changing nothing', async () => {
    const denied = await maintenance(runner, { on: true, message: 'mine now' });
    expectError(denied, 403, 'forbidden');
    expect(denied.body.message).to.match(/^run may not put nodes in maintenance/);
    for (const body of [{}, { on: true }, { on: true, message: '  ' }, { on: 'yes', message: 'x' }, { on: true, message: 'x', until: 'friday' }, { on: true, message: 'a\nb' }, { on: true, message: 'x'.repeat(501) }]) {
      expectError(await maintenance(admin, body), 400, 'invalid_request');
    }
    expectError(await as(admin).post('/api/v2/nodes/another-node/maintenance').send({ on: true, message: 'x' }), 404, 'not_found');
    expect((await status()).available).to.equal(true);
  });

  it('in maintenance: the v2 status says why, reservations get 409 and runs 503; out again: both work', async () => {
    const on = await maintenance(admin, { on: true, message: 'rewiring the HDMI switch until 15:00' });
    expect(on.status, on.text).to.equal(200);
    expect(on.body.node_id).to.equal(NODE);
    expect(on.body.maintenance).to.include({ message: 'rewiring the HDMI switch until 15:00', by: 'ada' });

    const s = await status();
    expect(s.available).to.equal(false);
    expect(s.not_available_reason).to.equal(`in maintenance: rewiring the HDMI switch until 15:00 (ada, since ${on.body.maintenance.since})`);
    expect(s.maintenance).to.deep.equal(on.body.maintenance);

    const reserve = await as(runner).post('/api/v2/reservations').send({ node_ids: [NODE], message: 'nightly' });
    expectError(reserve, 409, 'conflict');
    expect(reserve.body.message).to.contain(`node ${NODE} is in maintenance: rewiring the HDMI switch until 15:00`);
    const run = await as(runner).post('/api/v2/run_tests').send(RUN);
    expectError(run, 503, 'device_unavailable');
    expect(run.body.message).to.match(/is in maintenance: rewiring the HDMI switch/);
    // v1 (its open door: no token) is held back the same way.
    const v1 = await request(d.daemon.url).post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: ['tests/pass.py::test_pass'] });
    expectError(v1, 503, 'device_unavailable');

    const off = await maintenance(admin, { on: false });
    expect(off.status, off.text).to.equal(200);
    expect(off.body.maintenance).to.equal(null);
    const after = await status();
    expect(after.available).to.equal(true);
    expect(after.not_available_reason).to.equal(null);
    expect(after).to.not.have.property('maintenance');
    const made = await as(runner).post('/api/v2/reservations').send({ node_ids: [NODE], message: 'nightly' });
    expect(made.status, made.text).to.equal(200);
    // rob's reservation does not stop the administrator (the reservation rule is for using the node).
    expect((await maintenance(admin, { on: true, message: 'urgent' })).status).to.equal(200);
    expect((await status()).not_available_reason).to.match(/^in maintenance: urgent/);
    expect((await maintenance(admin, { on: false })).status).to.equal(200);
    const end = await request(d.daemon.url).delete(`/api/v2/reservations/${made.body.reservations[0].reservation_id}`).set('Authorization', `token ${runner}`);
    expect(end.status).to.equal(204);
  });

  it('a restart keeps the node in maintenance', async () => {
    expect((await maintenance(admin, { on: true, message: 'waiting for a new remote' })).status).to.equal(200);
    await d.daemon.stop();
    d.daemon = await startDaemon(d.config, silentLogger); // the same data directory
    const s = await status();
    expect(s.available).to.equal(false);
    expect(s.not_available_reason).to.match(/^in maintenance: waiting for a new remote \(ada, since /);
    expect((await maintenance(admin, { on: false })).status).to.equal(200);
  });

  it('each switch is in the audit trail as node.maintenance: who, on, the message, the outcome (refusals too)', async () => {
    const res = await as(admin).get('/api/v2/audit?action=node.maintenance&limit=1000');
    expect(res.status, res.text).to.equal(200);
    const entries = (res.body.entries as { who: string; via: string; node: string; target: string; detail: Record<string, unknown>; outcome: number }[]).reverse();
    const done = entries.filter((e) => e.outcome === 200);
    expect(done.map((e) => [e.who, e.detail])).to.deep.equal([
      ['ada', { on: true, message: 'rewiring the HDMI switch until 15:00' }],
      ['ada', { on: false }],
      ['ada', { on: true, message: 'urgent' }],
      ['ada', { on: false }],
      ['ada', { on: true, message: 'waiting for a new remote' }],
      ['ada', { on: false }],
    ]);
    expect(done.every((e) => e.node === NODE && e.target === NODE && e.via === 'token')).to.equal(true);
    // The refused attempts are recorded too (a known caller): rob's 403 and ada's 400s.
    expect(entries.filter((e) => e.outcome === 403).map((e) => e.who)).to.deep.equal(['rob']);
    expect(entries.filter((e) => e.outcome === 400).length).to.equal(7);
  });
});
