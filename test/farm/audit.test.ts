/**
 * The audit trail on the farm (docs/auth.md, "Audit trail"), with a real portal on a throwaway PostgreSQL and a
 * real node: reserve, run, stop, press and end through the portal are rows in `audit` (who is the portal's
 * user); the node records the same requests with who = that user, via = portal, and from = the address the
 * caller called the portal from; `GET /api/v2/audit` and `/app/audit` read PostgreSQL with the filters;
 * a user whose role is below admin gets 403 (the role the token carries: no users-table fallback); `farmhand farm token create` is recorded; retention deletes old rows.
 */
import { expect } from 'chai';
import http from 'node:http';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import request from 'supertest';
import { parseAuditQuery } from '../../src/core/audit.js';
import { PgAuditLog } from '../../src/farm/audit.js';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { queryAuditDir } from '../../src/storage/auditLog.js';
import { runCli } from '../../src/cli/program.js';
import { asUser } from '../helpers/auth.js';
import { waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { connectionString } from '../helpers/farmPortal.js';
import { waitFor } from '../helpers/wait.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';

const NODE = 'audit-n1';
const FILES = { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF };

/** A JSON POST to the portal from a given local address (a caller the node's own socket peer is not). */
function postFrom(url: string, localAddress: string, p: string, token: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const u = new URL(p, url);
  const data = Buffer.from(JSON.stringify(body));
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: u.hostname, port: u.port, path: u.pathname, method: 'POST', localAddress, headers: { authorization: `token ${token}`, 'content-type': 'application/json', 'content-length': data.length } },
      (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text ? (JSON.parse(text) as Record<string, unknown>) : {} }));
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

interface Row {
  who: string;
  via: string;
  from_addr: string | null;
  action: string;
  node_id: string | null;
  target: string | null;
  outcome: number;
}

