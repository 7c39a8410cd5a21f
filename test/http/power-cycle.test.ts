/**
 * The power-cycle endpoint on a real node daemon (docs/power.md, "The power-cycle endpoint"):
 * - `power.uri` "virtual:": the virtual box's mains go off and on again (its own log of mains transitions);
 *   the role check (read 403, manual allowed), bad bodies 400, another node 404, another user's reservation
 *   403 and a running job 409, nothing switched by any refusal; the audit trail's `power.cycle` entries, with
 *   the off_secs of each cycle (the outlet's own when no body named it); the
 *   live page offers the button to a manual user;
 * - an HTTP outlet (the Shelly Gen1 stand-in of the power driver tests, on loopback): the requests the
 *   cycle sends, the URI's off_secs as the default, a second cycle refused with 409 while the first is held
 *   at the outlet, a device that stops answering a 503 naming the outlet;
 * - a node without an outlet: 404, no power service, no button on its live page.
 */
import { expect } from 'chai';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { client as request } from '../helpers/contract.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { capturingLogger } from '../helpers/logger.js';
import { waitFor } from '../helpers/wait.js';
import { startHttpOutlets, type HttpPeer, type HttpPeerOptions } from '../unit/power-peers.js';

const NODE = 'farmhand-test';
const CYCLE = `/api/v2/nodes/${NODE}/power/cycle`;
const FILES = { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF };

/** Tokens of users with roles (a node with roles: every caller here has one). */
async function tokens(d: TestDaemon, users: Record<string, 'read' | 'manual' | 'run' | 'admin'>): Promise<Record<string, string>> {
  const store = new TokenStore(tokensFile(d.dataDir));
  const out: Record<string, string> = {};
  for (const [user, role] of Object.entries(users)) out[user] = (await store.create(user, { role })).token;
  return out;
}

const as = (d: TestDaemon, token: string) => {
  const h = request(d.daemon.url);
  return {
    get: (p: string) => h.get(p).set('Authorization', `token ${token}`),
    post: (p: string) => h.post(p).set('Authorization', `token ${token}`),
    delete: (p: string) => h.delete(p).set('Authorization', `token ${token}`),
  };
};

describe('power-cycle endpoint: the virtual outlet', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let t: Record<string, string>;
  const log = capturingLogger();
  /** The virtual box's own record of its mains: true on, false off, in order. */
  const mains = () => log.entries.filter((e) => e.msg === 'virtual set-top box: mains power').map((e) => e.obj.on);

  before(async () => {
    d = await startTestDaemon({
      files: FILES,
      config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 }, power: { uri: 'virtual:' } },
      logger: log,
    });
    t = await tokens(d, { mia: 'manual', bob: 'run', rita: 'read', ada: 'admin' });
  });
  after(() => d?.stop());

  it('a manual user power-cycles the box: it goes off, then on again, and the answer says when', async () => {
    expect(d.daemon.services.power?.outlet.uri).to.equal('virtual:');
    const res = await as(d, t.mia!).post(CYCLE).send({ off_secs: 0 });
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.have.all.keys('node_id', 'off_secs', 'started', 'ended');
    expect(res.body).to.include({ node_id: NODE, off_secs: 0 });
    expect(Date.parse(res.body.ended as string)).to.be.at.least(Date.parse(res.body.started as string));
    expect(mains()).to.deep.equal([false, true]);
    expect(d.daemon.virtualStb!.mains()).to.equal(true);
  });

  it('refused before anything is switched: read role 403, bad bodies 400, another node 404', async () => {
    const before = mains().length;
    const denied = await as(d, t.rita!).post(CYCLE).send({ off_secs: 0 });
    expectError(denied, 403, 'forbidden');
    expect(denied.body.message).to.match(/^read may not power-cycle the device under test/);
    for (const body of [{ off_secs: -1 }, { off_secs: 601 }, { off_secs: '5' }, { off_secs: true }, { off: 5 }, [1], 'now']) {
      const bad = await as(d, t.mia!).post(CYCLE).set('Content-Type', 'application/json').send(JSON.stringify(body));
      expectError(bad, 400, 'invalid_request');
      expect(bad.body.message, JSON.stringify(body)).to.match(/off_secs|unknown field|JSON object/);
    }
    expectError(await as(d, t.mia!).post('/api/v2/nodes/another-node/power/cycle').send({ off_secs: 0 }), 404, 'not_found');
    expect(mains().length).to.equal(before);
  });

  it("refused under another user's reservation (403 naming its owner) and while a job runs (409)", async () => {
    const before = mains().length;
    const made = await as(d, t.bob!).post('/api/v2/reservations').send({ node_ids: [NODE], duration_secs: 600, message: 'soak test' });
    expect(made.status, made.text).to.equal(200);
    const reserved = await as(d, t.mia!).post(CYCLE).send({ off_secs: 0 });
    expectError(reserved, 403, 'forbidden');
    expect(reserved.body.message).to.contain('cannot power-cycle the device').and.to.contain('bob');
    // Its owner may.
    expect((await as(d, t.bob!).post(CYCLE).send({ off_secs: 0 })).status).to.equal(200);
    expect((await as(d, t.bob!).delete(`/api/v2/reservations/${made.body.reservations[0].reservation_id}`)).status).to.equal(204);

    const run = await as(d, t.ada!).post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] });
    expect(run.status, run.text).to.equal(200);
    try {
      const busy = await as(d, t.mia!).post(CYCLE).send({ off_secs: 0 });
      expectError(busy, 409, 'conflict');
      expect(busy.body.message).to.contain('a test job is running');
    } finally {
      expect((await as(d, t.ada!).post(`/api/v2/jobs${run.body.job_uid as string}/stop`)).status).to.be.oneOf([200, 202]);
      await waitForJob(d, run.body.job_uid as string);
    }
    // bob's own cycle only: two transitions.
    expect(mains().length).to.equal(before + 2);
  });

  it('audited as power.cycle: who, from where, the node, the status answered and off_secs (as done, or as asked)', async () => {
    // One more cycle with no body: the entry has the outlet's own off_secs (virtual: 5), from the answer.
    expect((await as(d, t.mia!).post(CYCLE)).status).to.equal(200);
    const res = await as(d, t.ada!).get('/api/v2/audit?action=power.cycle');
    expect(res.status, res.text).to.equal(200);
    const entries = (res.body.entries as { who: string; via: string; node: string; outcome: number; target: string | null; detail: Record<string, unknown> }[]).reverse();
    expect(entries.map((e) => [e.who, e.via, e.node, e.outcome, e.detail])).to.deep.equal([
      ['mia', 'token', NODE, 200, { off_secs: 0 }],
      ['rita', 'token', NODE, 403, { off_secs: 0 }],
      // The bad bodies: a number is recorded as asked, anything else not at all.
      ...[-1, 601, null, null, null, null, null].map((o) => ['mia', 'token', NODE, 400, { off_secs: o }]),
      ['mia', 'token', NODE, 404, { off_secs: 0 }],
      ['mia', 'token', NODE, 403, { off_secs: 0 }],
      ['bob', 'token', NODE, 200, { off_secs: 0 }],
      ['mia', 'token', NODE, 409, { off_secs: 0 }],
      ['mia', 'token', NODE, 200, { off_secs: 5 }],
    ]);
    expect(entries.every((e) => e.target === null)).to.equal(true);
  });

  it("the live page offers the button to a manual user, with the outlet's off time", async () => {
    const mine = await as(d, t.mia!).get('/app/live').set('Accept', 'text/html');
    expect(mine.status).to.equal(200);
    expect(mine.text).to.contain('id="power-cycle"').and.to.contain('data-off-secs="5"').and.to.contain('data-ask-portal="no"');
  });
});

