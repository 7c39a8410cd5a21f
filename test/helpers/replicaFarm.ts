/**
 * Portal replicas as real processes (`farmhand portal`, each its own process group) on one throwaway PostgreSQL,
 * behind a real Debian `haproxy` that checks each one's /readyz (docs/farm.md, "Many portals"). Nodes and clients
 * go through HAProxy's frontend; tests kill, stop and resume the replicas.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import request from 'supertest';
import { migrate } from '../../src/farm/db/migrate.js';
import { CONNECT_PATH } from '../../src/farm/protocol.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import { makeTestPack, type Files, type TestPackRepo } from '../fixtures/testPack.js';
import { checked } from './contract.js';
import { startTestDaemon, type TestConfig, type TestDaemon } from './daemon.js';
import type { TestFarm } from './farm.js';
import { connectionString } from './farmPortal.js';
import { fullLaneOnly } from './lane.js';
import { startPostgres, type TestPostgres } from './postgres.js';
import { freePort, killGroup } from './processFarm.js';
import { waitFor } from './wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface PortalProcess {
  name: string;
  port: number;
  url: string;
  child: ChildProcess;
  /** stdout (the CLI's lines and the JSON log) and stderr so far. */
  out: () => string;
  err: () => string;
  /** Resolves with the exit code (null: a signal) once the process is gone. */
  exited: Promise<number | null>;
  signal(sig: NodeJS.Signals): void;
  /**
   * Resolves once the portal says it listens. A process that exits first (a port taken, a start that failed) fails
   * the wait at once, and either failure quotes its stderr and the end of its stdout as they are then.
   */
  listening(o?: { timeoutMs?: number; maxIntervalMs?: number }): Promise<void>;
}

/** Start `farmhand portal --config <file>` in its own process group. */
export function startPortalProcess(name: string, port: number, config: string): PortalProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'portal', '--config', config], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
  child.stderr.on('data', (b: Buffer) => (err += b.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    name,
    port,
    url: `http://127.0.0.1:${port}`,
    child,
    out: () => out,
    err: () => err,
    exited,
    async listening({ timeoutMs = 240_000, maxIntervalMs = 250 } = {}) {
      const said = (): string => `stderr: ${err.trim() || '(none)'}; stdout ends: ${out.slice(-2000).trim() || '(none)'}`;
      const gone = exited.then((code) => {
        throw new Error(`portal ${name} exited (${code ?? 'a signal'}) before it listened (${said()})`);
      });
      try {
        await Promise.race([waitFor(() => out.includes('portal listening on'), { what: `portal ${name} to listen`, timeoutMs, maxIntervalMs }), gone]);
      } catch (e) {
        if ((e as Error).message.startsWith('timed out')) throw new Error(`${(e as Error).message} (${said()})`);
        throw e;
      }
    },
    signal(sig) {
      if (sig === 'SIGKILL') return killGroup(child);
      try {
        process.kill(-child.pid!, sig);
      } catch {
        // already gone
      }
    },
  };
}

/** The response header naming the replica (HAProxy's server name: r1..rn) that answered through HAProxy. */
export const SERVED_BY_HEADER = 'x-test-served-by';

export interface Haproxy {
  /** The frontend's `http://127.0.0.1:port`. */
  url: string;
  child: ChildProcess;
  log: () => string;
  /** HAProxy's operational state of a server: 2 running, 0 stopped (`show servers state`). */
  state(server: string, backend?: 'portals' | 'nodes'): Promise<number | undefined>;
  /** Requests each server of the backend was sent so far (`show stat`, column `stot`: sessions). */
  sent(): Promise<Record<string, number>>;
  stop(): void;
}

/**
 * HAProxy in front of the replicas (`servers`: name to port), as docs/farm.md's "Many portals" configuration but
 * with checks fast enough for a test: /readyz every 300 ms, down after 2 failures, up after 1 success.
 */
