/**
 * A whole farm for a test: a throwaway PostgreSQL cluster, the real portal
 * (startFarmPortal: PostgreSQL identity, reservations, uploads, events) on
 * loopback, and real `farmhand serve` nodes (startTestDaemon) that join it
 * with credentials made by registerNode, as `farmhand farm node add` does.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import request from 'supertest';
import type { Role } from '../../src/core/roles.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { parsePortalConfig, type PortalConfigInput } from '../../src/farm/portal/config.js';
import { startFarmPortal, type FarmPortal, type FarmPortalOptions } from '../../src/farm/portal/farm.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import type { Files, TestPackRepo } from '../fixtures/testPack.js';
import { makeTestPack } from '../fixtures/testPack.js';
import { checked } from './contract.js';
import { startTestDaemon, type TestConfig, type TestDaemon } from './daemon.js';
import { daemonLogger } from './daemonLogs.js';
import { connectionString } from './farmPortal.js';
import { startPostgres, type TestPostgres } from './postgres.js';
import { waitFor } from './wait.js';

export interface TestFarm {
  cluster: TestPostgres;
  portal: FarmPortal;
  /** The portal's `http://host:port`. */
  url: string;
  http: ReturnType<typeof request>;
  nodes: Map<string, TestDaemon>;
  /** FARMHAND_TEST_THROUGH_REPLICAS=n: every replica (r1, `portal`, first) and HAProxy in front of them. */
  replicas?: { portals: FarmPortal[]; haproxy: import('./replicaFarm.js').Haproxy };
  /** A pool of its own, for tests that read the tables. */
  db: pg.Pool;
  /** A v2 token of `user` (the user is created if needed), as `farmhand farm token create` makes it. */
  /** A token of `user`, added with `role` (the farm's default, run, when not given) if not there yet. */
  tokenFor(user: string, role?: Role): Promise<string>;
  /** Register a node and start it joined to the portal; resolves once the portal sees it online. */
  addNode(nodeId: string, o?: { files?: Files; config?: TestConfig; pack?: TestPackRepo }): Promise<TestDaemon>;
  stop(): Promise<void>;
}