describe('power-cycle endpoint: an HTTP outlet, and a node without one', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let bare: TestDaemon;
  let peer: HttpPeer;
  const peerOptions: HttpPeerOptions = {};
  let mia: string;

  before(async () => {
    peer = await startHttpOutlets(peerOptions);
    [d, bare] = await Promise.all([
      startTestDaemon({ config: { capture: { uri: 'none:' }, power: { uri: `shelly+http://127.0.0.1:${peer.port}/0?timeout=30&off_secs=0` } } }),
      startTestDaemon({ config: { capture: { uri: 'none:' } } }),
    ]);
    mia = (await tokens(d, { mia: 'manual' })).mia!;
  });
  after(async () => {
    await Promise.all([d?.stop(), bare?.stop(), peer?.stop()]);
  });

  it("cycles the outlet with the family's requests; no body: the URI's off_secs", async () => {
    const res = await as(d, mia).post(CYCLE);
    expect(res.status, res.text).to.equal(200);
    expect(res.body.off_secs).to.equal(0);
    expect(peer.requests).to.deep.equal(['GET /relay/0?turn=off', 'GET /relay/0', 'GET /relay/0?turn=on', 'GET /relay/0']);
    expect(peer.outlets.get(1)).to.equal(true);
  });

  it('a second cycle while the first is held at the outlet: 409; the first ends once the outlet switches', async () => {
    peer.requests.length = 0;
    peerOptions.stuck = [1]; // the relay ignores the switch: the first cycle reads the outlet until it goes off
    const first = as(d, mia).post(CYCLE).send({ off_secs: 0 }).then((r) => r);
    await waitFor(() => peer.requests.includes('GET /relay/0'), 'the first cycle to read the outlet back');
    const second = await as(d, mia).post(CYCLE).send({ off_secs: 0 });
    expectError(second, 409, 'conflict');
    expect(second.body.message).to.match(/being power-cycled already \(by mia, since /);
    peerOptions.stuck = [];
    peer.outlets.set(1, false);
    const done = await first;
    expect(done.status, done.text).to.equal(200);
    expect(peer.requests.filter((r) => r.includes('turn='))).to.deep.equal(['GET /relay/0?turn=off', 'GET /relay/0?turn=on']);
    expect(peer.outlets.get(1)).to.equal(true);
  });

  it('an outlet that stops answering: 503 device_unavailable naming it, and the next request is not held', async () => {
    await peer.stop();
    const res = await as(d, mia).post(CYCLE).send({ off_secs: 0 });
    expectError(res, 503, 'device_unavailable');
    expect(res.body.message).to.contain(`127.0.0.1:${peer.port}`);
    expectError(await as(d, mia).post(CYCLE).send({ off_secs: 0 }), 503, 'device_unavailable');
  });

  it('a node without an outlet: 404 naming power.uri, and no power service', async () => {
    expect(bare.daemon.services.power).to.equal(undefined);
    const token = (await new TokenStore(tokensFile(bare.dataDir)).create('mia')).token;
    const res = await as(bare, token).post(CYCLE).send({ off_secs: 0 });
    expectError(res, 404, 'not_found');
    expect(res.body.message).to.contain('has no power outlet').and.to.contain('power.uri');
    const page = await as(bare, token).get('/app/live').set('Accept', 'text/html');
    expect(page.status).to.equal(200);
    expect(page.text).to.contain('id="live"').and.not.to.contain('power-cycle');
  });
});
