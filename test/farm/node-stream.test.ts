/**
 * The node stream (docs/farm.md, "The node stream") on a real farm portal (startFarmPortal, a throwaway
 * PostgreSQL): a node speaking the real protocol has its events folded and acknowledged, and sending them all
 * again after a lost acknowledgement doubles nothing; a real node whose test pack cannot be checked out has the
 * runs it recorded reach the portal through its stream.
 */
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import type { FarmEvent } from '../../src/core/events.js';
import type { ResultRecord } from '../../src/core/model.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { SimNode } from '../helpers/farmNodes.js';
import { waitFor } from '../helpers/wait.js';

const WAIT = { timeoutMs: 60_000 };

/** A job of `runs` runs as a node's stream: job.started, run.started and run.finished (with its record) each, job.exited. */
function jobStream(nodeId: string, boot: string, runs: number, job = 1, first = 1): { event: FarmEvent; record?: ResultRecord }[] {
  const uid = `/${nodeId}/beef/${job}`;
  const at = (s: number) => new Date(Date.UTC(2026, 10, 26, 9, 0, s)).toISOString();
  const stamp = (s: number) => `2026-11-26_09.00.${String(s).padStart(2, '0')}`;
  let n = first - 1;
  const ev = (type: FarmEvent['type'], data: Record<string, unknown>, time: string) =>
    ({ id: `${boot}-${++n}`, type, time, data: { node_id: nodeId, ...data } }) as unknown as FarmEvent;
  const out: { event: FarmEvent; record?: ResultRecord }[] = [
    { event: ev('job.started', { job_uid: uid, username: 'erin', start_time: at(0), test_cases: [], test_pack_sha: 'a'.repeat(40), test_pack_branch: null, category: 'c', soak: null, remote_control: null, tags: {} }, at(0)) },
  ];
  for (let i = 1; i <= runs; i++) {
    const id = `${uid}/${stamp(i)}`;
    const record: ResultRecord = {
      result_id: id, job_uid: uid, test_case: `tests/a.py::test_${i}`, test_pack_sha: 'a'.repeat(40), test_pack_branch: null, category: 'c',
      username: 'erin', tags: {}, start_time: at(i), end_time: at(i), duration: 0, result: 'pass', failure_reason: null, traceback: null,
    };
    out.push({ event: ev('run.started', { job_uid: uid, result_id: id, test_case: record.test_case, start_time: at(i) }, at(i)) });
    const { job_uid, result_id, test_case, result, failure_reason, start_time, end_time, duration } = record;
    out.push({ event: ev('run.finished', { job_uid, result_id, test_case, result, failure_reason, infrastructure_error: null, start_time, end_time, duration }, at(i)), record });
  }
  out.push({ event: ev('job.exited', { job_uid: uid, end_time: at(runs + 1), result_counts: { pass: runs, fail: 0, error: 0, total: runs } }, at(runs + 1)) });
  return out;
}

