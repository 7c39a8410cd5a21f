/**
 * v2 reservations and node status on this node: the state machine, the
 * permissions matrix (owner, other user, no token, revoked token) over run,
 * stop, press, extend, delete and interrupt, and expiry across a restart.
 */
import { expect } from 'chai';
import { client as request } from '../helpers/contract.js';
import { startDaemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/logger.js';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { asUser } from '../helpers/auth.js';
import { expectError } from '../helpers/errors.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';

const NODE = 'farmhand-test';
const PASS = 'tests/basic.py::test_pass';
const FILES = {
  ...STANDARD_FILES,
  'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF,
  'config/test-farm/farmhand-test.conf': '[node]\nfriendly_name = Rack 3, shelf 2\n\n[device_under_test]\ndevice_type = virtual-stb\nip_address = 192.0.2.10\n',
};

describe('v2 reservations and node status', function () {
  this.timeout(90_000);
  let d: TestDaemon;
  let alice: Awaited<ReturnType<typeof asUser>>;
  let bob: Awaited<ReturnType<typeof asUser>>;

  before(async () => {
    d = await startTestDaemon({ files: FILES, config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 } } });
    alice = await asUser(d, 'alice');
    bob = await asUser(d, 'bob');
    await waitOnline(d);
  });
  after(() => d?.stop());

  const reserve = (who: typeof alice, body: Record<string, unknown>) => who.post('/api/v2/reservations').send({ node_ids: [NODE], message: 'testing **firmware 2.1**', ...body });

  it('the node status carries every field of the spec, with config from config/test-farm/<node_id>.conf', async () => {
    const res = await alice.get(`/api/v2/nodes/${NODE}`);
    expect(res.status).to.equal(200);
    expect(res.body).to.include.all.keys(
      'node_id', 'node_url', 'available', 'not_available_reason', 'online', 'config', 'device_type', 'friendly_name',
      'external_ip_address', 'local_ip_address', 'geoip_city', 'geoip_country', 'job', 'last_used_by', 'last_used_time', 'licence_expiry', 'reservation',
    );
    expect(res.body).to.include({ node_id: NODE, node_url: `${d.url}/api/v2/nodes/${NODE}`, online: true, available: true, not_available_reason: null });
    expect(res.body).to.include({ friendly_name: 'Rack 3, shelf 2', device_type: 'virtual-stb', licence_expiry: '2099-12-31' });
    expect(res.body.config).to.deep.equal({ node: { friendly_name: 'Rack 3, shelf 2' }, device_under_test: { device_type: 'virtual-stb', ip_address: '192.0.2.10' } });
    expect((await alice.get('/api/v2/nodes')).body).to.have.length(1);
    expectError(await alice.get('/api/v2/nodes/another-node'), 404, 'not_found');
  });

  it('reserve: 200 with the reservation; the node is then not available, even for the holder; message_html escapes raw HTML', async () => {
    const res = await reserve(alice, { duration_secs: 600, message: 'hi <script>alert(1)</script> **bold**' });
    expect(res.status, res.text).to.equal(200);
    const [r] = res.body.reservations;
    expect(r).to.include({ node_id: NODE, username: 'alice', reserved_by_you: true });
    expect(r.message_html).to.include('<strong>bold</strong>').and.not.include('<script>');
    expect(Date.parse(r.expires) - Date.parse(r.start_time)).to.equal(600_000);
    const mine = (await alice.get(`/api/v2/nodes/${NODE}`)).body;
    expect(mine.available).to.equal(false);
    expect(mine.not_available_reason).to.match(/reserved by alice/);
    expect(mine.reservation.reserved_by_you).to.equal(true);
    expect((await bob.get(`/api/v2/nodes/${NODE}`)).body.reservation.reserved_by_you).to.equal(false);
    expectError(await reserve(bob, {}), 409, 'conflict');
    await alice.delete(`/api/v2/reservations/${r.reservation_id}`);
  });

  it('permissions matrix: run, stop, press, extend, delete, interrupt for owner, other user, no token, revoked token', async () => {
    const carol = await asUser(d, 'carol');
    const [r] = (await reserve(alice, { duration_secs: 600 })).body.reservations;
    const id = r.reservation_id as number;
    const anon = request(d.url);
    const revoked = await asUser(d, 'dave');
    const store = new TokenStore(tokensFile(d.dataDir));
    for (const t of (await store.list()).filter((x) => x.user === 'dave')) await store.revoke(t.id);

    const runBody = { node_id: NODE, test_pack_revision: 'main', test_cases: [PASS], remote_control: 'vstb' };
    // Other user: 403 for run, press, stop, extend, delete, with a message naming the holder.
    const denied = await bob.post('/api/v2/run_tests').send(runBody);
    expectError(denied, 403, 'forbidden');
    expect(denied.body.message).to.include('alice').and.include('testing **firmware 2.1**');
    expectError(await bob.post(`/api/v2/nodes/${NODE}/press`).send({ key: 'KEY_OK' }), 403, 'forbidden', 'press');
    expectError(await request(d.url).post('/api/v1/run_tests').send({ test_pack_revision: 'main', test_cases: [PASS] }), 403, 'forbidden', 'v1 run_tests');
    expectError(await bob.post(`/api/v2/reservations/${id}/extend`).send({ duration_secs: 60 }), 403, 'forbidden', 'extend');
    expectError(await bob.delete(`/api/v2/reservations/${id}`), 403, 'forbidden', 'delete');
    // No token and a revoked token: 403 for everything.
    for (const [m, p, body] of [
      ['post', '/api/v2/run_tests', runBody],
      ['post', `/api/v2/nodes/${NODE}/press`, { key: 'KEY_OK' }],
      ['post', `/api/v2/nodes/${NODE}/job/stop`, {}],
      ['post', `/api/v2/reservations/${id}/extend`, { duration_secs: 60 }],
      ['delete', `/api/v2/reservations/${id}`, {}],
      ['post', `/api/v2/reservations/${id}/interrupt`, { message: 'x' }],
    ] as const) {
      expectError(await anon[m](p).send(body), 403, 'forbidden', `anonymous ${p}`);
      expectError(await revoked[m](p).send(body), 403, 'forbidden', `revoked ${p}`);
    }
    // Owner: run, press, stop, extend all allowed.
    const run = await alice.post('/api/v2/run_tests').send(runBody);
    expect(run.status, run.text).to.equal(200);
    expectError(await bob.post(`/api/v2/jobs${run.body.job_uid}/stop`), 403, 'forbidden', 'stop by another user');
    expect((await alice.post(`/api/v2/jobs${run.body.job_uid}/stop`)).status).to.equal(200);
    expect((await alice.post(`/api/v2/nodes/${NODE}/press`).send({ key: 'KEY_OK' })).status).to.equal(204);
    expect((await alice.post(`/api/v2/reservations/${id}/extend`).send({ duration_secs: 60 })).status).to.equal(204);
    const extended = (await alice.get(`/api/v2/nodes/${NODE}`)).body.reservation;
    expect(Date.parse(extended.expires) - Date.parse(r.expires)).to.equal(60_000);
    // Interrupt: any authenticated user; a message is required.
    expectError(await carol.post(`/api/v2/reservations/${id}/interrupt`).send({}), 400, 'invalid_request', 'interrupt without a message');
    expect((await carol.post(`/api/v2/reservations/${id}/interrupt`).send({ message: 'need the box for a release' })).status).to.equal(204);
    expect((await carol.post(`/api/v2/reservations/${id}/interrupt`).send({ message: 'again' })).status).to.equal(204);
    // Ended: extend 400, delete 204; the owner learns of the interruption once.
    expect((await alice.delete(`/api/v2/reservations/${id}`)).status).to.equal(204);
    const ext = await alice.post(`/api/v2/reservations/${id}/extend`).send({ duration_secs: 60 });
    expectError(ext, 400, 'invalid_request', 'extend an ended reservation');
    expect(ext.body.message).to.include('carol').and.include('need the box for a release');
    const status = (await alice.get(`/api/v2/nodes/${NODE}`)).body;
    expect(status.available).to.equal(true);
    expect(status.notices ?? []).to.have.length(0); // shown once, already on the extend
    expectError(await alice.delete('/api/v2/reservations/9999'), 404, 'not_found');
    expectError(await alice.delete('/api/v2/reservations/abc'), 400, 'invalid_request');
    expect(status.last_used_by).to.equal('alice');
  });

  it('reserve is refused with 409 while a job runs (busy), and nothing is reserved', async () => {
    const run = await alice.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'], remote_control: 'vstb' });
    expect(run.status).to.equal(200);
    expectError(await reserve(bob, {}), 409, 'conflict');
    expect((await bob.get(`/api/v2/nodes/${NODE}`)).body.reservation).to.equal(null);
    expect((await alice.post(`/api/v2/jobs${run.body.job_uid}/stop`)).status).to.equal(200);
  });

  it('a reservation without duration_secs never expires (expires is null)', async () => {
    const res = await reserve(bob, { duration_secs: null });
    expect(res.body.reservations[0].expires).to.equal(null);
    expect((await bob.delete(`/api/v2/reservations/${res.body.reservations[0].reservation_id}`)).status).to.equal(204);
  });

  // The timer that ends a reservation at its instant is tested with a fake clock in
  // test/unit/reservations-expiry.test.ts; here the daemon's own start-up, with durations no restart outlasts.
  it('a reservation survives a daemon restart; one that expired while the daemon was down ends at its expiry', async () => {
    const res = await reserve(alice, { duration_secs: 3600 });
    expect(res.status, res.text).to.equal(200);
    const [r] = res.body.reservations;
    const restart = async () => {
      await d.daemon.stop();
      d.daemon = await startDaemon(d.config, silentLogger); // the same data directory
      return request(d.daemon.url);
    };
    let h = await restart();
    const status = async () => (await h.get(`/api/v2/nodes/${NODE}`).set('Authorization', `token ${bob.token}`)).body;
    expect((await status()).reservation).to.include({ reservation_id: r.reservation_id, expires: r.expires });
    // While the daemon is down, the reservation's expiry passes: set to the instant after the stop (a fast
    // machine does all of the above within a second, so "1 s after its start" may still be in the future).
    await d.daemon.stop();
    const expiry = new Date().toISOString();
    const file = path.join(d.dataDir, 'state.json');
    const state = JSON.parse(await readFile(file, 'utf8'));
    const saved = state.reservations.find((x: { reservation_id: number }) => x.reservation_id === r.reservation_id);
    saved.expires = expiry;
    await writeFile(file, JSON.stringify(state));
    d.daemon = await startDaemon(d.config, silentLogger);
    h = request(d.daemon.url);
    await waitOnline(d); // available needs the capture up as well
    const after = await status();
    expect(after.reservation).to.equal(null);
    expect(after.available).to.equal(true);
    await d.daemon.stop(); // flushes state.json
    const ended = JSON.parse(await readFile(file, 'utf8')).reservations.find((x: { reservation_id: number }) => x.reservation_id === r.reservation_id);
    expect(ended.ended).to.include({ how: 'expired', time: expiry });
    d.daemon = await startDaemon(d.config, silentLogger); // for `after`
  });
});

describe('licence', function () {
  this.timeout(30_000);
  let d: TestDaemon;
  before(async () => {
    d = await startTestDaemon({ config: { capture: { uri: 'none:' }, node: { licence_expiry: '2020-01-31' } } });
  });
  after(() => d?.stop());

  it('"403 ... node licence expired on run_tests"; the node is not available and says why', async () => {
    const alice = await asUser(d, 'alice');
    const res = await alice.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: [PASS], remote_control: 'vstb' });
    expectError(res, 403, 'forbidden');
    expect(res.body.message).to.match(/licence/);
    const node = (await alice.get(`/api/v2/nodes/${NODE}`)).body;
    expect(node).to.include({ available: false, licence_expiry: '2020-01-31' });
    expect(node.not_available_reason).to.match(/licence expired/);
  });
});
