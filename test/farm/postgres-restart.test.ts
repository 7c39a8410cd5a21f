/**
 * The fault "Restart PostgreSQL: nothing lost, the portal recovers", with
 * real parts: a throwaway cluster restarted under a running portal
 * (startFarmPortal, in-process) and two real `farmhand serve` nodes joined to
 * it, while a job runs through the portal. Once with `pg_ctl restart -m fast`,
 * once with the database down for a while (stopped, things done, started).
 *
 * The job's runs wait on gate files the test creates, so each part of the job
 * happens on either side of an outage by construction, not by timing.
 */
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { waitForJob } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm, throughReplicas } from '../helpers/farm.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { SseClient } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';

const A = 'pg-node-a';
const B = 'pg-node-b';
const PASS = 'tests/basic.py::test_pass';
const GATE1 = 'tests/gate.py::test_gate_one';
const GATE2 = 'tests/gate.py::test_gate_two';
/** A client's bound on one request: an answer (any answer) must come before it. */
const CLIENT_BOUND_MS = 10_000;

describe('farm fault: PostgreSQL restarted under the portal', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): PostgreSQL away past a lease: a replica then stops and exits by design (docs/farm.md, "Leases"), not restarted in-process.
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(240_000);
  let cluster: TestPostgres;
  let farm: TestFarm;
  let pack: TestPackRepo;
  let gates: string;
  let alice: string;
  let bob: string;

  const call = (token: string, method: string, p: string, body?: unknown) =>
    fetch(`${farm.url}${p}`, {
      method,
      headers: { Authorization: `token ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(CLIENT_BOUND_MS),
    });
  const json = async (r: Response) => ({ status: r.status, type: r.headers.get('content-type') ?? '', body: (await r.json()) as Record<string, unknown> });
  const currentRun = async (jobUid: string) =>
    (await farm.db.query<{ current_run: { test_case: string } | null }>('SELECT current_run FROM jobs WHERE job_uid = $1', [jobUid])).rows[0]?.current_run?.test_case;
  const listening = async (channel: string) =>
    Number((await farm.db.query<{ n: string }>(`SELECT count(*) AS n FROM pg_stat_activity WHERE query = $1`, [`LISTEN ${channel}`])).rows[0]!.n);

  before(async function () {
    gates = await mkdtemp(path.join(os.tmpdir(), 'farm-pg-gates-'));
    const gate = (name: string) => [`def test_gate_${name}():`, `    while not os.path.exists(${JSON.stringify(path.join(gates, name))}):`, '        time.sleep(0.05)', ''];
    pack = await makeTestPack({ ...STANDARD_FILES, 'tests/gate.py': ['import os, time', '', ...gate('one'), ...gate('two')].join('\n') });
    cluster = await startPostgres();
    // flush_secs 1: the batched flush runs (and fails) several times during the outage. heartbeat_secs 2: the
    // portal, both nodes and the test share one event loop here; a loaded machine must not stall it past the limit.
    farm = await startTestFarm({ cluster, portal: { heartbeat_secs: 2, flush_secs: 1 } });
    for (const id of [A, B]) await farm.addNode(id, { pack });
    alice = await farm.tokenFor('alice');
    bob = await farm.tokenFor('bob');
  });
  after(async () => {
    await farm?.stop();
    await cluster?.stop();
    await pack?.cleanup();
    if (gates) await rm(gates, { recursive: true, force: true });
  });

  it('a restart and an outage mid-job: the portal answers 503 meanwhile, recovers, and loses nothing', async () => {
    const sse = await SseClient.open(`${farm.url}/api/v2/events`, { Authorization: `token ${alice}` });
    expect(sse.res.statusCode).to.equal(200);
    try {
      const run = await json(await call(alice, 'POST', '/api/v2/run_tests', { node_id: A, test_pack_revision: 'main', test_cases: [PASS, GATE1, GATE2, PASS], shuffle: false, tags: {} }));
      expect(run.status, JSON.stringify(run.body)).to.equal(200);
      const jobUid = run.body.job_uid as string;
      await waitFor(async () => (await currentRun(jobUid)) === GATE1, { what: 'the first gate run in flight', timeoutMs: 60_000 });
      const before = await sse.next((m) => m.event === 'run.started' && (m.data.data as { test_case?: string }).test_case === GATE1, 'run.started of gate one');

      // ---- 1. pg_ctl restart -m fast: every connection is cut, the server is back at once.
      const listenerReconnects = farm.portal.events.listener.reconnects;
      const wakeupReconnects = farm.portal.wakeups.reconnects;
      await cluster.restart('fast');
      await waitFor(async () => (await call(alice, 'GET', '/api/v2/nodes')).status === 200, { what: 'the portal answering v2 again', timeoutMs: 30_000 });
      const who = await json(await call(alice, 'GET', '/api/v2/user'));
      expect(who.body).to.include({ login: 'alice' });
      expect((await call('fh_00000000_' + 'x'.repeat(43), 'GET', '/api/v2/user')).status).to.equal(403);
      const held = await json(await call(bob, 'POST', '/api/v2/reservations', { node_ids: [B], message: 'after the restart' }));
      expect(held.status, JSON.stringify(held.body)).to.equal(200);
      const heldId = (held.body.reservations as Array<{ reservation_id: number }>)[0]!.reservation_id;
      expect((await call(bob, 'DELETE', `/api/v2/reservations/${heldId}`)).status).to.equal(204);
      // The LISTEN parts are back: the outbox listener reconnected, both channels are listened on again.
      await waitFor(() => farm.portal.events.listener.reconnects > listenerReconnects, { what: 'the outbox listener to reconnect', timeoutMs: 30_000 });
      await waitFor(async () => (await listening('farm_tokens')) === 1 && (await listening('farm_events')) === 1, { what: 'LISTEN on both channels again', timeoutMs: 30_000 });
      // The wake-up channel of many portals (src/farm/wakeups.ts) too, and it hears a notification sent after the restart.
      await waitFor(async () => farm.portal.wakeups.reconnects > wakeupReconnects && (await listening('farmhand')) === 1, { what: 'LISTEN farmhand again', timeoutMs: 30_000 });
      const heard = farm.portal.wakeups.received;
      await farm.db.query(`SELECT pg_notify('farmhand', '{"kind": "result_stored", "job_uids": []}')`);
      await waitFor(() => farm.portal.wakeups.received > heard, { what: 'a wake-up heard after the restart', timeoutMs: 20_000 });
      // A token made after the restart is accepted (tokenFor waits for it), one revoked is refused.
      const carol = await farm.tokenFor('carol');
      await farm.db.query(`UPDATE tokens SET revoked_at = now() WHERE token_id = $1`, [carol.split('_')[1]]);
      await waitFor(async () => (await call(carol, 'GET', '/api/v2/user')).status === 403, { what: 'the revoked token refused (a NOTIFY after the restart)', timeoutMs: 20_000 });
      // The job goes on, and the portal records it.
      await writeFile(path.join(gates, 'one'), '');
      await waitFor(async () => (await currentRun(jobUid)) === GATE2, { what: 'the second gate run in flight, recorded after the restart', timeoutMs: 60_000 });

      // ---- 2. Down for a while: stopped, things happen, started again.
      await cluster.stopServer('fast');
      const downAt = Date.now();
      try {
        // Requests that need the database: a clear 503 JSON, within the client's bound.
        for (const [method, p, body] of [
          ['GET', '/api/v2/results', undefined],
          ['POST', '/api/v2/reservations', { node_ids: [B], message: 'during the outage' }],
          ['GET', '/api/v2/nodes', undefined],
        ] as const) {
          const r = await json(await call(alice, method, p, body));
          expect(r, `${method} ${p}`).to.deep.include({ status: 503 });
          expect(r.type).to.match(/^application\/json/);
          expect(r.body.error, `${method} ${p}: ${JSON.stringify(r.body)}`).to.equal('database_unavailable');
          expect(r.body.message).to.match(/database/);
        }
        // What needs no database still answers: the token check (from memory) and the nodes themselves.
        expect((await call(alice, 'GET', '/api/v2/user')).status).to.equal(200);
        expect((await call(alice, 'GET', `/api/v2/nodes/${B}/screenshot.png`)).status).to.equal(200);
        expect(await json(await call(alice, 'GET', `/api/v2/jobs${jobUid}`))).to.deep.include({ status: 200 });
        // The job finishes while the database is down: its last runs, their uploads, its end.
        await writeFile(path.join(gates, 'two'), '');
        await waitForJob(farm.nodes.get(A)!, jobUid);
        // Heartbeats go on past the offline limit while every flush fails: no node is marked offline for that.
        const limit = farm.portal.hub.offlineAfterMs;
        await waitFor(() => [A, B].every((id) => (farm.portal.hub.link(id)?.lastSeen?.getTime() ?? 0) > downAt + limit + 1000), {
          what: 'heartbeats past the offline limit during the outage',
          timeoutMs: 60_000,
        }).catch((e: Error) => {
          throw new Error(`${e.message}; down at ${new Date(downAt).toISOString()}, links: ${JSON.stringify(farm.portal.hub.links().map(({ snapshot: _s, ...l }) => l))}`);
        });
        await farm.portal.hub.flush();
        for (const id of [A, B]) expect(farm.portal.hub.link(id), id).to.deep.include({ online: true, offlineReason: null });
      } finally {
        await cluster.startServer();
      }
      const upAt = new Date();

      // ---- after: nothing lost.
      await waitFor(async () => (await call(alice, 'GET', '/api/v2/nodes')).status === 200, { what: 'the portal answering v2 again', timeoutMs: 30_000 });
      const job = await waitFor(
        async () => {
          const r = await json(await call(alice, 'GET', `/api/v2/jobs${jobUid}`));
          return r.status === 200 && r.body.status === 'exited' ? r.body : undefined;
        },
        { what: 'the portal to have the job exited', timeoutMs: 60_000 },
      );
      expect(job.result_counts).to.deep.equal({ pass: 4, fail: 0, error: 0, total: 4 });
      // The Job above is the node's own answer (forwarded); the portal's row follows when the hub's retry of the
      // node's job.exited (back-off up to 5 s while the database was away) lands.
      const row = await waitFor(async () => {
        const r = await farm.portal.jobs.get(jobUid);
        return r?.state === 'exited' ? r : undefined;
      }, { what: 'the portal`s jobs row exited (the node`s job.exited recorded after the outage)', timeoutMs: 60_000 });
      expect(row).to.deep.include({ state: 'exited', end_reason: null });
      // Every result reached the farm index, each exactly once (the node's uploader retried).
      const results = await waitFor(
        async () => {
          const r = await call(alice, 'GET', `/api/v2/results?filter=${encodeURIComponent(`job:${jobUid}`)}`);
          const list = r.status === 200 ? ((await r.json()) as Array<{ result_id: string; test_case: string; result: string }>) : [];
          return list.length >= 4 ? list : undefined;
        },
        { what: 'the four results in the farm index', timeoutMs: 120_000 },
      );
      expect(results.map((r) => r.test_case).sort()).to.deep.equal([GATE1, GATE2, PASS, PASS].sort());
      expect(results.every((r) => r.result === 'pass')).to.equal(true);
      const { rows: counted } = await farm.db.query<{ n: string; ids: string }>('SELECT count(*) AS n, count(DISTINCT result_id) AS ids FROM results WHERE job_uid = $1', [jobUid]);
      expect(counted[0]).to.deep.equal({ n: '4', ids: '4' });
      // Heartbeats were flushed after the restart; both nodes online in the table.
      await waitFor(
        async () => {
          const { rows } = await farm.db.query<{ node_id: string; online: boolean; last_seen: Date }>('SELECT node_id, online, last_seen FROM nodes WHERE node_id = ANY($1)', [[A, B]]);
          return rows.length === 2 && rows.every((r) => r.online && r.last_seen > upAt);
        },
        { what: "the nodes' last_seen flushed after the restart", timeoutMs: 30_000 },
      );
      const { rows: offlines } = await farm.db.query<{ n: string }>(`SELECT count(*) AS n FROM events_outbox WHERE type = 'node.offline'`);
      expect(offlines[0]!.n, 'node.offline events').to.equal('0');

      // Events: every one of the job's, in the outbox once, and delivered live once on the stream that stayed open.
      const mine = (types: string[]) => (m: { event: string; data: Record<string, unknown> }) =>
        types.includes(m.event) && (m.data.data as { job_uid?: string }).job_uid === jobUid;
      const jobEvents = ['run.started', 'run.finished', 'job.exited'];
      // The outbox writer retries on its own (its back-off, or the pool's next connection), apart from the hub's
      // retry that wrote the jobs row above: wait for the job's last event to be written, then compare the list.
      const outbox = await waitFor(
        async () => {
          const { rows } = await farm.db.query<{ seq: string; type: string }>(`SELECT seq, type FROM events_outbox WHERE data->>'job_uid' = $1 ORDER BY seq`, [jobUid]);
          return rows.some((r) => r.type === 'job.exited') ? rows : undefined;
        },
        { what: "the job's job.exited written to the outbox (the event log's retry after the outage)", timeoutMs: 60_000 },
      );
      const expected = ['job.started', ...Array(4).fill(['run.started', 'run.finished']).flat(), 'job.exited'];
      expect(outbox.map((r) => r.type)).to.deep.equal(expected);
      await waitFor(() => sse.messages.filter(mine(['job.exited'])).length === 1, { what: 'job.exited on the open stream', timeoutMs: 60_000 });
      expect(sse.messages.filter(mine(jobEvents)).map((m) => m.id)).to.deep.equal(outbox.filter((r) => r.type !== 'job.started').map((r) => r.seq));
      // A client that resumes from before the restart (Last-Event-ID) gets exactly the rest.
      const resumed = await SseClient.open(`${farm.url}/api/v2/events`, { Authorization: `token ${alice}`, 'Last-Event-ID': before.id! });
      try {
        expect(resumed.res.statusCode).to.equal(200);
        await waitFor(() => resumed.messages.filter(mine(['job.exited'])).length === 1, { what: 'job.exited on the resumed stream', timeoutMs: 30_000 });
        const after = outbox.filter((r) => Number(r.seq) > Number(before.id)).map((r) => r.seq);
        expect(resumed.messages.filter(mine(jobEvents)).map((m) => m.id)).to.deep.equal(after);
      } finally {
        resumed.close();
      }
    } finally {
      sse.close();
    }
  });
});
