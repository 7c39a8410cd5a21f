/**
 * The node's event journal with a real portal: the portal (its own process, a throwaway PostgreSQL) is
 * SIGKILLed; the node (`farmhand serve`, its own process) runs a job while it is away, is SIGKILLed in turn
 * and started again on the same data directory; then the portal comes back. Every event of that job,
 * published by the node's earlier run and never recorded by the portal, reaches the portal's outbox (what
 * GET /api/v2/events serves) once, in the node's order, after the events the portal had recorded.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
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
const NODE = 'farmhand-nj';
const WAIT = { timeoutMs: 90_000, maxIntervalMs: 200 };

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('farm: node events survive the node SIGKILLed while the portal is down', function () {
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

  before(async function () {
    this.timeout(180_000);
    cluster = await startPostgres();
    db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
    await migrate(db);
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-node-journal-'));
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

  it("every event of a job the portal never heard of reaches its outbox once, after the node's SIGKILL and restart", async () => {
    const portal = await startPortalProcess();
    const first = await startCli(nodeConfig);
    nodes.push(first);
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

    const second = await startCli(nodeConfig);
    nodes.push(second);
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
