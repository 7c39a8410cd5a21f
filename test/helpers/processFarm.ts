/**
 * A farm of real processes for the tests that SIGKILL them: a portal (`farmhand portal`, its own process group)
 * on a throwaway PostgreSQL, and one node (`farmhand serve`, started by the test) joined to it. The portal and the
 * node can each be killed and started again on the same configuration and data directory.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { migrate } from '../../src/farm/db/migrate.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';
import { kill, startCli, type Cli } from '../integration/crash-lib.js';
import { connectionString } from './farmPortal.js';
import { startPostgres, type TestPostgres } from './postgres.js';
import { waitFor } from './wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const PROCESS_WAIT = { timeoutMs: 90_000, maxIntervalMs: 200 };

/** Ports freePort handed out in this process: free when asked, but maybe not yet bound by whoever took them. */
const handedOut = new Set<number>();

/**
 * A port free on 127.0.0.1 now, and never one handed out before in this test process: between the answer and the
 * listen of the process it is for, the kernel may give the same port to the next caller (a replica's port to the
 * HAProxy in front of it, which then holds it: the replica cannot listen).
 */
export async function freePort(): Promise<number> {
  for (;;) {
    const s = net.createServer();
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    const port = (s.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => s.close(() => resolve()));
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
}

/** SIGKILL a process group started detached; nothing when it is gone already. */
export function killGroup(c: ChildProcess): void {
  try {
    process.kill(-c.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

export const exitOf = (c: ChildProcess): Promise<void> =>
  new Promise<void>((resolve) => (c.exitCode !== null || c.signalCode !== null ? resolve() : c.once('exit', () => resolve())));

export interface ProcessFarm {
  db: pg.Pool;
  nodeId: string;
  /** The node's data directory. */
  dataDir: string;
  portalUrl: string;
  /** A token of user `erin` at the portal, and one on the node itself. */
  token: string;
  nodeToken: string;
  /** Start the portal's process; resolves once it answers. */
  startPortal(): Promise<ChildProcess>;
  /** Start the node's process on its data directory. */
  startNode(): Promise<Cli>;
  /** The portal's row of the node. */
  nodeRow(): Promise<{ online: boolean } | undefined>;
  /** The node's events of a job in the portal's outbox, in outbox order. */
  outboxOf(uid: string): Promise<{ type: string; test_case: string | null; node_event_id: string }[]>;
  /** SIGKILL every node process started (those already gone are left alone). */
  stopNodes(): Promise<void>;
  /** Kill every process started, remove the cluster and the files. */
  stop(): Promise<void>;
}

export async function startProcessFarm(nodeId: string, prefix: string): Promise<ProcessFarm> {
  const cluster: TestPostgres = await startPostgres();
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
  await migrate(db);
  const work = await mkdtemp(path.join(os.tmpdir(), prefix));
  const pack: TestPackRepo = await makeTestPack(STANDARD_FILES);
  await new PgUsers(db).add('erin');
  const token = (await new PgTokens(db).createToken('erin')).token;
  const credFile = path.join(work, 'credential');
  await writeFile(credFile, `${await registerNode(db, nodeId)}\n`, { mode: 0o600 });
  const port = await freePort();
  const portalUrl = `http://127.0.0.1:${port}`;
  const portalConfig = path.join(work, 'portal.json');
  const portalLog = path.join(work, 'portal.log');
  const portalSettings = {
    listen: `127.0.0.1:${port}`,
    database: connectionString(cluster),
    storage_dir: path.join(work, 'storage'),
    heartbeat_secs: 1,
    flush_secs: 1,
    log_level: 'info',
    rate_limit: { requests_per_second: 1000, burst: 10000 },
  };
  await writeFile(portalConfig, JSON.stringify(portalSettings));
  const dataDir = path.join(work, 'node-data');
  const nodeConfig = path.join(work, 'node.json');
  const nodeSettings = {
    node_id: nodeId,
    listen: '127.0.0.1:0',
    data_dir: dataDir,
    test_pack: { url: pack.dir },
    capture: { uri: 'none:' },
    log_level: 'warn',
    runner: { kill_grace_secs: 1, run_tests_as: false },
    portal: { url: portalUrl, node_credential_file: credFile },
  };
  await writeFile(nodeConfig, JSON.stringify(nodeSettings));
  const nodeToken = (await new TokenStore(tokensFile(dataDir)).create('erin')).token;
  const portals: ChildProcess[] = [];
  const nodes: Cli[] = [];

  return {
    db,
    nodeId,
    dataDir,
    portalUrl,
    token,
    nodeToken,
    async startPortal() {
      const fd = openSync(portalLog, 'a');
      const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'portal', '--config', portalConfig], { cwd: ROOT, detached: true, stdio: ['ignore', fd, fd] });
      closeSync(fd);
      portals.push(child);
      await waitFor(async () => (await fetch(`${portalUrl}/api/v2/user`, { headers: { Authorization: `token ${token}` } }).catch(() => undefined))?.status === 200, {
        what: 'the portal process to answer',
        ...PROCESS_WAIT,
      }).catch((e: Error) => {
        throw new Error(`${e.message}\n${readFileSync(portalLog, 'utf8').slice(-3000)}`);
      });
      return child;
    },
    async startNode() {
      const node = await startCli(nodeConfig);
      nodes.push(node);
      return node;
    },
    nodeRow: async () => (await db.query<{ online: boolean }>('SELECT online FROM nodes WHERE node_id = $1', [nodeId])).rows[0],
    outboxOf: async (uid) =>
      (
        await db.query<{ type: string; test_case: string | null; node_event_id: string }>(
          `SELECT type, data->>'test_case' AS test_case, node_event_id FROM events_outbox WHERE data->>'job_uid' = $1 ORDER BY seq`,
          [uid],
        )
      ).rows,
    async stopNodes() {
      for (const n of nodes.splice(0)) await kill(n);
    },
    async stop() {
      for (const c of portals) killGroup(c);
      for (const n of nodes) await kill(n);
      await pack.cleanup();
      await db.end();
      await cluster.stop();
      await rm(work, { recursive: true, force: true });
    },
  };
}