export async function startHaproxy(
  work: string,
  servers: Record<string, number>,
  o: {
    balance?: 'first' | 'roundrobin' | 'leastconn';
    /** The backend's `default-server` line (its checks). */
    defaultServer?: string;
    /** The portals backend's `timeout check` (default the defaults' 1s). */
    checkTimeout?: string;
    /** Send the nodes' link (`/farm/v1/connect`) to this one server only; every other request is balanced. */
    nodesTo?: string;
    /** More lines of the backend (e.g. `option http-server-close`). */
    backend?: string[];
    /** More lines of the frontend (e.g. `http-request set-header ...`). */
    frontend?: string[];
    /** Log every request to HAProxy's stdout (`log()`): its unique id, server, status, retries (`%rc`), termination state and request line. */
    requestLog?: boolean;
  } = {},
): Promise<Haproxy> {
  if (spawnSync('haproxy', ['-v']).error) throw new Error('haproxy is not installed: scripts/setup.sh installs it (apt-get install haproxy)');
  const port = await freePort();
  const socket = path.join(work, 'haproxy.sock');
  const cfg = path.join(work, 'haproxy.cfg');
  await writeFile(
    cfg,
    [
      'global',
      `    stats socket ${socket} mode 600 level admin`,
      ...(o.requestLog ? ['    log stdout format raw local0'] : []),
      'defaults',
      '    mode http',
      '    timeout connect 1s',
      '    timeout client 120s',
      '    timeout server 120s',
      '    timeout tunnel 1h',
      '    timeout check 1s',
      '    retries 2',
      '    option redispatch',
      'frontend farm',
      `    bind 127.0.0.1:${port}`,
      ...(o.requestLog ? ['    log global', '    log-format "%t %ID %b/%s %ST retries=%rc %tsc %{+Q}r"'] : []),
      ...(o.frontend ?? []).map((l) => `    ${l}`),
      ...(o.nodesTo === undefined ? [] : [`    acl node_link path_beg ${CONNECT_PATH}`, '    use_backend nodes if node_link']),
      '    default_backend portals',
      ...(o.nodesTo === undefined
        ? []
        : [
            'backend nodes',
            '    option httpchk',
            '    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host farm',
            '    http-check expect status 200',
            `    default-server ${o.defaultServer ?? 'inter 300ms fall 2 rise 1'}`,
            `    server ${o.nodesTo} 127.0.0.1:${servers[o.nodesTo]} check`,
          ]),
      'backend portals',
      `    balance ${o.balance ?? 'first'}`,
      // Which replica answered, for the tests that must know (e.g. an OIDC callback on another replica than its start).
      `    http-response set-header ${SERVED_BY_HEADER} %s`,
      '    option httpchk',
      '    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host farm',
      '    http-check expect status 200',
      ...(o.backend ?? []).map((l) => `    ${l}`),
      ...(o.checkTimeout ? [`    timeout check ${o.checkTimeout}`] : []),
      `    default-server ${o.defaultServer ?? 'inter 300ms fall 2 rise 1'}`,
      ...Object.entries(servers).map(([name, p]) => `    server ${name} 127.0.0.1:${p} check`),
      '',
    ].join('\n'),
  );
  const child = spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (b: Buffer) => (log += b.toString()));
  child.stderr.on('data', (b: Buffer) => (log += b.toString()));
  const net = await import('node:net');
  const command = (c: string) =>
    new Promise<string>((resolve, reject) => {
      const s = net.connect(socket);
      let text = '';
      s.on('data', (b: Buffer) => (text += b.toString('utf8')));
      s.on('end', () => resolve(text));
      s.on('error', reject);
      s.end(`${c}\n`);
    });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    log: () => log,
    async state(server, backend = 'portals') {
      const text = await command(`show servers state ${backend}`).catch(() => '');
      const line = text.split('\n').find((l) => l.includes(` ${server} `));
      return line === undefined ? undefined : Number(line.split(' ')[5]);
    },
    async sent() {
      const text = await command('show stat').catch(() => '');
      const [head, ...lines] = text.split('\n');
      const cols = (head ?? '').replace(/^# /, '').split(',');
      const out: Record<string, number> = {};
      for (const l of lines) {
        const f = l.split(',');
        if (f[0] === 'portals' && f[1] !== 'BACKEND') out[f[1]!] = Number(f[cols.indexOf('stot')]);
      }
      return out;
    },
    stop: () => child.kill('SIGKILL'),
  };
}

