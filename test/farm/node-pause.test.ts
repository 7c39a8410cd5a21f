/**
 * The fault "Pause a node (SIGSTOP) past the heartbeat limit, then continue
 * it: the stale node does not overwrite anything", with real parts: a real
 * `farmhand serve` process joined to the real portal (startFarmPortal: uploads,
 * events, reservations) on a throwaway PostgreSQL, running a job through the
 * portal. The node's whole process group is stopped (its test run too), the
 * portal ends its job; meanwhile another user asks for the node; then the
 * node continues, with its old socket, its old snapshot and a job it still
 * thinks is running.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { testConfig } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { SseClient } from '../helpers/sse.js';
import { waitFor } from '../helpers/wait.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NODE = 'farmhand-pause';
const PASS = 'tests/basic.py::test_pass';
const GATE = 'tests/gate.py::test_gate';

describe('farm fault: a node paused (SIGSTOP) past the heartbeat limit, then continued', function () {
  this.timeout(240_000);
  let farm: TestFarm;
  let pack: TestPackRepo;
  let work: string;
  let logFile: string;
  let dataDir: string;
  let node: ChildProcess | undefined;
  let alice: string;
  let bob: string;

  const group = (signal: NodeJS.Signals) => {
    try {
      process.kill(-node!.pid!, signal);
    } catch {
      // already gone
    }
  };
  const call = (token: string, method: string, p: string, body?: unknown) =>
    fetch(`${farm.url}${p}`, {
      method,
      headers: { Authorization: `token ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  const log = () => readFileSync(logFile, 'utf8');
  const jobRow = async (uid: string) => (await farm.portal.jobs.get(uid))!;

  before(async function () {
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-pause-'));
    const flag = path.join(work, 'gate');
    pack = await makeTestPack({
      ...STANDARD_FILES,
      'tests/gate.py': ['import os, time', '', 'def test_gate():', `    while not os.path.exists(${JSON.stringify(flag)}):`, '        time.sleep(0.05)', ''].join('\n'),
    });
    farm = await startTestFarm({ portal: { heartbeat_secs: 1, flush_secs: 1 } });
    const credFile = path.join(work, 'credential');
    await writeFile(credFile, `${await registerNode(farm.db, NODE)}\n`, { mode: 0o600 });
    dataDir = path.join(work, 'data');
    const cfg = testConfig(pack.dir, dataDir, { node_id: NODE, portal: { url: farm.url, node_credential_file: credFile }, log_level: 'debug' });
    const configFile = path.join(work, 'farmhand.json');
    logFile = path.join(work, 'node.log');
    await writeFile(configFile, JSON.stringify(cfg));
    const fd = openSync(logFile, 'a');
    node = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'serve', '--config', configFile], { cwd: ROOT, detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    await waitFor(() => farm.portal.hub.link(NODE)?.online && farm.portal.hub.link(NODE)?.snapshot, { what: 'the node joined', timeoutMs: 90_000 }).catch((e: Error) => {
      throw new Error(`${e.message}\n${log().slice(-3000)}`);
    });
    alice = await farm.tokenFor('alice');
    bob = await farm.tokenFor('bob');
  });
  after(async () => {
    if (node) {
      group('SIGCONT');
      group('SIGKILL');
    }
    await farm?.stop();
    await pack?.cleanup();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it('the portal ends its job; on continuing, the node is told, stops it, and overwrites nothing', async () => {
    const sse = await SseClient.open(`${farm.url}/api/v2/events`, { Authorization: `token ${alice}` });
    let waiting: Promise<Response> | undefined;
    try {
      const r = await call(alice, 'POST', '/api/v2/run_tests', { node_id: NODE, test_pack_revision: 'main', test_cases: [PASS, GATE], shuffle: false, tags: {} });
      const { job_uid: jobUid } = (await r.json()) as { job_uid: string };
      expect(r.status).to.equal(200);
      await waitFor(async () => (await jobRow(jobUid))?.job.result_counts.pass === 1, { what: 'the first run recorded', timeoutMs: 90_000 });
      const run = await waitFor(
        async () => {
          const { rows } = await farm.db.query<{ current_run: { result_id: string; test_case: string } | null }>('SELECT current_run FROM jobs WHERE job_uid = $1', [jobUid]);
          return rows[0]?.current_run?.test_case === GATE ? rows[0].current_run : undefined;
        },
        { what: 'the gate run in flight', timeoutMs: 60_000 },
      );
      // The first run's result is uploaded before the pause, so whatever comes later is the stale node's.
      await waitFor(async () => (await farm.db.query('SELECT 1 FROM results WHERE job_uid = $1', [jobUid])).rowCount === 1, { what: 'the first result uploaded', timeoutMs: 60_000 });

      group('SIGSTOP');
      const reason = `no heartbeat for ${farm.portal.hub.offlineAfterMs / 1000} s`;
      await waitFor(() => farm.portal.hub.link(NODE)?.online === false, { what: 'the paused node offline', timeoutMs: 30_000 });
      expect(farm.portal.hub.link(NODE)!.offlineReason).to.equal(reason);
      await farm.portal.hub.idle();
      const ended = await jobRow(jobUid);
      expect(ended).to.deep.include({ state: 'exited', end_reason: reason });
      expect(ended.job.result_counts).to.deep.equal({ pass: 1, fail: 0, error: 1, total: 2 });
      const lost = await farm.portal.results.get(run.result_id);
      expect(lost).to.deep.include({ result: 'error', failure_reason: `node ${NODE} went offline: ${reason}` });
      // Meanwhile another user asks for the node (queued: it is offline now), to hold it once it is free.
      waiting = call(bob, 'POST', '/api/v2/reservations', { node_ids: [NODE], message: 'after the pause', wait_secs: 180 });

      const helloesBefore = (log().match(/connected to the portal"/g) ?? []).length;
      group('SIGCONT');
      await waitFor(() => (log().match(/connected to the portal"/g) ?? []).length > helloesBefore, { what: 'the node to reconnect', timeoutMs: 60_000 });
      // Told in the welcome (ended_jobs), the node stops the job.
      await waitFor(() => log().includes('the portal ended this job while the node was disconnected from it: stopping it'), { what: 'the node told its job ended', timeoutMs: 60_000 });
      await waitFor(
        async () => {
          const j = await call(alice, 'GET', `/api/v2/nodes/${NODE}/job`);
          return j.status === 200 && ((await j.json()) as { status: string }).status === 'exited';
        },
        { what: 'the job stopped on the node', timeoutMs: 60_000 },
      );
      // The node is free, so bob's queued reservation is answered.
      const held = await waiting;
      waiting = undefined;
      const heldBody = (await held.json()) as { reservations: Array<{ reservation_id: number; username: string }> };
      expect(held.status, JSON.stringify(heldBody)).to.equal(200);
      const reservationId = heldBody.reservations[0]!.reservation_id;

      // Everything the stale node had to say is in: its uploads delivered (the queue empty), its events relayed.
      await waitFor(
        async () => {
          const q = JSON.parse(await readFile(path.join(dataDir, 'farm-uploads.json'), 'utf8')) as { results: unknown[] };
          return q.results.length === 0;
        },
        { what: "the node's upload queue empty", timeoutMs: 120_000 },
      );
      await farm.portal.hub.idle();

      // The portal's job stays as the portal ended it.
      expect(await jobRow(jobUid)).to.deep.equal(ended);
      // The lost run's record stays the portal's; no result twice.
      expect(await farm.portal.results.get(run.result_id)).to.deep.equal(lost);
      const { rows } = await farm.db.query<{ n: string; ids: string }>('SELECT count(*) AS n, count(DISTINCT result_id) AS ids FROM results WHERE job_uid = $1', [jobUid]);
      expect(rows[0]).to.deep.equal({ n: '2', ids: '2' });
      // One end of the job and one end of the lost run in the outbox: the portal's, not the node's late ones.
      const { rows: events } = await farm.db.query<{ type: string; result: string | null; failure_reason: string | null }>(
        `SELECT type, data->>'result' AS result, data->>'failure_reason' AS failure_reason FROM events_outbox
          WHERE data->>'job_uid' = $1 AND (type = 'job.exited' OR (type = 'run.finished' AND data->>'result_id' = $2)) ORDER BY seq`,
        [jobUid, run.result_id],
      );
      expect(events).to.deep.equal([
        { type: 'run.finished', result: 'error', failure_reason: `node ${NODE} went offline: ${reason}` },
        { type: 'job.exited', result: null, failure_reason: null },
      ]);
      // The reservation made meanwhile is intact: bob holds the node, alice cannot run on it.
      const n = (await (await call(alice, 'GET', `/api/v2/nodes/${NODE}`)).json()) as { reservation: { reservation_id: number; username: string } | null; online: boolean };
      expect(n.online).to.equal(true);
      expect(n.reservation).to.include({ reservation_id: reservationId, username: 'bob' });
      const refused = await call(alice, 'POST', '/api/v2/run_tests', { node_id: NODE, test_pack_revision: 'main', test_cases: [PASS], shuffle: false, tags: {} });
      expect(refused.status).to.equal(403);
      expect((await call(bob, 'DELETE', `/api/v2/reservations/${reservationId}`)).status).to.equal(204);
      expect(sse.messages.filter((m) => m.event === 'job.exited' && (m.data.data as { job_uid?: string }).job_uid === jobUid)).to.have.length(1);
    } finally {
      sse.close();
      await waiting?.catch(() => undefined);
    }
  });
});
