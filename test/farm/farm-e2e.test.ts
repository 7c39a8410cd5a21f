/**
 * The farm end to end: a real PostgreSQL, the real portal and three real
 * `farmhand serve` nodes that join it over their outbound connections. A
 * client talks to the portal only, and names the node in node_id and ids.
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { expectError } from '../helpers/errors.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { SseClient } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';

const PASS = 'tests/basic.py::test_pass';
const FAIL = 'tests/basic.py::test_fail';
const NODES = ['rack1-a', 'rack1-b', 'rack2-a'];

describe('farm: a portal and three nodes', function () {
  this.timeout(120_000);
  let farm: TestFarm;
  let pack: TestPackRepo;
  let alice: string;
  let bob: string;
  const as = (token: string) => ({
    get: (p: string) => farm.http.get(p).set('Authorization', `token ${token}`),
    post: (p: string) => farm.http.post(p).set('Authorization', `token ${token}`),
    delete: (p: string) => farm.http.delete(p).set('Authorization', `token ${token}`),
  });

  before(async () => {
    // One test pack for the farm, as a lab has: every node clones the same repository.
    pack = await makeTestPack();
    farm = await startTestFarm();
    for (const id of NODES) await farm.addNode(id, { pack });
    alice = await farm.tokenFor('alice');
    bob = await farm.tokenFor('bob');
  });
  after(async () => {
    await farm?.stop();
    await pack?.cleanup();
  });

  it('"GET /api/v2/nodes: JSON array of Node objects": every node of the farm, online, its node_url on the portal', async () => {
    const res = await as(alice).get('/api/v2/nodes');
    expect(res.status, res.text).to.equal(200);
    const byId = new Map((res.body as Array<Record<string, unknown>>).map((n) => [n.node_id, n]));
    expect([...byId.keys()].sort()).to.deep.equal([...NODES].sort());
    for (const id of NODES) {
      expect(byId.get(id)).to.include({ online: true, available: true, not_available_reason: null, node_url: `${farm.url}/api/v2/nodes/${id}` });
    }
    expectError(await as(alice).get('/api/v2/nodes/no-such-node'), 404, 'not_found', 'unknown node');
  });

  it('run_tests names the node; the job runs there, await_completion answers through the portal, and its results reach the farm-wide list', async () => {
    const run = await as(alice).post('/api/v2/run_tests').send({ node_id: 'rack1-b', test_pack_revision: 'main', test_cases: [PASS, FAIL], shuffle: false, tags: {} });
    expect(run.status, run.text).to.equal(200);
    expect(run.body.job_uid).to.match(/^\/rack1-b\//);
    expect(run.body.job_url).to.equal(`${farm.url}/api/v2/jobs${run.body.job_uid}`);
    const done = await as(alice).get(`/api/v2/jobs${run.body.job_uid}/await_completion`);
    expect(done.status, done.text).to.equal(200);
    expect(done.body.result_counts).to.include({ pass: 1, fail: 1 });
    // The node uploads each result after its run; the portal's list is the farm's index.
    const rows = await waitFor(
      async () => {
        const list = await as(alice).get('/api/v2/results').query({ filter: `job:${run.body.job_uid}`, sort: 'testcase:asc' });
        return list.body.length === 2 ? (list.body as Array<Record<string, unknown>>) : undefined;
      },
      { what: 'both results in the farm index', timeoutMs: 60_000 },
    );
    expect(rows.map((r) => [r.test_case, r.result])).to.deep.equal([
      [FAIL, 'fail'],
      [PASS, 'pass'],
    ]);
    expect(rows[0]!.result_url).to.equal(`${farm.url}/api/v2/results${rows[0]!.result_id as string}`);
    // Read on the portal, from its storage, the same bytes as on the node.
    const id = rows[1]!.result_id as string;
    const node = farm.nodes.get('rack1-b')!;
    const shot = await as(alice).get(`/api/v2/results${id}/screenshot.png`).buffer(true);
    expect(shot.status).to.equal(200);
    const local = await readFile(path.join(node.dataDir, 'results', ...id.split('/').filter(Boolean).slice(1), 'screenshot.png')).catch(() => undefined);
    if (local) expect(createHash('sha256').update(shot.body as Buffer).digest('hex')).to.equal(createHash('sha256').update(local).digest('hex'));
    const listing = await as(alice).get(`/api/v2/results${id}/artifacts/`);
    expect(listing.status, listing.text).to.equal(200);
  });

  it('"Atomic: all or none": overlapping reservations across nodes never both win; a reserved node refuses another user\'s run_tests with 403', async () => {
    const made = await as(alice).post('/api/v2/reservations').send({ node_ids: ['rack1-a', 'rack2-a'], message: 'firmware bisect' });
    expect(made.status, made.text).to.equal(200);
    expect(made.body.reservations.map((r: { node_id: string }) => r.node_id)).to.deep.equal(['rack1-a', 'rack2-a']);
    try {
      expectError(await as(bob).post('/api/v2/reservations').send({ node_ids: ['rack1-b', 'rack2-a'], message: 'mine' }), 409, 'conflict', 'overlapping reservation');
      // Nothing of bob's request was reserved: rack1-b is still free.
      const b = await as(bob).get('/api/v2/nodes/rack1-b');
      expect(b.body).to.include({ available: true, reservation: null });
      const a = await as(bob).get('/api/v2/nodes/rack1-a');
      expect(a.body.available).to.equal(false);
      expect(a.body.reservation).to.include({ username: 'alice', reserved_by_you: false, message: 'firmware bisect' });
      expectError(
        await as(bob).post('/api/v2/run_tests').send({ node_id: 'rack1-a', test_pack_revision: 'main', test_cases: [PASS] }),
        403,
        'forbidden',
        "run_tests on alice's node",
      );
    } finally {
      for (const r of made.body.reservations as Array<{ reservation_id: number }>) {
        expect((await as(alice).delete(`/api/v2/reservations/${r.reservation_id}`)).status).to.equal(204);
      }
    }
  });

  it('the farm-wide event stream carries a node\'s run.finished with its node_id', async () => {
    const sse = await SseClient.open(`${farm.url}/api/v2/events`, { Authorization: `token ${alice}` });
    try {
      expect(sse.res.statusCode).to.equal(200);
      const run = await as(alice).post('/api/v2/run_tests').send({ node_id: 'rack2-a', test_pack_revision: 'main', test_cases: [PASS], shuffle: false, tags: {} });
      expect(run.status, run.text).to.equal(200);
      const m = await sse.next((x) => x.event === 'run.finished' && (x.data.data as { node_id?: string } | undefined)?.node_id === 'rack2-a', 'run.finished of rack2-a');
      expect(m.id).to.match(/^\d+$/);
    } finally {
      sse.close();
    }
  });

  it('"await_completion: Long poll. Returns at once if the job already finished": twenty waiters of one job through the portal share the long poll to its node, and each gets the whole answer', async () => {
    const run = await as(alice).post('/api/v2/run_tests').send({ node_id: 'rack2-a', test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'], shuffle: false, tags: {} });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;
    const before = { ...farm.portal.awaits.stats };
    const answers = Promise.all(Array.from({ length: 20 }, () => as(alice).get(`/api/v2/jobs${uid}/await_completion`).then((r) => r)));
    await waitFor(() => farm.portal.awaits.waiting() === 20, 'the twenty waiters held by the portal');
    const stop = await as(alice).post(`/api/v2/jobs${uid}/stop`);
    expect(stop.status, stop.text).to.equal(200);
    const done = await answers;
    for (const r of done) {
      expect(r.status, r.text).to.equal(200);
      expect(r.body).to.include({ job_uid: uid, status: 'exited' });
      expect(r.text).to.equal(done[0]!.text);
    }
    // Requests in one burst share (a request more than a second after the first starts its own): far fewer forwards than waiters.
    const forwarded = farm.portal.awaits.stats.forwarded - before.forwarded;
    expect(forwarded).to.be.at.least(1).and.below(10);
    expect(farm.portal.awaits.stats.joined - before.joined).to.equal(20 - forwarded);
    // Once it has ended, a new waiter gets the answer at once, from a forward of its own.
    const again = await as(alice).get(`/api/v2/jobs${uid}/await_completion`);
    expect(again.status).to.equal(200);
    expect(again.text).to.equal(done[0]!.text);
    expect(farm.portal.awaits.stats.forwarded - before.forwarded).to.equal(forwarded + 1);
  });

  it('await_completion through the portal answers exited as soon as the record is in the index, without waiting for the files (held here)', async () => {
    const uploads = farm.portal.uploads;
    const status = uploads.status.bind(uploads);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let held = 0;
    // Every file's upload starts with asking the portal's offset: hold those until the end of the test.
    uploads.status = async (...args) => {
      held++;
      await gate;
      return status(...args);
    };
    try {
      const run = await as(alice).post('/api/v2/run_tests').send({ node_id: 'rack1-b', test_pack_revision: 'main', test_cases: [PASS], shuffle: false, tags: {} });
      expect(run.status, run.text).to.equal(200);
      const uid = run.body.job_uid as string;
      const done = await as(alice).get(`/api/v2/jobs${uid}/await_completion`);
      expect(done.status, done.text).to.equal(200);
      expect(done.body).to.include({ status: 'exited' });
      expect(done.body.result_counts).to.include({ pass: 1, total: 1 });
      // Answered by the read-your-writes rule (the result is in the index), not by its 30 s limit; no file is uploaded yet.
      const { rows } = await farm.db.query<{ result_id: string }>('SELECT result_id FROM results WHERE job_uid = $1', [uid]);
      expect(rows).to.have.length(1);
      expect(await readdir(farm.portal.store.dirOf(rows[0]!.result_id)).catch(() => []), 'no file uploaded yet').to.deep.equal([]);
      expect(await farm.portal.store.filesOnNode(rows[0]!.result_id)).to.equal(true);
      // Its files are read from the node meanwhile.
      const log = await as(alice).get(`/api/v2/results${rows[0]!.result_id}/farmhand.log`);
      expect(log.status, log.text).to.equal(200);
      expect(log.text).to.include(PASS.split('::')[1]);
      // So are v1's (the result page's links): the record and the log, from the node.
      const v1 = await as(alice).get(`/api/v1/result${rows[0]!.result_id}`);
      expect(v1.status, v1.text).to.equal(200);
      expect(v1.body).to.include({ result: 'pass', test_case: PASS });
      const v1log = await as(alice).get(`/api/v1/result${rows[0]!.result_id}/farmhand.log`);
      expect(v1log.status, v1log.text).to.equal(200);
      expect(v1log.text).to.include(PASS.split('::')[1]);
      await waitFor(() => held > 0, 'the first file upload to be held');
    } finally {
      uploads.status = status;
      release();
    }
  });

  it('a node that leaves is offline, with the reason, and its node-scoped calls answer 503', async () => {
    const node = farm.nodes.get('rack1-a')!;
    await node.stop();
    farm.nodes.delete('rack1-a');
    await waitFor(() => farm.portal.hub.link('rack1-a')?.online === false, { what: 'rack1-a offline at the portal', timeoutMs: 30_000 });
    const res = await as(alice).get('/api/v2/nodes/rack1-a');
    expect(res.body).to.include({ online: false, available: false });
    expect(res.body.not_available_reason).to.match(/^offline: /);
    expectError(await as(alice).get('/api/v2/nodes/rack1-a/screenshot.png'), 503, 'device_unavailable', 'screenshot of an offline node');
  });
});