describe('audit trail on the farm', function () {
  this.timeout(180_000);
  let farm: TestFarm;
  let node: TestDaemon;
  let alice: string;
  let bob: string;
  let jobUid: string;
  let reservationId: string;
  const as = (token: string) => ({
    get: (p: string) => request(farm.url).get(p).set('Authorization', `token ${token}`),
    post: (p: string) => request(farm.url).post(p).set('Authorization', `token ${token}`),
    delete: (p: string) => request(farm.url).delete(p).set('Authorization', `token ${token}`),
  });

  before(async () => {
    farm = await startTestFarm();
    node = await farm.addNode(NODE, { files: FILES, config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 } } });
    await waitOnline(node);
    alice = await farm.tokenFor('alice', 'admin');
    bob = await farm.tokenFor('bob');
    const made = await as(alice).post('/api/v2/reservations').send({ node_ids: [NODE], duration_secs: 600, message: 'audit' });
    expect(made.status, made.text).to.equal(200);
    reservationId = String(made.body.reservations[0].reservation_id);
    // From 127.0.0.2: the node's own peer (the link's forwarder) is 127.0.0.1, so `from` shows whose address it is.
    const run = await postFrom(farm.url, '127.0.0.2', '/api/v2/run_tests', alice, { node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] });
    expect(run.status, JSON.stringify(run.body)).to.equal(200);
    jobUid = run.body.job_uid as string;
    expect((await as(alice).post(`/api/v2/jobs${jobUid}/stop`)).status).to.be.oneOf([200, 202]);
    await waitForJob(node, jobUid);
    expect((await as(alice).post(`/api/v2/nodes/${NODE}/press`).send({ key: 'KEY_OK' })).status).to.equal(204);
    expect((await as(alice).delete(`/api/v2/reservations/${reservationId}`)).status).to.equal(204);
  });
  after(() => farm?.stop());

  /**
   * The run's caller as the portal sees it: 127.0.0.2; through replicas, HAProxy's address (the portal believes no
   * X-Forwarded-For: docs/testing.md, "The farm suite through replicas").
   */
  const caller = () => (farm.replicas ? '127.0.0.1' : '127.0.0.2');
  const rows = async (): Promise<Row[]> => (await farm.db.query<Row>('SELECT who, via, from_addr, action, node_id, target, outcome FROM audit ORDER BY id')).rows;

  it('the portal writes a row for each of reserve, run, stop, the manual control session and end, its user as who', async () => {
    const all = await waitFor(async () => {
      const r = await rows();
      return r.some((x) => x.action === 'reservation.end') ? r : undefined;
    }, 'the audit rows of the portal');
    const by = (action: string) => all.filter((r) => r.action === action);
    expect(by('reservation.create')).to.have.length(1);
    expect(by('reservation.create')[0]).to.include({ who: 'alice', via: 'token', node_id: NODE, target: reservationId, outcome: 200, from_addr: '127.0.0.1' });
    expect(by('job.run')[0]).to.include({ who: 'alice', node_id: NODE, outcome: 200, from_addr: caller(), target: jobUid });
    expect(by('job.stop')[0]).to.include({ who: 'alice', node_id: NODE, target: jobUid });
    expect(by('remote.session_start')[0]).to.include({ who: 'alice', node_id: NODE, outcome: 204 });
    expect(by('reservation.end')[0]).to.include({ who: 'alice', target: reservationId, outcome: 204 });
  });

  it("the node records the forwarded requests too: who is the portal's user, via portal, from the caller's address", async () => {
    const page = await queryAuditDir(path.join(node.dataDir, 'audit'), parseAuditQuery({ action: 'job' }, () => true));
    const run = page.entries.find((e) => e.action === 'job.run');
    expect(run).to.include({ who: 'alice', via: 'portal', token_id: null, node: NODE, target: jobUid, from: caller() });
    expect(page.entries.find((e) => e.action === 'job.stop')).to.include({ who: 'alice', via: 'portal', from: '127.0.0.1' });
  });

  it("a caller of the node itself cannot name another address (nor user) without the link's secret", async () => {
    const mallory = await asUser(node, 'mallory');
    const res = await mallory
      .post('/api/v2/reservations/999/extend')
      .set('X-Farmhand-Client-Address', '10.9.9.9')
      .set('X-Farmhand-Portal-Delegate', 'guess')
      .set('X-Farmhand-On-Behalf-Of', 'alice')
      .send({ duration_secs: 60 });
    expect(res.status).to.be.within(400, 499);
    const page = await queryAuditDir(path.join(node.dataDir, 'audit'), parseAuditQuery({ action: 'reservation.extend' }, () => true));
    expect(page.entries).to.have.length(1);
    expect(page.entries[0]).to.include({ who: 'mallory', via: 'token', from: '127.0.0.1', outcome: res.status });
  });

  it('GET /api/v2/audit reads PostgreSQL with the filters, newest first, and pages', async () => {
    const res = await as(alice).get(`/api/v2/audit?user=alice&node=${NODE}&action=job`);
    expect(res.status, res.text).to.equal(200);
    expect(res.body.entries.map((e: { action: string }) => e.action)).to.deep.equal(['job.stop', 'job.run']);
    expect((await as(alice).get('/api/v2/audit?user=bob')).body.entries).to.deep.equal([]);
    expect((await as(alice).get('/api/v2/audit?since=2999-01-01')).body.entries).to.deep.equal([]);
    const first = await as(alice).get('/api/v2/audit?limit=1');
    expect(first.body.entries).to.have.length(1);
    const second = await as(alice).get(`/api/v2/audit?limit=1&before=${first.body.next_before}`);
    expect(Number(second.body.entries[0].id)).to.be.below(Number(first.body.entries[0].id));
    expectError(await as(alice).get('/api/v2/audit?limit=5000'), 400, 'invalid_filter');
    expectError(await as(alice).get('/api/v2/audit?before=abc'), 400, 'invalid_filter');
    const page = await as(alice).get('/app/audit?action=reservation').set('Accept', 'text/html');
    expect(page.status).to.equal(200);
    expect(page.text).to.include('data-action="reservation.create"').and.not.include('data-action="job.run"');
  });

  it("a user whose role is 'read' gets 403 from the API and the page", async () => {
    await farm.db.query(`UPDATE users SET role = 'read' WHERE username = 'bob'`);
    // The role comes with the token (the portal's verifier reloads on the users table's NOTIFY; bob had run).
    const res = await waitFor(async () => {
      const r = await as(bob).get('/api/v2/audit');
      return r.status === 403 && /^read /.test(String(r.body.message)) ? r : undefined;
    }, "the portal's verifier to see bob's new role");
    expectError(res, 403, 'forbidden');
    expect(res.body.message).to.match(/^read may not read the audit trail/);
    expect((await as(bob).get('/app/audit').set('Accept', 'text/html')).status).to.equal(403);
  });

  it('farmhand farm token create is recorded, who cli', async () => {
    let err = '';
    const out = new PassThrough();
    const e = new PassThrough().on('data', (d: Buffer) => (err += d.toString()));
    const code = await runCli(['farm', '--database', connectionString(farm.cluster), 'token', 'create', 'alice'], { out, err: e }, { serve: () => Promise.reject(new Error('not here')) });
    expect(code, err).to.equal(0);
    const id = /created token ([0-9a-f]{8})/.exec(err)![1];
    const { rows: r } = await farm.db.query<Row>(`SELECT who, via, action, target FROM audit WHERE action = 'token.create'`);
    expect(r).to.deep.equal([{ who: 'cli', via: 'cli', action: 'token.create', target: id }]);
  });

  it('retention deletes rows older than audit.keep_days', async () => {
    await farm.db.query(`INSERT INTO audit (at, who, via, action, outcome) VALUES (now() - interval '100 days', 'old', 'token', 'job.run', 200), (now() - interval '10 days', 'recent', 'token', 'job.run', 200)`);
    const log = new PgAuditLog({ pool: farm.db, keepDays: 90 });
    await waitFor(async () => (await farm.db.query(`SELECT 1 FROM audit WHERE who = 'old'`)).rowCount === 0, 'the sweep at start to delete the old row');
    expect((await farm.db.query(`SELECT 1 FROM audit WHERE who = 'recent'`)).rowCount).to.equal(1);
    await log.close();
  });
});