describe('farm: the node stream', function () {
  this.timeout(180_000);
  let farm: TestFarm;
  const sims: SimNode[] = [];

  before(async () => {
    farm = await startTestFarm();
  });
  after(async () => {
    for (const s of sims) s.kill();
    await farm?.stop();
  });

  it('folds a node stream and acknowledges it; every event sent again after a lost ack is folded as nothing (no double in jobs, results, outbox)', async () => {
    const nodeId = 'sim-stream';
    const credential = await registerNode(farm.db, nodeId);
    const connect = async () => {
      const n = new SimNode({ portalUrl: farm.url, nodeId, credential, availability: { kind: 'available', detail: '' } });
      sims.push(n);
      await n.connect();
      await waitFor(() => n.welcome, { what: 'the welcome', ...WAIT });
      return n;
    };
    const stream = jobStream(nodeId, 'kb1', 5);
    const last = stream.at(-1)!.event.id;
    const uid = `/${nodeId}/beef/1`;
    const state = async () => ({
      job: (await farm.db.query('SELECT state, job FROM jobs WHERE job_uid = $1', [uid])).rows[0] as { state: string; job: { runs_finished: number; result_counts: unknown } } | undefined,
      results: (await farm.db.query('SELECT result_id FROM results WHERE job_uid = $1 ORDER BY result_id', [uid])).rows.map((r: { result_id: string }) => r.result_id),
      outbox: (await farm.db.query(`SELECT node_event_id FROM events_outbox WHERE node_id = $1 AND type NOT LIKE 'node.%' ORDER BY seq`, [nodeId])).rows.map((r: { node_event_id: string | null }) => r.node_event_id),
    });
    const acked = (n: SimNode, id: string) => n.received.some((m) => (m as { t: string; last_event_id?: string }).t === 'ack' && (m as { last_event_id?: string }).last_event_id === id);

    const first = await connect();
    expect(first.welcome!.last_event_id).to.equal(null);
    for (const s of stream) first.send({ t: 'event', event: s.event, ...(s.record && { record: s.record }) });
    await waitFor(() => acked(first, last), { what: 'the ack of the last event', ...WAIT });
    // Acknowledged means committed: everything is there the moment the ack arrives.
    const folded = await state();
    expect(folded.job!.state).to.equal('exited');
    expect(folded.job!.job).to.deep.include({ runs_finished: 5, result_counts: { pass: 5, fail: 0, error: 0, total: 5 } });
    expect(folded.results).to.have.length(5);
    expect(folded.outbox).to.deep.equal(stream.map((s) => s.event.id));

    // The portal's ack is lost (the connection dies before the node reads it): the node comes back and, at worst,
    // sends its whole stream again. The welcome names the last event folded; what is sent again changes nothing.
    first.kill();
    const second = await connect();
    expect(second.welcome!.last_event_id).to.equal(last);
    for (const s of stream) second.send({ t: 'event', event: s.event, ...(s.record && { record: s.record }) });
    await waitFor(() => acked(second, last), { what: 'the ack of the events sent again', ...WAIT });
    expect(await state()).to.deep.equal(folded);
  });

  it("a hostile node: a record in its stream naming another node's result is refused, and an event the fold cannot take does not stall the stream", async () => {
    const nodeId = 'sim-hostile';
    const credential = await registerNode(farm.db, nodeId);
    const n = new SimNode({ portalUrl: farm.url, nodeId, credential, availability: { kind: 'available', detail: '' } });
    sims.push(n);
    await n.connect();
    await waitFor(() => n.welcome, { what: 'the welcome', ...WAIT });
    const stream = jobStream(nodeId, 'kb3', 2);
    // Its first run's record claims another node's result (the event itself is the node's own run).
    const victim = '/other-node/beef/1/2026-11-26_09.00.01';
    stream[2]!.record = { ...stream[2]!.record!, result_id: victim, job_uid: '/other-node/beef/1' };
    // And an event the database refuses (a start time that is no time), between two good ones.
    const bad = { id: 'kb3-100', type: 'job.started', time: 'x', data: { node_id: nodeId, job_uid: `/${nodeId}/dead/9`, username: 'erin', start_time: 'no time at all', tags: {} } } as unknown as FarmEvent;
    const after = jobStream(nodeId, 'kb3', 1, 2, 101);
    for (const s of [...stream, { event: bad }, ...after]) n.send({ t: 'event', event: s.event, ...('record' in s && s.record && { record: s.record }) });
    const last = after.at(-1)!.event.id;
    await waitFor(() => n.received.some((m) => m.t === 'ack' && m.last_event_id === last), { what: 'the ack of the last event', ...WAIT });
    expect((await farm.db.query('SELECT 1 FROM results WHERE result_id = $1 OR node_id = $2', [victim, 'other-node'])).rowCount, "no row of another node's").to.equal(0);
    // Its other run is there; the job is folded; the refused record's run counts as a run without a result.
    const results = (await farm.db.query<{ result_id: string }>('SELECT result_id FROM results WHERE node_id = $1 ORDER BY result_id', [nodeId])).rows.map((r) => r.result_id);
    expect(results).to.deep.equal([stream[4]!.record!.result_id, after[2]!.record!.result_id]);
    expect((await farm.db.query('SELECT 1 FROM jobs WHERE job_uid = $1', [`/${nodeId}/dead/9`])).rowCount, 'the bad event left nothing').to.equal(0);
    expect(farm.portal.fold.stats.recordsRefused).to.be.greaterThan(0);
    expect(await farm.portal.fold.cursor(nodeId)).to.equal(last);
  });

  it("a run recorded after a failed test-pack checkout reaches the portal through the node's stream, and is in its index when the job answers exited", async () => {
    const d = await farm.addNode('checkout-node');
    // The checkout cache's folder replaced by a file: no working tree can be made.
    const checkouts = path.join(d.dataDir, 'checkouts');
    await rm(checkouts, { recursive: true, force: true });
    await writeFile(checkouts, 'not a folder');
    const token = await farm.tokenFor('erin');
    const res = await farm.http
      .post('/api/v2/run_tests')
      .set('Authorization', `token ${token}`)
      .send({ node_id: 'checkout-node', test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass', 'tests/basic.py::test_fail'], shuffle: false, tags: {} });
    expect(res.status, res.text).to.equal(200);
    const uid = res.body.job_uid as string;
    let done = await farm.http.get(`/api/v2/jobs${uid}/await_completion`).set('Authorization', `token ${token}`);
    while (done.status === 202) done = await farm.http.get(`/api/v2/jobs${uid}/await_completion`).set('Authorization', `token ${token}`);
    expect(done.status, done.text).to.equal(200);
    expect(done.body.status).to.equal('exited');
    // No wait: the Job answered exited, so its runs are in the portal's index.
    const list = await farm.http.get('/api/v2/results').query({ filter: `job:${uid}` }).set('Authorization', `token ${token}`);
    expect(list.status, list.text).to.equal(200);
    expect((list.body as { test_case: string; result: string }[]).map((r) => [r.test_case, r.result]).sort()).to.deep.equal([
      ['tests/basic.py::test_fail', 'error'],
      ['tests/basic.py::test_pass', 'error'],
    ]);
    const row = (await farm.db.query<{ job: { runs_finished: number } }>('SELECT job FROM jobs WHERE job_uid = $1', [uid])).rows[0]!;
    expect(row.job.runs_finished).to.equal(2);
    const kinds = (await farm.db.query<{ k: string }>('SELECT infrastructure_error AS k FROM results WHERE job_uid = $1', [uid])).rows.map((r) => r.k);
    expect(kinds).to.deep.equal(['checkout_failed', 'checkout_failed']);
  });
});
