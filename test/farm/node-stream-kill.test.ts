/**
 * The node stream (docs/farm.md, "The node stream") with real processes: a portal (its own process, a throwaway
 * PostgreSQL) and a node (`farmhand serve`). The portal is SIGKILLed mid-job, after it folded the job's first run;
 * the node goes on, and is SIGKILLed in turn in the middle of a run, then started again on the same data directory
 * (its recovery ends the job); then the portal comes back. Every event of the job is in the portal's tables once,
 * in the node's order, and the job's results are in the index in the very transaction that closes the job.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import pg from 'pg';
import { migrate } from '../../src/farm/db/migrate.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { connectionString } from '../helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { waitFor } from '../helpers/wait.js';
import { kill, startCli, type Cli } from '../integration/crash-lib.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NODE = 'farmhand-ns';
const WAIT = { timeoutMs: 90_000, maxIntervalMs: 200 };

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('farm: the node stream survives the portal and the node SIGKILLed mid-stream', function () {
  this.timeout(300_000);
  let cluster: TestPostgres;
  let db: pg.Pool;
  let work: string;
  let pack: TestPackRepo;
  let portalUrl: string;
  let portalConfig: string;
  let portalLog: string;
  let nodeConfig: string;
  let dataDir: string;
  let token: string;
  let nodeToken: string;
  const portals: ChildProcess[] = [];
  const nodes: Cli[] = [];

  const startPortalProcess = async (): Promise<ChildProcess> => {
    const fd = openSync(portalLog, 'a');
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'portal', '--config', portalConfig], { cwd: ROOT, detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    portals.push(child);
    await waitFor(async () => (await fetch(`${portalUrl}/api/v2/user`, { headers: { Authorization: `token ${token}` } }).catch(() => undefined))?.status === 200, {
      what: 'the portal process to answer',
      ...WAIT,
    }).catch((e: Error) => {
      throw new Error(`${e.message}\n${readFileSync(portalLog, 'utf8').slice(-3000)}`);
    });
    return child;
  };
  const killGroup = (c: ChildProcess) => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  const exitOf = (c: ChildProcess) => new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));
  const nodeRow = async () => (await db.query<{ online: boolean }>('SELECT online FROM nodes WHERE node_id = $1', [NODE])).rows[0];
  /** The node's events of a job in the outbox, in outbox order: `<type> <test_case>` and the node's event id. */
  const outboxOf = async (uid: string) =>
    (
      await db.query<{ type: string; test_case: string | null; node_event_id: string }>(
        `SELECT type, data->>'test_case' AS test_case, node_event_id FROM events_outbox WHERE data->>'job_uid' = $1 ORDER BY seq`,
        [uid],
      )
    ).rows;

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
    cluster = await startPostgres();
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
    await migrate(db);
    // What the index holds at the instant a job is closed: in the closing transaction (an AFTER trigger sees its writes).
    await db.query(`CREATE TABLE closed_with (job_uid text, results int)`);
    await db.query(`CREATE FUNCTION note_closed() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
        INSERT INTO closed_with SELECT NEW.job_uid, (SELECT count(*) FROM results WHERE job_uid = NEW.job_uid); RETURN NEW; END $$`);
    await db.query(`CREATE TRIGGER note_closed AFTER UPDATE OF state ON jobs FOR EACH ROW WHEN (OLD.state = 'running' AND NEW.state = 'exited') EXECUTE FUNCTION note_closed()`);
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-node-stream-'));
    pack = await makeTestPack(STANDARD_FILES);
    await new PgUsers(db).add('erin');
    token = (await new PgTokens(db).createToken('erin')).token;
    const credFile = path.join(work, 'credential');
    await writeFile(credFile, `${await registerNode(db, NODE)}\n`, { mode: 0o600 });
    const port = await freePort();
    portalUrl = `http://127.0.0.1:${port}`;
    portalConfig = path.join(work, 'portal.json');
    portalLog = path.join(work, 'portal.log');
    await writeFile(
      portalConfig,
      JSON.stringify({
        listen: `127.0.0.1:${port}`,
        database: connectionString(cluster),
        storage_dir: path.join(work, 'storage'),
        heartbeat_secs: 1,
        flush_secs: 1,
        log_level: 'info',
        rate_limit: { requests_per_second: 1000, burst: 10000 },
      }),
    );
    dataDir = path.join(work, 'node-data');
    nodeConfig = path.join(work, 'node.json');
    await writeFile(
      nodeConfig,
      JSON.stringify({
        node_id: NODE,
        listen: '127.0.0.1:0',
        data_dir: dataDir,
        test_pack: { url: pack.dir },
        capture: { uri: 'none:' },
        log_level: 'warn',
        runner: { kill_grace_secs: 1 },
        portal: { url: portalUrl, node_credential_file: credFile },
      }),
    );
    nodeToken = (await new TokenStore(tokensFile(dataDir)).create('erin')).token;
  });
  after(async () => {
    for (const c of portals) killGroup(c);
    for (const n of nodes) await kill(n);
    await pack?.cleanup();
    await db?.end();
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });

  it("every event of a job once in the portal's tables, in the node's order; its results in the index when it closes", async () => {
    let portal = await startPortalProcess();
    const first = await startCli(nodeConfig);
    nodes.push(first);
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
    const second = await startCli(nodeConfig);
    nodes.push(second);
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