/**
 * Write a portal's config file for a test (`<work>/<name>.json`): listening on `port`, the shared storage folder
 * `<work>/storage`, fast heartbeats and flushes, no rate limit to speak of; `fields` added last (e.g. `replicas`).
 */
export async function writePortalConfig(work: string, name: string, port: number, database: string, fields: Record<string, unknown> = {}): Promise<string> {
  const file = path.join(work, `${name}.json`);
  await writeFile(
    file,
    JSON.stringify({
      listen: `127.0.0.1:${port}`,
      database,
      storage_dir: path.join(work, 'storage'),
      heartbeat_secs: 1,
      flush_secs: 1,
      log_level: 'info',
      rate_limit: { requests_per_second: 1000, burst: 10000 },
      ...fields,
    }),
  );
  return file;
}

export interface ReplicaFarm {
  cluster: TestPostgres;
  db: pg.Pool;
  haproxy: Haproxy;
  replicas: PortalProcess[];
  /** HAProxy's frontend: what nodes and clients call. */
  url: string;
  /** A token of `user` (created if needed), once every replica accepts it. */
  tokenFor(user: string): Promise<string>;
  /** Register `nodeId` and write its credential file; returns the file. */
  credentialFor(nodeId: string): Promise<string>;
  /** Register a node and start it joined through HAProxy; resolves once a replica holds it online with its state. */
  addNode: TestFarm['addNode'];
  /** Stop the nodes added, the replicas, HAProxy and the cluster. */
  stop(): Promise<void>;
}

/**
 * `n` replicas ("many", ids r1..rn, one throwaway cluster, one shared storage folder) behind a real HAProxy with
 * `balance` (roundrobin by default: consecutive requests land on different replicas). `portal`: more of every
 * replica's config.
 */
