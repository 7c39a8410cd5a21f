// The job queue over HTTP on a real portal (its own dispatcher, as `farmhand portal` runs it) with a real node
// (farmhand serve on a virtual box): POST /api/v2/jobs, GET /api/v2/queue[/<id>], DELETE /api/v2/queue/<id>, the
// refusals with their codes, and the node labels in the portal's Node objects (docs/queue.md).
import { expect } from 'chai';
import type { NodeLink } from '../../src/farm/contract.js';
import { presentFarmNode, type NodeRow } from '../../src/farm/portal/nodeViews.js';
import { setNodeLabels } from '../../src/farm/queue/labels.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { waitFor } from '../helpers/wait.js';

const PASS = 'tests/basic.py::test_pass';
const HANG = 'tests/hang.py::test_hang';
const NODE = 'vbox-q1';

describe('the job queue over HTTP on a portal', function () {
  this.timeout(180_000);
  let farm: TestFarm;
  let pack: TestPackRepo;
  let alice: string;
  let bob: string;

  before(async () => {
    pack = await makeTestPack();
    farm = await startTestFarm();
    await farm.addNode(NODE, { pack });
    await setNodeLabels(farm.db, NODE, { device: 'vbox', room: 'lab1' }, []);
    alice = await farm.tokenFor('alice');
    bob = await farm.tokenFor('bob');
  });
  after(async () => {
    await farm?.stop();
    await pack?.cleanup();
  });

  const post = (token: string, body: unknown) => farm.http.post('/api/v2/jobs').set('Authorization', `token ${token}`).send(body as object);
  const get = (path: string, token = alice) => farm.http.get(path).set('Authorization', `token ${token}`);
  const cancel = (id: number, token: string) => farm.http.delete(`/api/v2/queue/${id}`).set('Authorization', `token ${token}`);
  const stateOf = async (id: number) => (await get(`/api/v2/queue/${id}`)).body as { state: string; job_uid: string | null; node_id: string | null };
  const expect400 = (res: { status: number; body: { error?: string; message?: string }; text: string }, words: string) => {
    expect(res.status, res.text).to.equal(400);
    expect(res.body.error).to.equal('invalid_request');
    expect(res.body.message).to.include(words);
  };

  it('shows the administrator`s labels in GET /api/v2/nodes and GET /api/v2/nodes/<id>', async () => {
    const list = await get('/api/v2/nodes');
    expect(list.status, list.text).to.equal(200);
    expect((list.body as { node_id: string; labels: unknown }[]).find((n) => n.node_id === NODE)!.labels).to.deep.equal({ device: 'vbox', room: 'lab1' });
    const one = await get(`/api/v2/nodes/${NODE}`);
    expect(one.status, one.text).to.equal(200);
    expect(one.body.labels).to.deep.equal({ device: 'vbox', room: 'lab1' });
  });

  it('never takes a node`s own word for its labels (its snapshot`s `labels` is replaced)', () => {
    const row: NodeRow = { node_id: 'n1', version: '1', online: true, offline_reason: null, last_seen: null };
    const link = { nodeId: 'n1', online: true, offlineReason: null, snapshot: { labels: { device: 'roku', admin: 'yes' } } } as unknown as NodeLink;
    expect(presentFarmNode(row, link, undefined, 'alice', 'http://portal', { device: 'vbox' }).labels).to.deep.equal({ device: 'vbox' });
    expect(presentFarmNode(row, link, undefined, 'alice', 'http://portal', {}).labels).to.deep.equal({});
  });

  it('refuses bad input with 400 invalid_request and a message, and an unknown queue id with 404', async () => {
    const run = { test_pack_revision: 'main', test_cases: [PASS] };
    expect400(await post(alice, { ...run, labels: { colour: 'red' } }), 'unknown label "colour"');
    expect400(await post(alice, { ...run, labels: { device: 'firetv' } }), 'unknown label device=firetv');
    expect400(await post(alice, { ...run, labels: 'device=vbox,room=lab9' }), 'unknown label room=lab9');
    expect400(await post(alice, { ...run, labels: { device: 'vbox' }, priority: 101 }), 'priority must be a whole number from 0');
    expect400(await post(alice, { ...run, labels: { device: 'vbox' }, priority: 2.5 }), 'priority');
    expect400(await post(alice, { ...run, labels: { device: 'vbox' }, queue_timeout_secs: 0 }), 'queue_timeout_secs');
    expect400(await post(alice, { ...run, labels: { device: 'vbox' }, node_id: NODE }), 'names labels, not a node');
    expect400(await post(alice, { test_pack_revision: 'main', labels: { device: 'vbox' } }), 'test_cases');
    expect400(await post(alice, { ...run }), 'labels is required');
    expect400(await get('/api/v2/queue?state=waiting'), 'state');
    expect400(await get('/api/v2/queue?labels=Device'), 'labels');
    expect400(await get('/api/v2/queue/abc'), 'queue_id');
    const missing = await get('/api/v2/queue/999999');
    expect(missing.status, missing.text).to.equal(404);
    expect(missing.body.error).to.equal('not_found');
    expect((await get('/api/v2/queue?state=queued')).body).to.deep.equal([]);
  });

  it('queues at once, starts on the matching free node for the caller, says why the others wait, and cancels', async () => {
    const hang = await post(alice, { labels: { device: 'vbox' }, priority: 90, test_pack_revision: 'main', test_cases: [HANG] });
    expect(hang.status, hang.text).to.equal(201);
    expect(hang.headers.location).to.equal(`/api/v2/queue/${hang.body.queue_id}`);
    expect(hang.body).to.include({ username: 'alice', priority: 90, selector: 'device=vbox' });
    const running = await waitFor(async () => {
      const s = await stateOf(hang.body.queue_id);
      return s.state === 'started' ? s : undefined;
    }, { what: 'the first queued job started', timeoutMs: 60_000 });
    expect(running.node_id).to.equal(NODE);
    await waitFor(async () => ((await get(`/api/v2/nodes/${NODE}`)).body as { job: { status: string } | null }).job?.status === 'running', { what: 'the node running it', timeoutMs: 60_000 });

    const next = await post(alice, { labels: { room: 'lab1', device: 'vbox' }, test_pack_revision: 'main', test_cases: [PASS], tags: { build: '42' } });
    expect(next.status, next.text).to.equal(201);
    expect(next.body.state).to.equal('queued');
    expect(next.body.waiting).to.include({ kind: 'busy', matching: 1, position: 1 });
    const later = await post(alice, { labels: { device: 'vbox' }, priority: 10, test_pack_revision: 'main', test_cases: [PASS] });
    expect(later.body.waiting).to.include({ kind: 'busy', position: 2 });

    const listed = await get('/api/v2/queue?labels=device=vbox,room=lab1&state=queued');
    expect(listed.status, listed.text).to.equal(200);
    expect((listed.body as { queue_id: number }[]).map((j) => j.queue_id)).to.deep.equal([next.body.queue_id]);
    const all = (await get('/api/v2/queue?state=queued')).body as { queue_id: number; waiting: { message: string } }[];
    expect(all.map((j) => j.queue_id)).to.deep.equal([next.body.queue_id, later.body.queue_id]);
    expect(all[0]!.waiting.message).to.equal('the one node with device=vbox,room=lab1 is busy (1 running a job)');

    // Cancel: not another user's; the owner's; twice is no error.
    const refused = await cancel(later.body.queue_id, bob);
    expect(refused.status, refused.text).to.equal(403);
    expect(refused.body.error).to.equal('forbidden');
    const done = await cancel(later.body.queue_id, alice);
    expect(done.status, done.text).to.equal(200);
    expect(done.body).to.include({ state: 'cancelled', ended_by: 'alice' });
    const again = await cancel(later.body.queue_id, alice);
    expect(again.status, again.text).to.equal(200);
    expect(again.body.state).to.equal('cancelled');
    const started = await cancel(hang.body.queue_id, alice);
    expect(started.status, started.text).to.equal(409);
    expect(started.body.message).to.include(running.job_uid!);

    // The node frees: the waiting job starts there, on behalf of alice, with its tags.
    const stop = await farm.http.post(`/api/v2/jobs${running.job_uid}/stop`).set('Authorization', `token ${alice}`);
    expect(stop.status, stop.text).to.equal(200);
    const second = await waitFor(async () => {
      const s = await stateOf(next.body.queue_id);
      return s.state === 'started' ? s : undefined;
    }, { what: 'the waiting job started', timeoutMs: 60_000 });
    const end = await get(`/api/v2/jobs${second.job_uid}/await_completion`);
    expect(end.status, end.text).to.equal(200);
    const row = await waitFor(
      async () => (await farm.db.query<{ username: string; tags: Record<string, string> }>('SELECT username, tags FROM results WHERE job_uid = $1', [second.job_uid])).rows[0],
      { what: 'the result in the farm index', timeoutMs: 30_000 },
    );
    expect(row).to.deep.include({ username: 'alice', tags: { build: '42' } });
    expect((await stateOf(later.body.queue_id)).state).to.equal('cancelled');

    // The audit trail: the enqueue and cancel requests, and job.run of each queued job started, by alice.
    const audit = await waitFor(
      async () => {
        const { rows } = await farm.db.query<{ action: string; who: string; target: string | null; detail: Record<string, unknown>; outcome: number }>(
          "SELECT action, who, target, detail, outcome FROM audit WHERE action IN ('queue.enqueue', 'queue.cancel', 'job.run') ORDER BY id",
        );
        return rows.filter((r) => r.action === 'job.run').length >= 2 ? rows : undefined;
      },
      { what: 'the audit entries', timeoutMs: 30_000 },
    );
    const runs = audit.filter((r) => r.action === 'job.run');
    expect(runs.map((r) => [r.who, r.target, r.detail.queue_id])).to.deep.equal([
      ['alice', running.job_uid, hang.body.queue_id],
      ['alice', second.job_uid, next.body.queue_id],
    ]);
    expect(audit.filter((r) => r.action === 'queue.cancel').map((r) => [r.who, r.target, r.outcome])).to.deep.equal([
      ['bob', String(later.body.queue_id), 403],
      ['alice', String(later.body.queue_id), 200],
      ['alice', String(later.body.queue_id), 200],
      ['alice', String(hang.body.queue_id), 409],
    ]);
    const queued = audit.filter((r) => r.action === 'queue.enqueue' && r.outcome === 201);
    expect(queued).to.have.length(3);
    // Each names the queued job it made, and what it waits for.
    expect(queued.map((r) => r.target)).to.include.members([String(hang.body.queue_id), String(next.body.queue_id), String(later.body.queue_id)]);
    for (const r of queued) expect(r.detail).to.have.property('selector').that.is.a('string').and.match(/=/);
  });
});
