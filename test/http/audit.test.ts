/**
 * The audit trail on a real node daemon (docs/auth.md, "Audit trail"): run, stop, reserve, interrupt, a
 * manual control session, and a token made with the CLI each leave an entry with who, from where, what and
 * on what; `GET /api/v2/audit` filters and pages them and refuses bad filters with a 400; the manual control
 * session's end (with its count of presses) is written when the daemon stops.
 */
import { expect } from 'chai';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { tokenCommand } from '../../src/cli/token.js';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { asUser } from '../helpers/auth.js';
import { runCaptured } from '../helpers/cli.js';
import { startTestDaemon, waitForJob, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';

const NODE = 'farmhand-test';
const FILES = { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF };
const LOOPBACK = /^(::ffff:)?127\.0\.0\.1$|^::1$/;

interface Entry {
  id: string;
  at: string;
  who: string;
  via: string;
  token_id: string | null;
  from: string | null;
  action: string;
  node: string | null;
  target: string | null;
  detail: Record<string, unknown>;
  outcome: number;
}

describe('audit trail on a node', function () {
  this.timeout(120_000);
  let d: TestDaemon;
  let alice: Awaited<ReturnType<typeof asUser>>;
  let bob: Awaited<ReturnType<typeof asUser>>;
  let jobUid: string;
  let reservationId: number;
  let cliTokenId: string;

  before(async () => {
    d = await startTestDaemon({ files: FILES, config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 } } });
    alice = await asUser(d, 'alice');
    bob = await asUser(d, 'bob');
    await waitOnline(d);

    const run = await alice.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] });
    expect(run.status, run.text).to.equal(200);
    jobUid = run.body.job_uid as string;
    expect((await alice.post(`/api/v2/jobs${jobUid}/stop`)).status).to.be.oneOf([200, 202]);
    await waitForJob(d, jobUid);
    for (const key of ['KEY_UP', 'KEY_OK']) expect((await alice.post(`/api/v2/nodes/${NODE}/press`).send({ key })).status).to.equal(204);
    const made = await alice.post('/api/v2/reservations').send({ node_ids: [NODE], duration_secs: 600, message: 'firmware 2.1' });
    expect(made.status, made.text).to.equal(200);
    reservationId = made.body.reservations[0].reservation_id as number;
    expect((await bob.post(`/api/v2/reservations/${reservationId}/interrupt`).send({ message: 'the rack is moving' })).status).to.equal(204);
    const cli = await runCaptured(tokenCommand, ['create', '--user', 'carol', '--data-dir', d.dataDir]);
    expect(cli.code, cli.err).to.equal(0);
    cliTokenId = /created token ([0-9a-f]{8})/.exec(cli.err)![1]!;
  });
  after(() => d?.stop());

  const audit = async (query = ''): Promise<{ entries: Entry[]; next_before: string | null }> => {
    const res = await alice.get(`/api/v2/audit${query}`);
    expect(res.status, res.text).to.equal(200);
    return res.body as { entries: Entry[]; next_before: string | null };
  };
  const one = (entries: Entry[], action: string): Entry => {
    const found = entries.filter((e) => e.action === action);
    expect(found, `${action} in ${JSON.stringify(entries.map((e) => e.action))}`).to.have.length(1);
    return found[0]!;
  };

  it('records run, stop, reserve, interrupt, the start of a manual control session and a CLI token, with who, from, what and target', async () => {
    const { entries } = await audit();
    const run = one(entries, 'job.run');
    expect(run).to.include({ who: 'alice', via: 'token', node: NODE, target: jobUid, outcome: 200 });
    expect(run.from).to.match(LOOPBACK);
    expect(run.token_id).to.match(/^[0-9a-f]{8}$/);
    expect(run.detail).to.include({ test_cases: 1, revision: 'main', api: 'v2' });
    expect(one(entries, 'job.stop')).to.include({ who: 'alice', node: NODE, target: jobUid });
    const reserve = one(entries, 'reservation.create');
    expect(reserve).to.include({ who: 'alice', node: NODE, target: String(reservationId), outcome: 200 });
    expect(reserve.detail).to.include({ duration_secs: 600, message: 'firmware 2.1' });
    const interrupt = one(entries, 'reservation.interrupt');
    expect(interrupt).to.include({ who: 'bob', node: NODE, target: String(reservationId), outcome: 204 });
    expect(interrupt.detail).to.deep.equal({ message: 'the rack is moving' });
    // Two presses: one session start, no entry per key (and no key name anywhere).
    const start = one(entries, 'remote.session_start');
    expect(start).to.include({ who: 'alice', node: NODE, outcome: 204 });
    expect(JSON.stringify(entries)).not.to.match(/KEY_UP|KEY_OK/);
    const cli = one(entries, 'token.create');
    expect(cli).to.include({ who: 'cli', via: 'cli', target: cliTokenId, from: null, outcome: 0 });
    expect(cli.detail).to.include({ user: 'carol' });
    // Newest first.
    const ids = entries.map((e) => e.id);
    expect(ids).to.deep.equal([...ids].sort().reverse());
  });

  it('filters by user, action (or family), node, since and until; pages with before', async () => {
    expect((await audit('?user=bob')).entries.map((e) => e.action)).to.deep.equal(['reservation.interrupt']);
    expect((await audit('?action=reservation')).entries.map((e) => e.action)).to.deep.equal(['reservation.interrupt', 'reservation.create']);
    expect((await audit('?action=job.stop')).entries).to.have.length(1);
    expect((await audit('?node=another-node')).entries).to.deep.equal([]);
    expect((await audit(`?node=${NODE}&user=alice`)).entries.map((e) => e.action).sort()).to.deep.equal(['job.run', 'job.stop', 'remote.session_start', 'reservation.create']);
    expect((await audit('?since=2999-01-01')).entries).to.deep.equal([]);
    expect((await audit('?until=2000-01-01T00:00:00Z')).entries).to.deep.equal([]);
    const all = (await audit()).entries;
    const seen: string[] = [];
    let before: string | null = null;
    do {
      const page: { entries: Entry[]; next_before: string | null } = await audit(`?limit=2${before ? `&before=${before}` : ''}`);
      expect(page.entries.length).to.be.at.most(2);
      seen.push(...page.entries.map((e) => e.id));
      before = page.next_before;
    } while (before);
    expect(seen).to.deep.equal(all.map((e) => e.id));
  });

  it('refuses bad filters with 400 invalid_filter, and callers without a token with 403', async () => {
    for (const q of ['?limit=0', '?limit=1001', '?limit=x', '?action=job.explode', '?since=yesterday', '?since=2026-02-01&until=2026-01-01', '?before=12', '?colour=red', '?user=a&user=b']) {
      expectError(await alice.get(`/api/v2/audit${q}`), 400, 'invalid_filter', q);
    }
    const { client } = await import('../helpers/contract.js');
    expectError(await client(d.url).get('/api/v2/audit'), 403, 'forbidden');
  });

  it('the page /app/audit shows the entries to a signed-in user and sends a browser without one to sign in', async () => {
    const page = await alice.get('/app/audit?action=job').set('Accept', 'text/html');
    expect(page.status).to.equal(200);
    expect(page.text).to.include('data-action="job.run"').and.include(jobUid).and.not.include('data-action="reservation');
    const bad = await alice.get('/app/audit?since=never').set('Accept', 'text/html');
    expect(bad.status).to.equal(400);
    expect(bad.text).to.include('since must be');
    const { client } = await import('../helpers/contract.js');
    const anon = await client(d.url).get('/app/audit').set('Accept', 'text/html');
    expect(anon.status).to.equal(303);
    expect(anon.headers.location).to.equal('/app/sign-in?next=%2Fapp%2Faudit');
  });

  it("a refused request of a known caller is recorded with its status; the portal's address header is not believed from anyone else; no-credential refusals are not recorded", async () => {
    const { client } = await import('../helpers/contract.js');
    const res = await alice.post(`/api/v2/reservations/${reservationId}/extend`).set('X-Farmhand-Client-Address', '10.9.9.9').send({ duration_secs: 60 });
    expect(res.status).to.be.within(400, 499);
    const [extend] = (await audit('?action=reservation.extend')).entries;
    expect(extend).to.include({ who: 'alice', target: String(reservationId), outcome: res.status });
    expect(extend!.from).to.match(LOOPBACK);
    expect((await client(d.url).post('/api/v2/run_tests').send({ node_id: NODE, test_cases: ['x'] })).status).to.equal(403);
    expect((await audit('?user=anonymous')).entries).to.deep.equal([]);
  });

  it('the manual control session ends with its count of presses when the daemon stops (last: it stops the daemon)', async () => {
    await d.daemon.stop();
    const dir = path.join(d.dataDir, 'audit');
    const lines = (await Promise.all((await readdir(dir)).map((f) => readFile(path.join(dir, f), 'utf8')))).join('').split('\n').filter(Boolean);
    const ends = lines.map((l) => JSON.parse(l) as Entry).filter((e) => e.action === 'remote.session_end');
    expect(ends).to.have.length(1);
    expect(ends[0]).to.include({ who: 'alice', node: NODE });
    expect(ends[0]!.detail).to.include({ presses: 2, refused: 0 });
  });
});