export async function startReplicaFarm(
  n: number,
  o: {
    balance?: 'first' | 'roundrobin' | 'leastconn';
    portal?: Record<string, unknown>;
    /**
     * HAProxy's checks as a production front would have them (/readyz every 1 s, 5 s to answer, down after 5 failures)
     * instead of the failover tests' fast ones: for tests of the API through replicas, where no replica is stopped and a
     * loaded machine's slow /readyz must not take every replica out of service (HAProxy's own 503 page to the client).
     */
    steadyChecks?: boolean;
  } = {},
): Promise<ReplicaFarm> {
  fullLaneOnly('portal replicas (startReplicaFarm)');
  const cluster = await startPostgres();
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 2 });
  db.on('error', () => undefined);
  const replicas: PortalProcess[] = [];
  let haproxy: Haproxy | undefined;
  const work = await mkdtemp(path.join(os.tmpdir(), 'farm-replica-farm-'));
  const nodes: TestDaemon[] = [];
  const stop = async () => {
    for (const d of nodes) await d.stop().catch(() => undefined);
    for (const r of replicas) r.signal('SIGKILL');
    haproxy?.stop();
    await db.end();
    await cluster.stop();
    await rm(work, { recursive: true, force: true });
  };
  try {
    await migrate(db);
    await writeFile(path.join(work, 'replica.secret'), `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
    const ports: Record<string, number> = {};
    for (let i = 1; i <= n; i++) ports[`r${i}`] = await freePort();
    haproxy = await startHaproxy(work, ports, {
      balance: o.balance ?? 'roundrobin',
      ...(o.steadyChecks && { defaultServer: 'inter 1s fall 5 rise 1', checkTimeout: '5s' }),
    });
    const h = haproxy;
    await Promise.all(
      Object.entries(ports).map(async ([name, port]) => {
        const file = await writePortalConfig(work, name, port, connectionString(cluster), {
          ...o.portal,
          replicas: { mode: 'many', replica_id: name, advertise_url: `http://127.0.0.1:${port}`, secret_file: path.join(work, 'replica.secret') },
        });
        const p = startPortalProcess(name, port, file);
        replicas.push(p);
        await p.listening({ timeoutMs: 120_000, maxIntervalMs: 200 });
        await waitFor(async () => (await h.state(name)) === 2, { what: `HAProxy to see replica ${name} up (${h.log()})`, timeoutMs: 120_000, maxIntervalMs: 200 });
      }),
    );
    replicas.sort((x, y) => x.name.localeCompare(y.name));
  } catch (e) {
    await stop();
    throw e;
  }
  const users = new PgUsers(db);
  const tokens = new PgTokens(db);
  const credentialFor = async (nodeId: string) => {
    const file = path.join(work, `${nodeId}.credential`);
    await writeFile(file, `${await registerNode(db, nodeId)}\n`, { mode: 0o600 });
    return file;
  };
  const url = haproxy.url;
  return {
    cluster,
    db,
    haproxy,
    replicas,
    url: haproxy.url,
    async tokenFor(user) {
      await users.add(user).catch((e: unknown) => {
        if ((e as { code?: string }).code !== 'conflict') throw e;
      });
      const { token } = await tokens.createToken(user);
      // Each replica hears of a new token by NOTIFY: wait until every one accepts it.
      for (const r of replicas) {
        await waitFor(async () => (await fetch(`${r.url}/api/v2/user`, { headers: { Authorization: `token ${token}` } })).status === 200, {
          what: `replica ${r.name} to accept ${user}'s new token`,
          timeoutMs: 40_000,
        });
      }
      return token;
    },
    credentialFor,
    async addNode(nodeId, a = {}) {
      const file = await credentialFor(nodeId);
      const d = await startTestDaemon({
        ...(a.files && { files: a.files }),
        ...(a.pack && { pack: a.pack }),
        config: { ...a.config, node_id: nodeId, portal: { url, node_credential_file: file } },
      });
      nodes.push(d);
      await waitFor(async () => (await db.query(`SELECT 1 FROM nodes WHERE node_id = $1 AND online AND owner_replica IS NOT NULL AND state IS NOT NULL`, [nodeId])).rowCount === 1, {
        what: `node ${nodeId} to join a replica`,
        timeoutMs: 60_000,
        maxIntervalMs: 200,
      });
      return d;
    },
    stop,
  };
}

/**
 * The single node's v2 tests through `n` replicas behind HAProxy (FARMHAND_TEST_THROUGH_REPLICAS=n,
 * scripts/test.sh): the node joins through HAProxy (so to one of them), the tests call HAProxy's URL.
 */
export async function startNodeBehindReplicas(
  n: number,
  opts: { files?: Files; config?: TestConfig; pack?: TestPackRepo },
): Promise<TestDaemon & { farm: Pick<TestFarm, 'db' | 'tokenFor'>; replicas: ReplicaFarm }> {
  const farm = await startReplicaFarm(n, { steadyChecks: true, portal: { api: { await_completion_secs: opts.config?.api?.await_completion_secs ?? 55 } } });
  const pack = opts.pack ?? (await makeTestPack(opts.files));
  const nodeId = opts.config?.node_id ?? 'farmhand-test';
  try {
    const node = await farm.addNode(nodeId, { pack, ...(opts.config && { config: opts.config }) });
    return {
      ...node,
      url: farm.url,
      http: checked(request(farm.url)),
      farm,
      replicas: farm,
      async stop() {
        // Evidence that the tests went through every replica: the sessions HAProxy sent each.
        console.log(`      through HAProxy (roundrobin): sessions per replica ${JSON.stringify(await farm.haproxy.sent())}`);
        await farm.stop(); // the node first
        if (!opts.pack) await pack.cleanup();
      },
    };
  } catch (e) {
    await farm.stop();
    if (!opts.pack) await pack.cleanup();
    throw e;
  }
}

