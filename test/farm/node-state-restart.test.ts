/**
 * The node's state as an event of its stream (docs/farm.md, "The node's state"), with real processes: a portal (its
 * own process, a throwaway PostgreSQL) and a node (`farmhand serve`). The node's state changes while the portal is
 * down (a job runs on the node directly), and the node is SIGKILLed before any portal recorded that state. The
 * portal comes back, then the node: the portal has the node's latest state from the node's journal (the very
 * node.state event the journal holds last), in its database; and a portal started again while the node is away
 * still shows that state (the node's last job), not an empty Node object.
 */
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'chai';
import { exitOf, killGroup, PROCESS_WAIT as WAIT, startProcessFarm, type ProcessFarm } from '../helpers/processFarm.js';
import { waitFor } from '../helpers/wait.js';
import { kill } from '../integration/crash-lib.js';
import { throughReplicas } from '../helpers/farm.js';

const NODE = 'farmhand-state';

interface StateEvent {
  id: string;
  type: string;
  data: { node: { job?: { job_uid?: string; status?: string } | null }; availability: { kind: string } };
}

describe("farm: the node's state survives the portal and the node SIGKILLed before the portal recorded it", function () {
  before(function () {
    // Not through replicas (FARMHAND_TEST_THROUGH_REPLICAS): kills and restarts the one portal process (processFarm) (replicas killed: replicas-rolling, the soak).
    if (throughReplicas() > 0) this.skip();
  });
  this.timeout(300_000);
  let farm: ProcessFarm;

  /** The node.state events of the node's journal (`<data_dir>/events/*.jsonl`), in its order. */
  const journalStates = async (): Promise<StateEvent[]> => {
    const out: StateEvent[] = [];
    const dir = path.join(farm.dataDir, 'events');
    for (const f of (await readdir(dir).catch(() => [] as string[])).filter((x) => x.endsWith('.jsonl')).sort()) {
      for (const line of (await readFile(path.join(dir, f), 'utf8')).split('\n')) {
        try {
          const e = JSON.parse(line) as StateEvent;
          if (e.type === 'node.state') out.push(e);
        } catch {
          // the line being written
        }
      }
    }
    return out;
  };
  const stateRow = async () =>
    (await farm.db.query<{ state: StateEvent['data'] | null; state_event_id: string | null }>('SELECT state, state_event_id FROM nodes WHERE node_id = $1', [NODE])).rows[0];
  const portalNode = async () => {
    const r = await fetch(`${farm.portalUrl}/api/v2/nodes/${NODE}`, { headers: { Authorization: `token ${farm.token}` } });
    expect(r.status).to.equal(200);
    return (await r.json()) as { online: boolean; job?: { job_uid?: string; status?: string } | null; farm?: { connected?: boolean } };
  };

  before(async function () {
    this.timeout(180_000);
    farm = await startProcessFarm(NODE, 'farm-node-state-');
  });
  after(() => farm?.stop());

  it("the portal has the node's latest state from its journal, and keeps it across its own restart", async () => {
    let portal = await farm.startPortal();
    const first = await farm.startNode();
    await waitFor(async () => (await farm.nodeRow())?.online, { what: 'the node joined to the portal', ...WAIT });

    // The portal dies; the node's state changes without it: a job runs to its end on the node.
    killGroup(portal);
    await exitOf(portal);
    const run = await fetch(`${first.url}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${farm.nodeToken}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass'], shuffle: false, tags: {} }),
    });
    const started = (await run.json()) as { job_uid: string };
    expect(run.status, JSON.stringify(started)).to.equal(200);
    const uid = started.job_uid;
    const exitedState = (e: StateEvent) => e.data.node.job?.job_uid === uid && e.data.node.job.status === 'exited';
    await waitFor(async () => (await journalStates()).some(exitedState), { what: "the node's state with the job exited, in its journal", ...WAIT });
    // SIGKILLed before any portal recorded that state.
    await kill(first);
    expect((await stateRow())?.state?.node.job?.job_uid).not.to.equal(uid);

    // The portal comes back, then the node: the state comes from the node's stream (its journal), folded.
    portal = await farm.startPortal();
    await farm.startNode();
    const row = await waitFor(
      async () => {
        const [states, r] = [await journalStates(), await stateRow()];
        return r?.state_event_id && r.state_event_id === states.at(-1)?.id ? r : undefined;
      },
      { what: "the node's last node.state (its journal's) folded into the portal's nodes row", ...WAIT },
    );
    expect(row.state!.node.job).to.deep.include({ job_uid: uid, status: 'exited' });
    expect((await portalNode()).job).to.deep.include({ job_uid: uid, status: 'exited' });

    // The node goes away and the portal restarts: a portal that never heard from the node shows its last state.
    killGroup(portal);
    await exitOf(portal);
    await farm.stopNodes();
    portal = await farm.startPortal();
    const shown = await portalNode();
    expect(shown.online).to.equal(false);
    expect(shown.job).to.deep.include({ job_uid: uid, status: 'exited' });
  });
});
