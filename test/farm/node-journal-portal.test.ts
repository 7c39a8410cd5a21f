/**
 * The node's event journal with a real portal: the portal (its own process, a throwaway PostgreSQL) is
 * SIGKILLed; the node (`farmhand serve`, its own process) runs a job while it is away, is SIGKILLed in turn
 * and started again on the same data directory; then the portal comes back. Every event of that job,
 * published by the node's earlier run and never recorded by the portal, reaches the portal's outbox (what
 * GET /api/v2/events serves) once, in the node's order, after the events the portal had recorded.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import type pg from 'pg';
import { exitOf, killGroup, PROCESS_WAIT as WAIT, startProcessFarm, type ProcessFarm } from '../helpers/processFarm.js';
import { waitFor } from '../helpers/wait.js';
import { kill } from '../integration/crash-lib.js';
import { throughReplicas } from '../helpers/farm.js';

const NODE = 'farmhand-nj';

describe('farm: node events survive the node SIGKILLed while the portal is down', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): kills the one portal process (processFarm) while the node's events wait (replicas killed: replicas-rolling, the soak).
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(300_000);
  let farm: ProcessFarm;
  let db: pg.Pool;
  let dataDir: string;
  let nodeToken: string;
  const startPortalProcess = () => farm.startPortal();
  const nodeRow = () => farm.nodeRow();
  const outboxOf = (uid: string) => farm.outboxOf(uid);

  before(async function () {
    this.timeout(180_000);
    farm = await startProcessFarm(NODE, 'farm-node-journal-');
    ({ db, dataDir, nodeToken } = farm);
  });
  after(() => farm?.stop());

  it("every event of a job the portal never heard of reaches its outbox once, after the node's SIGKILL and restart", async () => {
    const portal = await startPortalProcess();
    const first = await farm.startNode();
    await waitFor(async () => (await nodeRow())?.online, { what: 'the node joined to the portal', ...WAIT });

    // An event the portal records: a reservation made on the node. Its cursor for the node is then of the node's first run.
    const resv = await fetch(`${first.url}/api/v2/reservations`, {
      method: 'POST',
      headers: { Authorization: `token ${nodeToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_ids: [NODE], message: 'journal' }),
    });
    expect(resv.status, await resv.clone().text()).to.equal(200);
    await waitFor(async () => (await db.query(`SELECT 1 FROM events_outbox WHERE node_id = $1 AND type = 'reservation.made'`, [NODE])).rowCount, {
      what: 'reservation.made in the outbox',
      ...WAIT,
    });
    const made = await db.query<{ node_event_id: string }>(`SELECT node_event_id FROM events_outbox WHERE node_id = $1 AND type = 'reservation.made'`, [NODE]);
    const boot = made.rows[0]!.node_event_id.split('-')[0]!; // the node's first run
    const cursor = async () => (await db.query<{ event_id: string }>('SELECT event_id FROM node_event_cursors WHERE node_id = $1', [NODE])).rows[0]?.event_id;
    await waitFor(cursor, { what: "the portal's cursor for the node", ...WAIT });

    killGroup(portal);
    await exitOf(portal);

    // The job, straight to the node: no portal to forward it or hear its events.
    const run = await fetch(`${first.url}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${nodeToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass', 'tests/basic.py::test_fail'], shuffle: false, tags: {} }),
    });
    const started = (await run.json()) as { job_uid: string };
    expect(run.status, JSON.stringify(started)).to.equal(200);
    const uid = started.job_uid;
    const jobFile = path.join(dataDir, 'jobs', `${uid.split('/').pop()}.json`);
    await waitFor(async () => (JSON.parse(await readFile(jobFile, 'utf8').catch(() => '{}')) as { status?: string }).status === 'exited', {
      what: 'the job saved exited on the node',
      ...WAIT,
    });
    await kill(first);

    await farm.startNode();
    expect(await outboxOf(uid), 'nothing of the job on the portal yet').to.deep.equal([]);
    expect(await cursor(), "the portal's cursor is of the node's first run").to.match(new RegExp(`^${boot}-`));
    await startPortalProcess();

    const events = await waitFor(async () => {
      const e = await outboxOf(uid);
      return e.some((x) => x.type === 'job.exited') ? e : undefined;
    }, { what: "the job's job.exited in the portal's outbox", ...WAIT });
    expect(events.map((e) => `${e.type} ${e.test_case ?? ''}`.trim())).to.deep.equal([
      'job.started',
      'run.started tests/basic.py::test_pass',
      'run.finished tests/basic.py::test_pass',
      'run.started tests/basic.py::test_fail',
      'run.finished tests/basic.py::test_fail',
      'job.exited',
    ]);
    // All of the node's first run, each id once.
    expect(events.every((e) => e.node_event_id.startsWith(`${boot}-`)), JSON.stringify(events)).to.equal(true);
    expect(new Set(events.map((e) => e.node_event_id)).size).to.equal(events.length);
    // The portal's account of the job, folded from those events: exited with its counts, not ended by the portal.
    const row = await waitFor(async () => {
      const r = (await db.query<{ state: string; end_reason: string | null; job: { result_counts: { total: number; pass: number; fail: number } } }>('SELECT state, end_reason, job FROM jobs WHERE job_uid = $1', [uid])).rows[0];
      return r?.state === 'exited' ? r : undefined;
    }, { what: 'the job exited in the jobs table', ...WAIT });
    expect(row.end_reason).to.equal(null);
    expect(row.job.result_counts).to.include({ pass: 1, fail: 1, total: 2 });
  });
});
