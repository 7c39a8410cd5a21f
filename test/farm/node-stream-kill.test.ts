/**
 * The node stream (docs/farm.md, "The node stream") with real processes: a portal (its own process, a throwaway
 * PostgreSQL) and a node (`farmhand serve`). The portal is SIGKILLed mid-job, after it folded the job's first run;
 * the node goes on, and is SIGKILLed in turn in the middle of a run, then started again on the same data directory
 * (its recovery ends the job); then the portal comes back. Every event of the job is in the portal's tables once,
 * in the node's order, and the job's results are in the index in the very transaction that closes the job.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import type pg from 'pg';
import { exitOf, killGroup, PROCESS_WAIT as WAIT, startProcessFarm, type ProcessFarm } from '../helpers/processFarm.js';
import { waitFor } from '../helpers/wait.js';
import { kill } from '../integration/crash-lib.js';
import { throughReplicas } from '../helpers/farm.js';

const NODE = 'farmhand-ns';

describe('farm: the node stream survives the portal and the node SIGKILLed mid-stream', function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): kills the one portal process (processFarm) mid-stream (replicas killed: replicas-rolling, the soak).
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

  /** The node's journal's events of a job (`<data_dir>/events/*.jsonl`), in its order. */
  const journalOf = async (uid: string) => {
    const out: { id: string; type: string; test_case?: string }[] = [];
    const files = (await readdir(path.join(dataDir, 'events')).catch(() => [] as string[])).filter((f) => f.endsWith('.jsonl')).sort();
    for (const f of files) {
      for (const line of (await readFile(path.join(dataDir, 'events', f), 'utf8')).split('\n')) {
        let e: { id: string; type: string; data: { job_uid?: string; test_case?: string } } | undefined;
        try {
          e = JSON.parse(line) as typeof e;
        } catch {
          continue; // the line being written
        }
        if (e?.data.job_uid === uid) out.push({ id: e.id, type: e.type, ...(e.data.test_case !== undefined && { test_case: e.data.test_case }) });
      }
    }
    return out;
  };

  before(async function () {
    this.timeout(180_000);
    farm = await startProcessFarm(NODE, 'farm-node-stream-');
    ({ db, dataDir, nodeToken } = farm);
    // What the index holds at the instant a job is closed: in the closing transaction (an AFTER trigger sees its writes).
    await db.query(`CREATE TABLE closed_with (job_uid text, results int)`);
    await db.query(`CREATE FUNCTION note_closed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        INSERT INTO closed_with SELECT NEW.job_uid, (SELECT count(*) FROM results WHERE job_uid = NEW.job_uid); RETURN NEW; END $$`);
    await db.query(`CREATE TRIGGER note_closed AFTER UPDATE OF state ON jobs FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state = 'exited') EXECUTE FUNCTION note_closed()`);
  });
  after(() => farm?.stop());

  it("every event of a job once in the portal's tables, in the node's order; its results in the index when it closes", async () => {
    let portal = await startPortalProcess();
    const first = await farm.startNode();
    await waitFor(async () => (await nodeRow())?.online, { what: 'the node joined to the portal', ...WAIT });

    const run = await fetch(`${first.url}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${nodeToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({
        node_id: NODE,
        test_pack_revision: 'main',
        test_cases: ['tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/basic.py::test_pass', 'tests/hang.py::test_hang'],
        shuffle: false,
        tags: {},
      }),
    });
    const started = (await run.json()) as { job_uid: string };
    expect(run.status, JSON.stringify(started)).to.equal(200);
    const uid = started.job_uid;
    const resultsOf = async () => (await db.query<{ result_id: string; result: string }>('SELECT result_id, result FROM results WHERE job_uid = $1 ORDER BY start_time', [uid])).rows;

    // The portal folds the first run, then dies mid-stream.
    await waitFor(async () => (await resultsOf()).length >= 1, { what: "the job's first result folded on the portal", ...WAIT });
    killGroup(portal);
    await exitOf(portal);
    // The node goes on without it, and dies in the middle of the hanging run.
    await waitFor(async () => (await journalOf(uid)).some((e) => e.type === 'run.started' && e.test_case === 'tests/hang.py::test_hang'), {
      what: "the hanging run's run.started in the node's journal",
      ...WAIT,
    });
    await kill(first);
    // Restarted on the same data directory: its recovery records the run in flight and ends the job; then the portal comes back.
    await farm.startNode();
    portal = await startPortalProcess();

    const outbox = await waitFor(async () => {
      const e = await outboxOf(uid);
      return e.some((x) => x.type === 'job.exited') ? e : undefined;
    }, { what: "the job's job.exited in the portal's outbox", ...WAIT });
    // The node's own account: its journal's events of the job, in its order.
    const mine = await journalOf(uid);
    expect(mine.map((e) => e.type)).to.deep.equal(['job.started', 'run.started', 'run.finished', 'run.started', 'run.finished', 'run.started', 'run.finished', 'run.started', 'run.finished', 'job.exited']);
    // Not one lost, not one doubled, in the node's order.
    expect(outbox.map((e) => e.node_event_id)).to.deep.equal(mine.map((e) => e.id));
    const results = await resultsOf();
    expect(results.map((r) => r.result)).to.deep.equal(['pass', 'fail', 'pass', 'error']);
    const row = (await db.query<{ state: string; end_reason: string | null; job: { runs_finished: number; result_counts: Record<string, number> } }>('SELECT state, end_reason, job FROM jobs WHERE job_uid = $1', [uid])).rows[0]!;
    expect(row).to.deep.include({ state: 'exited', end_reason: null });
    expect(row.job.runs_finished).to.equal(4);
    expect(row.job.result_counts).to.include({ pass: 2, fail: 1, error: 1, total: 4 });
    // Read your writes by construction: the transaction that closed the job already held its four results.
    expect((await db.query('SELECT job_uid, results FROM closed_with WHERE job_uid = $1', [uid])).rows).to.deep.equal([{ job_uid: uid, results: 4 }]);
  });
});