export async function startTestFarm(o: { portal?: Partial<PortalConfigInput>; cluster?: TestPostgres; options?: FarmPortalOptions } = {}): Promise<TestFarm> {
  const cluster = o.cluster ?? (await startPostgres());
  const storage = await mkdtemp(path.join(os.tmpdir(), 'farmhand-portal-'));
  const log = daemonLogger();
  const input = {
    listen: '127.0.0.1:0',
    database: connectionString(cluster),
    storage_dir: storage,
    log_level: 'debug',
    // Tests poll; a real client's pace is tested on the node.
    rate_limit: { requests_per_second: 1000, burst: 10000 },
    heartbeat_secs: 1,
    ...o.portal,
  } as PortalConfigInput;
  // FARMHAND_TEST_THROUGH_REPLICAS=n: n replicas behind HAProxy, "the portal" being r1 seen at HAProxy's URL
  // (startReplicaSet). A test that sets its own `replicas` or `listen` keeps the topology it builds.
  const set =
    throughReplicas() > 0 && o.portal?.replicas === undefined && o.portal?.listen === undefined
      ? await (await import('./replicaFarm.js')).startReplicaSet(throughReplicas(), (_name, fields) =>
          startFarmPortal(parsePortalConfig({ ...input, ...fields }), log.logger, o.options),
        )
      : undefined;
  const portal = set ? (await import('./replicaFarm.js')).behindHaproxy(set.replicas[0]!, set.url) : await startFarmPortal(parsePortalConfig(input), log.logger, o.options);
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
  // An idle client losing its server (a test restarts PostgreSQL) must not crash the test run.
  db.on('error', () => undefined);
  db.on('connect', (client) => client.on('error', () => undefined));
  const users = new PgUsers(db);
  const tokens = new PgTokens(db);
  const nodes = new Map<string, TestDaemon>();
  const credentials = await mkdtemp(path.join(os.tmpdir(), 'farmhand-credentials-'));
  const farm: TestFarm = {
    cluster,
    portal,
    url: portal.url,
    http: checked(request(portal.url)),
    nodes,
    db,
    ...(set && { replicas: { portals: set.replicas, haproxy: set.haproxy } }),
    async tokenFor(user, role) {
      await users.add(user, ...(role === undefined ? [] : [role])).catch((e: unknown) => {
        if ((e as { code?: string }).code !== 'conflict') throw e;
      });
      const { token } = await tokens.createToken(user);
      // The portal hears of a new token by NOTIFY: wait until it accepts it (each replica), as a person would retry.
      for (const url of set ? set.replicas.map((r) => r.url) : [portal.url]) {
        await waitFor(async () => (await request(url).get('/api/v2/user').set('Authorization', `token ${token}`)).status === 200, {
          what: `the portal (${url}) to accept ${user}'s new token`,
          timeoutMs: 40_000,
        });
      }
      return token;
    },
    async addNode(nodeId, n = {}) {
      const file = path.join(credentials, `${nodeId}.credential`);
      await writeFile(file, (await registerNode(db, nodeId)) + '\n', { mode: 0o600 });
      const d = await startTestDaemon({
        ...(n.files && { files: n.files }),
        ...(n.pack && { pack: n.pack }),
        config: { ...n.config, node_id: nodeId, portal: { url: portal.url, node_credential_file: file } },
      });
      nodes.set(nodeId, d);
      await waitFor(() => portal.hub.link(nodeId)?.online && portal.hub.link(nodeId)?.snapshot, { what: `node ${nodeId} to join the portal`, timeoutMs: 30_000 });
      return d;
    },
    async stop() {
      for (const d of nodes.values()) await d.stop().catch(() => undefined);
      if (set) {
        console.log(`      through HAProxy (roundrobin): sessions per replica ${JSON.stringify(await set.haproxy.sent())}`);
        await set.stop();
      } else await portal.stop();
      log.done();
      await db.end();
      if (!o.cluster) await cluster.stop();
      await rm(storage, { recursive: true, force: true });
      await rm(credentials, { recursive: true, force: true });
    },
  };
  return farm;
}

/**
 * The single node's v2 tests through a portal (test/http/v2-portal.test.ts, or FARMHAND_TEST_THROUGH_PORTAL=1):
 * a farm with this one node, seen through the portal's URL. `daemon`, `dataDir` and `pack` stay the
 * node's, so the tests that look inside the node still can.
 */
export const throughPortal = (): boolean => process.env.FARMHAND_TEST_THROUGH_PORTAL === '1' || throughReplicas() > 0;

/** FARMHAND_TEST_THROUGH_REPLICAS=n: the same tests through n portal replicas behind HAProxy (test/helpers/replicaFarm.ts). */
export const throughReplicas = (): number => Number(process.env.FARMHAND_TEST_THROUGH_REPLICAS ?? 0) || 0;

export async function startNodeBehindPortal(opts: {
  files?: Files;
  config?: TestConfig;
  pack?: TestPackRepo;
  /** Through this many portal replicas behind HAProxy instead of one portal (0: one portal); default FARMHAND_TEST_THROUGH_REPLICAS. */
  replicas?: number;
}): Promise<TestDaemon & { farm: Pick<TestFarm, 'db' | 'tokenFor'> }> {
  const replicas = opts.replicas ?? throughReplicas();
  if (replicas > 0) return (await import('./replicaFarm.js')).startNodeBehindReplicas(replicas, opts);
  const farm = await startTestFarm();
  const pack = opts.pack ?? (await makeTestPack(opts.files));
  const nodeId = opts.config?.node_id ?? 'farmhand-test';
  try {
    const node = await farm.addNode(nodeId, { pack, ...(opts.config && { config: opts.config }) });
    return {
      ...node,
      url: farm.url,
      http: farm.http,
      farm,
      async stop() {
        await farm.stop();
        if (!opts.pack) await pack.cleanup();
      },
    };
  } catch (e) {
    await farm.stop();
    throw e;
  }
}
