/**
 * The node's state readable from every replica (issue 19 step 3; docs/farm.md, "Many portals: the node's state on
 * every replica"): three `farmhand portal` replicas ("many") on one throwaway PostgreSQL behind a real HAProxy
 * (`balance first`, so the node joins replica r1), a real node, and the farm's node list and the node's status read
 * at each replica directly. r2 and r3 hold no connection of the node: they present it from the database
 * (`nodes.online` with its owner's lease live, `nodes.state`, the jobs table, the farm's reservations) and answer
 * what r1 answers, bar the `farm` object (the connection as each replica knows it). On the code before, r2 and r3
 * listed the node as offline and not available.
 */
import { expect } from 'chai';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { startReplicaFarm, type ReplicaFarm } from '../helpers/replicaFarm.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'replica-views-node';
const NEVER = 'replica-views-never';
const HANG = 'tests/hang.py::test_hang';
const WAIT = { timeoutMs: 90_000, maxIntervalMs: 300 };

type Obj = Record<string, unknown>;
/** A Node object without what each replica knows of the connection itself (`farm`). */
const bare = (n: Obj): Obj => {
  const { farm: _farm, ...rest } = n;
  return rest;
};

describe('farm: the node`s state read at every replica (3 replicas behind HAProxy)', function () {
  this.timeout(600_000);
  let farm: ReplicaFarm;
  let pack: TestPackRepo;
  let node: TestDaemon | undefined;
  let token: string;

  const get = async (url: string, p: string): Promise<{ status: number; body: unknown }> => {
    const r = await fetch(`${url}${p}`, { headers: { Authorization: `token ${token}` } });
    return { status: r.status, body: await r.json() };
  };
  /** The node list and the node's status at every replica; resolves once r2's and r3's equal r1's (bar `farm`). */
  const sameEverywhere = async (what: string, check: (list: Obj[]) => boolean) => {
    let last = '';
    try {
      return await waitFor(
        async () => {
          const seen: { list: Obj[]; one: Obj }[] = [];
          for (const r of farm.replicas) {
            const list = await get(r.url, '/api/v2/nodes');
            const one = await get(r.url, `/api/v2/nodes/${NODE}`);
            expect(list.status).to.equal(200);
            expect(one.status).to.equal(200);
            // URLs carry the base the client called (node_url; the job's links, the base of the request the node
            // last answered): here each replica's own address, behind HAProxy one public one. Named alike.
            let own = JSON.stringify({ list: (list.body as Obj[]).map(bare), one: bare(one.body as Obj) });
            for (const x of farm.replicas) own = own.replaceAll(x.url, '<replica>');
            seen.push(JSON.parse(own) as { list: Obj[]; one: Obj });
          }
          last = `${differences(seen)}\nr1's node: ${JSON.stringify(mine(seen[0]!.list))}`;
          // Compared by value: the Node object from nodes.state (jsonb) has its keys in another order.
          return check(seen[0]!.list) && differences(seen) === '' ? seen : undefined;
        },
        { what, ...WAIT },
      );
    } catch (e) {
      throw new Error(`${(e as Error).message}\nwhere r2 or r3 differ from r1: ${last}`);
    }
  };
  /** The paths where r2's or r3's answers differ from r1's, with both values. */
const differences = (seen: unknown[]): string => {
  const flat = (v: unknown, p: string, out: Map<string, string>) => {
    if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) flat(x, `${p}.${k}`, out);
    else out.set(p, JSON.stringify(v));
    return out;
  };
  const [a, ...others] = seen.map((x) => flat(x, '', new Map()));
  const lines: string[] = [];
  others.forEach((o, i) => {
    for (const k of new Set([...a!.keys(), ...o.keys()])) if (a!.get(k) !== o.get(k)) lines.push(`r${i + 2} ${k}: ${o.get(k)} (r1: ${a!.get(k)})`);
  });
  return lines.join('\n');
};
const mine = (list: Obj[]) => list.find((n) => n.node_id === NODE)!;

  before(async function () {
    this.timeout(300_000);
    farm = await startReplicaFarm(3, { balance: 'first' });
    token = await farm.tokenFor('alice');
    await registerNode(farm.db, NEVER);
    pack = await makeTestPack(STANDARD_FILES);
    node = await startTestDaemon({ pack, config: { node_id: NODE, portal: { url: farm.url, node_credential_file: await farm.credentialFor(NODE) } } });
    await waitFor(async () => (await farm.db.query(`SELECT 1 FROM nodes WHERE node_id = $1 AND online AND owner_replica = 'r1' AND state IS NOT NULL`, [NODE])).rowCount === 1, {
      what: 'the node joined to r1',
      ...WAIT,
    });
  });
  after(async () => {
    await node?.stop();
    await farm?.stop();
    await pack?.cleanup();
  });

  it('an idle node on r1: online and available at r2 and r3, as at r1; a node never connected offline everywhere', async () => {
    const [seen] = [await sameEverywhere('r2 and r3 to present the node as r1 does', (l) => mine(l)?.available === true)];
    const at = seen[2]!.list;
    expect(mine(at)).to.include({ online: true, available: true, not_available_reason: null, reservation: null });
    expect(mine(at)).to.include({ node_url: `<replica>/api/v2/nodes/${NODE}`, external_ip_address: '127.0.0.1' });
    expect(at.find((n) => n.node_id === NEVER)).to.include({ online: false, available: false, not_available_reason: 'offline: it has never connected to the portal' });
    const raw = (await get(farm.replicas[2]!.url, '/api/v2/nodes')).body as Obj[];
    expect(mine(raw).farm).to.include({ connected: true, offline_reason: null });
  });

  it('reserved through r2: the reservation and the reason at every replica', async () => {
    const r = await fetch(`${farm.replicas[1]!.url}/api/v2/reservations`, {
      method: 'POST',
      headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_ids: [NODE], message: 'replica views' }),
    });
    const body = (await r.json()) as { reservations: { reservation_id: string }[] };
    expect(r.status, JSON.stringify(body)).to.equal(200);
    const id = body.reservations[0]!.reservation_id;
    const seen = await sameEverywhere('the reservation seen at every replica', (l) => mine(l)?.reservation != null);
    expect(mine(seen[2]!.list)).to.include({ online: true, available: false, not_available_reason: `reserved by alice (reservation ${id})` });
    const end = await fetch(`${farm.replicas[2]!.url}/api/v2/reservations/${id}`, { method: 'DELETE', headers: { Authorization: `token ${token}` } });
    expect(end.status).to.be.oneOf([200, 204]);
    await sameEverywhere('the reservation ended at every replica', (l) => mine(l)?.reservation === null && mine(l)?.available === true);
  });

  it('a job running on the node: not available at every replica, and available again at every replica once stopped', async () => {
    const r = await fetch(`${farm.replicas[1]!.url}/api/v2/run_tests`, {
      method: 'POST',
      headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: [HANG], shuffle: false, tags: {} }),
    });
    const job = (await r.json()) as { job_uid: string };
    expect(r.status, JSON.stringify(job)).to.equal(200);
    const seen = await sameEverywhere('the running job seen at every replica', (l) => (mine(l)?.job as Obj | null)?.status === 'running');
    expect(mine(seen[2]!.list)).to.include({ online: true, available: false, not_available_reason: `running a test job (${job.job_uid})` });
    const stop = await fetch(`${farm.replicas[2]!.url}/api/v2/jobs${job.job_uid}/stop`, { method: 'POST', headers: { Authorization: `token ${token}` } });
    expect(stop.status).to.equal(200);
    const after = await sameEverywhere('the stopped job seen at every replica', (l) => (mine(l)?.job as Obj | null)?.status === 'exited' && mine(l)?.available === true);
    expect(mine(after[1]!.list)).to.include({ online: true, available: true });
  });
});