/** The `listen` and `replicas` keys of one in-process replica's config (startReplicaSet). */
export interface ReplicaFields {
  listen: string;
  replicas: { mode: 'many'; replica_id: string; advertise_url: string; secret_file: string };
}

export interface ReplicaSet<P> {
  /** r1..rn, in order; r1 holds every node (HAProxy sends the nodes' link to it). */
  replicas: P[];
  haproxy: Haproxy;
  /** HAProxy's frontend. */
  url: string;
  /** Stop the replicas (all at once) and HAProxy. */
  stop(): Promise<void>;
}

/**
 * The farm suite through `n` replicas (FARMHAND_TEST_THROUGH_REPLICAS=n; docs/testing.md, "The farm suite through
 * replicas"): `n` portals started in this process by `start` (mode "many", ids r1..rn, one shared secret) behind a
 * real HAProxy that balances every request roundrobin, except the nodes' link, which it sends to r1. The test keeps
 * its in-process view of "the portal" (r1: the nodes' hub, the lock, the counters) while its clients' calls land
 * on every replica, two in three of them on one that does not hold the node and passes the call to r1.
 */
export async function startReplicaSet<P extends { url: string; stop(): Promise<void> }>(n: number, start: (name: string, fields: ReplicaFields) => Promise<P>): Promise<ReplicaSet<P>> {
  fullLaneOnly('portal replicas (startReplicaSet)');
  const work = await mkdtemp(path.join(os.tmpdir(), 'farm-replica-set-'));
  const secret = path.join(work, 'replica.secret');
  await writeFile(secret, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const ports: Record<string, number> = {};
  for (let i = 1; i <= n; i++) ports[`r${i}`] = await freePort();
  const replicas: P[] = [];
  let haproxy: Haproxy | undefined;
  const stop = async () => {
    await Promise.all(replicas.map((r) => r.stop().catch(() => undefined)));
    haproxy?.stop();
    await rm(work, { recursive: true, force: true });
  };
  const one = async (name: string) => {
    const port = ports[name]!;
    const p = await start(name, { listen: `127.0.0.1:${port}`, replicas: { mode: 'many', replica_id: name, advertise_url: `http://127.0.0.1:${port}`, secret_file: secret } });
    replicas.push(p);
    const h = haproxy!;
    await waitFor(async () => (await h.state(name)) === 2, { what: `HAProxy to see replica ${name} up (${h.log()})`, timeoutMs: 60_000, maxIntervalMs: 100 });
    // r1 is also the nodes' backend, checked on its own: a node's connection before its first good check is HAProxy's 503.
    if (name === 'r1') await waitFor(async () => (await h.state(name, 'nodes')) === 2, { what: `HAProxy to see r1 up for the nodes (${h.log()})`, timeoutMs: 60_000, maxIntervalMs: 100 });
  };
  try {
    haproxy = await startHaproxy(work, ports, { balance: 'roundrobin', nodesTo: 'r1' });
    // r1 first: it migrates the database; the others then find it done.
    await one('r1');
    await Promise.all(Object.keys(ports).slice(1).map(one));
    const order = Object.keys(ports).map((name) => `http://127.0.0.1:${ports[name]}`);
    replicas.sort((x, y) => order.indexOf(x.url) - order.indexOf(y.url));
  } catch (e) {
    await stop();
    throw e;
  }
  return { replicas, haproxy, url: haproxy.url, stop };
}

/** `p` (a replica) as the test sees "the portal": everything its own, but its `url` HAProxy's. */
export function behindHaproxy<P extends { url: string }>(p: P, url: string): P {
  return new Proxy(p, { get: (target, key) => (key === 'url' ? url : Reflect.get(target, key, target)) });
}
