/**
 * Farm soak: a portal process and 3 real `farmhand serve` node processes over a
 * throwaway PostgreSQL for N minutes, with CI-like clients in a loop (reserve
 * with a lease, run_tests, await_completion, the job, its results, every
 * artifact checked against its md5, results.xml, end the reservation) while
 * nodes are SIGKILLed and restarted, the portal is restarted (SIGKILL and
 * SIGTERM in turn), PostgreSQL is restarted (`pg_ctl restart -m fast`, and
 * every other time stopped for a few seconds first), and a node is paused
 * with SIGSTOP past the heartbeat limit, then continued. At the end, with everything back up and the clients
 * stopped: every job ended, every exited job's results in the farm index
 * exactly once, every result a node holds in the index, no live reservation,
 * every node online, no node event twice in the outbox, each paused node back
 * online after its SIGCONT, no 500. Prints the portal's RSS, open fds, heap (after a GC) and
 * PostgreSQL connections over time. Exit 1 when an invariant fails.
 *
 * `--replicas n`: n portal replicas (mode "many", ids r1..rn, one shared storage folder and secret) behind a real
 * HAProxy (`balance roundrobin`, /readyz checked every second, `on-marked-down shutdown-sessions`); the nodes and the
 * clients go through HAProxy, so the nodes spread over the replicas; the portal restarts are of one replica at a
 * time, in turn. Adds the figures per replica (RSS, heap, fds, CPU), the 503s and their rate, the errors by kind,
 * where the nodes are, and the sessions HAProxy sent each replica (docs/farm.md, "The farm soak").
 *
 *   node --import tsx bench/soak/farm-soak.ts [--minutes 10] [--clients 4] [--replicas 0]
 *     [--node-kill-secs 40] [--portal-restart-secs 90] [--pg-restart-secs 75]
 *     [--node-pause-secs 60] [--sample-secs 20]
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { migrate } from '../../src/farm/db/migrate.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { PgTokens, PgUsers } from '../../src/farm/users.js';
import { testConfig } from '../../test/helpers/daemon.js';
import { connectionString } from '../../test/helpers/farmPortal.js';
import { startPostgres } from '../../test/helpers/postgres.js';
import type { Haproxy } from '../../test/helpers/replicaFarm.js';
import { startFront } from '../../test/helpers/rollingFarm.js';
import { makeTestPack, STANDARD_FILES } from '../../test/fixtures/testPack.js';
import { PROJECT_ROOT } from '../lib/daemon.js';
import { timedRequest, waitFor200 } from '../lib/http.js';
import { freePort, groupCpuSecs, procMemory, spawnLogged, tail, type Spawned } from '../lib/processes.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const MINUTES = arg('minutes', 10);
const CLIENTS = arg('clients', 4);
const NODE_KILL_SECS = arg('node-kill-secs', 40);
const PORTAL_RESTART_SECS = arg('portal-restart-secs', 90);
const PG_RESTART_SECS = arg('pg-restart-secs', 75);
const NODE_PAUSE_SECS = arg('node-pause-secs', 60);
const SAMPLE_SECS = arg('sample-secs', 20);
/** 0: one portal (mode "single"); n: n replicas (mode "many") behind HAProxy. */
const REPLICAS = arg('replicas', 0);
const NODES = ['soak-a', 'soak-b', 'soak-c'];
const MEM_PROBE = fileURLToPath(new URL('../lib/mem-probe.mjs', import.meta.url));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const now = () => new Date().toISOString().slice(11, 19);
const log = (msg: string) => console.log(`${now()} ${msg}`);

// A CI job's test cases: a quick pass, a run long enough to be killed in, a failure that writes a file.
const SOAK_FILES = {
  ...STANDARD_FILES,
  'tests/soak.py': [
    'import time',
    '',
    'def test_quick():',
    '    print("quick")',
    '',
    'def test_slow():',
    '    time.sleep(4)',
    '    with open("slow.txt", "w") as f:',
    '        f.write("slept\\n" * 1000)',
    '',
    'def test_fails():',
    '    with open("why.txt", "w") as f:',
    '        f.write("because")',
    '    assert False, "on purpose"',
    '',
  ].join('\n'),
};
const CASES = ['tests/soak.py::test_quick', 'tests/soak.py::test_slow', 'tests/soak.py::test_fails'];

interface Sample {
  t: number;
  /** The portal process sampled: `portal`, or the replica's id. */
  portal: string;
  generation: number;
  /** Its CPU since the sample before (its process group), in % of one core. */
  cpuPct: number;
  /** Where the nodes are (`nodes.owner_replica`), e.g. `r1:1 r2:2`. */
  owners: string;
  rssMb: number;
  fds: number;
  heapMb: number;
  pgConnections: number;
  jobs: number;
  results: number;
}

async function main(): Promise<void> {
  const work = await mkdtemp(path.join(os.tmpdir(), 'farm-soak-'));
  const cluster = await startPostgres();
  // Named, so the connection count leaves this soak's own out.
  const db = new pg.Pool({ connectionString: connectionString(cluster), max: 2, application_name: 'farm-soak' });
  // PostgreSQL is restarted under the soak: an idle client losing its server must not end it.
  db.on('error', () => undefined);
  const pack = await makeTestPack(SOAK_FILES);
  const procs = new Set<Spawned>();
  const problems: string[] = [];
  let haproxy: Haproxy | undefined;
  let closing = false;
  try {
    await migrate(db);
    await new PgUsers(db).add('ci');
    const { token } = await new PgTokens(db).createToken('ci');
    const auth = { Authorization: `token ${token}` };

    // The portal: one fixed port, so nodes reconnect to the same URL after a restart. With --replicas, n of them
    // (each its fixed port) behind HAProxy, whose URL the nodes and clients call.
    interface PortalSlot {
      name: string;
      url: string;
      config: string;
      memFile: string;
      logFile: string;
      proc?: Spawned;
      generation: number;
      cpu?: { at: number; secs: number };
    }
    const settings = {
      database: connectionString(cluster),
      storage_dir: path.join(work, 'storage'),
      heartbeat_secs: 2,
      log_level: 'warn',
      rate_limit: { requests_per_second: 1000, burst: 10000 },
    };
    const slots: PortalSlot[] = [];
    const slotAt = async (name: string, extra: (url: string) => Record<string, unknown>) => {
      const port = await freePort();
      const url = `http://127.0.0.1:${port}`;
      const config = path.join(work, `${name}.json`);
      writeFileSync(config, JSON.stringify({ ...settings, listen: `127.0.0.1:${port}`, ...extra(url) }));
      slots.push({ name, url, config, memFile: path.join(work, `${name}.mem.json`), logFile: path.join(work, `${name}.log`), generation: 0 });
      return port;
    };
    let portalUrl: string;
    if (REPLICAS > 0) {
      const secretFile = path.join(work, 'replica.secret');
      writeFileSync(secretFile, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
      const ports: Record<string, number> = {};
      for (let i = 1; i <= REPLICAS; i++) {
        const name = `r${i}`;
        ports[name] = await slotAt(name, (url) => ({ replicas: { mode: 'many', replica_id: name, advertise_url: url, secret_file: secretFile } }));
      }
      // rollingFarm's startFront, as docs/farm.md's configuration with replicas: /readyz every second, down after 5
      // failures (longer than a stopping replica's drain), the sessions of a replica marked down cut so its nodes
      // reconnect to another; a new connection per request, a request a replica closed unanswered sent again, and a
      // v2 start given an Idempotency-Key so that sending it again is safe.
      haproxy = await startFront(work, ports, { requestLog: false });
      portalUrl = haproxy.url;
    } else {
      await slotAt('portal', () => ({}));
      portalUrl = slots[0]!.url;
    }
    let generation = 0;
    const startPortal = async (slot: PortalSlot) => {
      const p = spawnLogged(
        process.execPath,
        ['--expose-gc', '--import', MEM_PROBE, '--import', 'tsx', path.join(PROJECT_ROOT, 'src/main.ts'), 'portal', '--config', slot.config],
        slot.logFile,
        { cwd: PROJECT_ROOT, env: { ...process.env, FARMHAND_BENCH_MEM_FILE: slot.memFile } },
      );
      procs.add(p);
      let alive = true;
      void p.exited.then(() => (alive = false));
      // A replica takes requests once it holds its lease (/readyz); a single portal once it answers.
      await waitFor200(`${slot.url}/${REPLICAS > 0 ? 'readyz' : 'healthz'}`, performance.now() + 120_000, () => alive, 100).catch((e: Error) => {
        throw new Error(`${e.message}\n${tail(slot.logFile)}`);
      });
      slot.proc = p;
      slot.cpu = undefined;
      slot.generation = ++generation;
      // A portal that exits on its own (a replica that lost its lease: PostgreSQL away longer than it) is started
      // again, as systemd's Restart=always does (docs/farm.md, "Leases"), and counted.
      void p.exited.then(async () => {
        if (closing || slot.proc !== p) return;
        slot.proc = undefined;
        procs.delete(p);
        exitsOnTheirOwn++;
        log(`${slot.name} exited on its own (${tail(slot.logFile, 2).replace(/\n/g, ' | ').slice(0, 300)}); started again`);
        await sleep(1000);
        await startPortal(slot).catch((e: Error) => problems.push(`${slot.name} not started again: ${e.message.slice(0, 300)}`));
      });
    };
    let exitsOnTheirOwn = 0;

    // The nodes: each its own `farmhand serve` process on a fixed port and data directory (kept across kills).
    const nodes = new Map<string, { config: string; url: string; logFile: string; proc?: Spawned }>();
    for (const id of NODES) {
      const dir = path.join(work, id);
      mkdirSync(dir);
      const credentialFile = path.join(dir, 'credential');
      writeFileSync(credentialFile, `${await registerNode(db, id)}\n`, { mode: 0o600 });
      const port = await freePort();
      const cfg = testConfig(pack.dir, path.join(dir, 'data'), {
        node_id: id,
        listen: `127.0.0.1:${port}`,
        log_level: 'warn',
        capture: { uri: 'none:' },
        portal: { url: portalUrl, node_credential_file: credentialFile },
        rate_limit: { requests_per_second: 1000, burst: 10000 },
      });
      const config = path.join(dir, 'farmhand.json');
      writeFileSync(config, JSON.stringify(cfg));
      nodes.set(id, { config, url: `http://127.0.0.1:${port}`, logFile: path.join(dir, 'node.log') });
    }
    const startNode = async (id: string) => {
      const n = nodes.get(id)!;
      const p = spawnLogged(process.execPath, ['--import', 'tsx', path.join(PROJECT_ROOT, 'src/main.ts'), 'serve', '--config', n.config], n.logFile, {
        cwd: PROJECT_ROOT,
      });
      procs.add(p);
      n.proc = p;
      let alive = true;
      void p.exited.then(() => (alive = false));
      await waitFor200(`${n.url}/healthz`, performance.now() + 120_000, () => alive, 100).catch((e: Error) => {
        throw new Error(`${e.message}\n${tail(n.logFile)}`);
      });
    };
    const call = async (method: string, p: string, body?: unknown, timeoutMs = 65_000) => {
      const res = await fetch(p.startsWith('http') ? p : `${portalUrl}${p}`, {
        method,
        headers: { ...auth, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
      return { status: res.status, body: Buffer.from(await res.arrayBuffer()) };
    };

    const onlineNodes = async () => {
      const r = await call('GET', '/api/v2/nodes', undefined, 10_000).catch(() => undefined);
      if (r?.status !== 200) return [];
      return (JSON.parse(r.body.toString('utf8')) as Array<{ node_id: string; online: boolean }>).filter((n) => n.online).map((n) => n.node_id);
    };

    for (const slot of slots) await startPortal(slot);
    await Promise.all(NODES.map(startNode));
    const waitAllOnline = async (what: string, ms = 120_000) => {
      const end = Date.now() + ms;
      while ((await onlineNodes()).length < NODES.length) {
        if (Date.now() > end) throw new Error(`not every node online ${what}`);
        await sleep(500);
      }
    };
    await waitAllOnline('at the start');
    log(
      `${REPLICAS > 0 ? `${REPLICAS} replicas (${slots.map((r) => r.url).join(', ')}) behind HAProxy ${portalUrl}` : `portal ${portalUrl}`} ` +
        `and nodes ${NODES.join(', ')} up; soak of ${MINUTES} min with ${CLIENTS} clients`,
    );

    // ---------------------------------------------------------------- clients
    const started = new Set<string>(); // job uids run_tests answered 200 for
    const seenResults = new Set<string>(); // result ids a client read in a results list
    const stats = { iterations: 0, completed: 0, artifacts: 0, artifactBytes: 0, xml: 0, reserved: 0, statuses: new Map<string, number>() };
    const count = (key: string) => stats.statuses.set(key, (stats.statuses.get(key) ?? 0) + 1);
    const endAt = Date.now() + MINUTES * 60_000;
    let stopping = false;

    const clientLoop = async (k: number) => {
      for (let i = 0; !stopping && Date.now() < endAt; i++) {
        stats.iterations++;
        const nodeId = NODES[(k + i) % NODES.length]!;
        let reservation: number | undefined;
        try {
          // Every other iteration holds the node with a lease (a CI job that dies stops holding it).
          if (i % 2 === 0) {
            const r = await call('POST', '/api/v2/reservations', { node_ids: [nodeId], message: `soak client ${k}`, lease_secs: 60, wait_secs: 20 });
            count(`reserve ${r.status}`);
            if (r.status !== 200) throw new Error('not reserved');
            reservation = (JSON.parse(r.body.toString()) as { reservations: Array<{ reservation_id: number }> }).reservations[0]!.reservation_id;
            stats.reserved++;
          }
          const run = await call('POST', '/api/v2/run_tests', { node_id: nodeId, test_pack_revision: 'main', test_cases: CASES, shuffle: i % 3 === 0, tags: { 'jenkins/BUILD_ID': String(i) } });
          count(`run_tests ${run.status}`);
          if (run.status !== 200) throw new Error('not started');
          const job = JSON.parse(run.body.toString()) as { job_uid: string; job_url: string };
          started.add(job.job_uid);
          for (;;) {
            const w = await call('GET', `/api/v2/jobs${job.job_uid}/await_completion`);
            count(`await_completion ${w.status}`);
            if (w.status === 200) break;
            if (w.status !== 202) await sleep(1000); // the portal restarting: ask again
          }
          const j = await call('GET', job.job_url);
          count(`job ${j.status}`);
          const list = await call('GET', `/api/v2/results?filter=${encodeURIComponent(`job:${job.job_uid}`)}`);
          count(`results ${list.status}`);
          if (list.status !== 200) throw new Error('no results list');
          for (const r of JSON.parse(list.body.toString()) as Array<{ result_id: string; result_url: string }>) {
            seenResults.add(r.result_id);
            const listing = await call('GET', `${r.result_url}/artifacts/`);
            count(`artifacts/ ${listing.status}`);
            if (listing.status !== 200) continue;
            for (const [name, info] of Object.entries(JSON.parse(listing.body.toString()) as Record<string, { size: number; md5: string }>)) {
              const f = await call('GET', `${r.result_url}/artifacts/${name.split('/').map(encodeURIComponent).join('/')}`);
              count(`artifact ${f.status}`);
              if (f.status !== 200) continue;
              const md5 = createHash('md5').update(f.body).digest('hex');
              if (md5 !== info.md5 || f.body.length !== info.size) problems.push(`${r.result_id}/${name}: got ${f.body.length} bytes md5 ${md5}, listed ${info.size} ${info.md5}`);
              stats.artifacts++;
              stats.artifactBytes += f.body.length;
            }
          }
          const xml = await call('GET', `/api/v2/results.xml?filter=${encodeURIComponent(`job:${job.job_uid}`)}&include_tz=true`);
          count(`results.xml ${xml.status}`);
          if (xml.status === 200) stats.xml++;
          stats.completed++;
        } catch (e) {
          const msg = (e as Error).name === 'TimeoutError' ? 'timeout' : (e as Error).message;
          if (!['not reserved', 'not started', 'no results list'].includes(msg)) count(`error ${msg.slice(0, 60)}`);
          await sleep(1000);
        } finally {
          if (reservation !== undefined) {
            const d = await call('DELETE', `/api/v2/reservations/${reservation}`).catch(() => undefined);
            count(`unreserve ${d?.status ?? 'failed'}`);
          }
        }
      }
    };

    // ---------------------------------------------------------------- faults and samples
    const samples: Sample[] = [];
    const t0 = Date.now();
    const sample = async () => {
      let owners = '';
      let counts: { conns: string; jobs: string; results: string } | undefined;
      try {
        const { rows } = await db.query<{ conns: string; jobs: string; results: string }>(
          `SELECT (SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' AND application_name <> 'farm-soak') AS conns,
                  (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM results) AS results`,
        );
        counts = rows[0];
        const o = await db.query<{ owner: string | null; n: string }>(`SELECT owner_replica AS owner, count(*) AS n FROM nodes GROUP BY 1 ORDER BY 1`);
        owners = o.rows.map((r) => `${r.owner ?? 'none'}:${r.n}`).join(' ');
      } catch {
        return; // PostgreSQL is being restarted: no sample this time
      }
      for (const slot of slots) {
        const pid = slot.proc?.pid;
        if (pid === undefined) continue;
        try {
          writeFileSync(slot.memFile, '');
          process.kill(pid, 'SIGUSR2');
          let heap: { heapUsed: number } | undefined;
          for (let i = 0; i < 100 && !heap; i++) {
            await sleep(20);
            const text = readFileSync(slot.memFile, 'utf8');
            if (text) heap = JSON.parse(text) as { heapUsed: number };
          }
          const cpu = groupCpuSecs(pid);
          const secs = cpu.user + cpu.system;
          const at = performance.now();
          const cpuPct = slot.cpu ? ((secs - slot.cpu.secs) / ((at - slot.cpu.at) / 1000)) * 100 : NaN;
          slot.cpu = { at, secs };
          samples.push({
            t: (Date.now() - t0) / 1000,
            portal: slot.name,
            generation: slot.generation,
            cpuPct,
            owners,
            rssMb: procMemory(pid).rssMb,
            fds: readdirSync(`/proc/${pid}/fd`).length,
            heapMb: heap ? heap.heapUsed / 2 ** 20 : NaN,
            pgConnections: Number(counts!.conns),
            jobs: Number(counts!.jobs),
            results: Number(counts!.results),
          });
        } catch {
          // the portal is being restarted: no sample this time
        }
      }
    };
    const faults = { nodeKills: 0, portalRestarts: 0, pgRestarts: 0, nodePauses: 0 };
    // Faults stop in the last 40 % of the run: the last portal generation shows the trend alone.
    const faultsEnd = t0 + MINUTES * 60_000 * 0.6;
    const nodeKiller = async () => {
      let k = 0;
      while (!stopping && Date.now() < faultsEnd) {
        await sleep(NODE_KILL_SECS * 1000 * (0.5 + Math.random()));
        if (stopping || Date.now() >= faultsEnd) break;
        const id = NODES[k++ % NODES.length]!;
        const n = nodes.get(id)!;
        process.kill(-n.proc!.pid, 'SIGKILL');
        await n.proc!.exited;
        procs.delete(n.proc!);
        faults.nodeKills++;
        log(`SIGKILL node ${id}`);
        await sleep(2000 + Math.random() * 8000);
        await startNode(id);
        log(`node ${id} restarted`);
      }
    };
    // The portal (with --replicas: one replica at a time, in turn), SIGKILLed and stopped (SIGTERM) in turn.
    const portalRestarter = async () => {
      let k = 0;
      while (!stopping && Date.now() < faultsEnd) {
        await sleep(PORTAL_RESTART_SECS * 1000);
        if (stopping || Date.now() >= faultsEnd) break;
        const slot = slots[k % slots.length]!;
        const p = slot.proc;
        if (!p) {
          k++; // being started again after an exit of its own: the next one's turn
          continue;
        }
        slot.proc = undefined;
        const kill = k++ % 2 === 0;
        if (kill) process.kill(-p.pid, 'SIGKILL');
        await (kill ? p.exited : p.stop(30_000));
        procs.delete(p);
        faults.portalRestarts++;
        log(`${slot.name} ${kill ? 'SIGKILLed' : 'stopped (SIGTERM)'}`);
        await sleep(2000);
        await startPortal(slot);
        log(`${slot.name} restarted (generation ${slot.generation})`);
      }
    };
    // PostgreSQL restarted under the portal: every connection cut; every other time it stays down a few seconds.
    const pgRestarter = async () => {
      let k = 0;
      while (!stopping && Date.now() < faultsEnd) {
        await sleep(PG_RESTART_SECS * 1000 * (0.5 + Math.random()));
        if (stopping || Date.now() >= faultsEnd) break;
        const down = k++ % 2 === 1;
        if (down) {
          await cluster.stopServer('fast');
          log('PostgreSQL stopped');
          await sleep(3000 + Math.random() * 4000);
          await cluster.startServer();
        } else await cluster.restart('fast');
        faults.pgRestarts++;
        log(down ? 'PostgreSQL started again' : 'PostgreSQL restarted');
      }
    };
    // A node paused (SIGSTOP) until the portal has it offline (3 heartbeats), then continued: it must come back online.
    const isOnline = async (id: string) => (await db.query<{ online: boolean }>('SELECT online FROM nodes WHERE node_id = $1', [id]).catch(() => undefined))?.rows[0]?.online;
    const nodePauser = async () => {
      let k = 0;
      while (!stopping && Date.now() < faultsEnd) {
        await sleep(NODE_PAUSE_SECS * 1000 * (0.5 + Math.random()));
        if (stopping || Date.now() >= faultsEnd) break;
        const id = NODES[NODES.length - 1 - (k++ % NODES.length)]!;
        const proc = nodes.get(id)!.proc;
        if (!proc) continue;
        try {
          process.kill(-proc.pid, 'SIGSTOP');
        } catch {
          continue; // killed by the node killer meanwhile
        }
        faults.nodePauses++;
        log(`SIGSTOP node ${id}`);
        // Offline by the portal's heartbeat limit (the database may be restarting: then past twice the limit).
        const limitEnd = Date.now() + 60_000;
        while (Date.now() < limitEnd && (await isOnline(id)) !== false) await sleep(500);
        await sleep(1000);
        try {
          process.kill(-proc.pid, 'SIGCONT');
        } catch {
          // killed meanwhile: the node killer restarts it
        }
        log(`SIGCONT node ${id}`);
        const backEnd = Date.now() + 120_000;
        while (!(await onlineNodes()).includes(id)) {
          if (Date.now() > backEnd) {
            problems.push(`node ${id} not online 120 s after its SIGCONT`);
            break;
          }
          await sleep(500);
        }
      }
    };
    const sampler = async () => {
      while (!stopping) {
        await sample();
        await sleep(SAMPLE_SECS * 1000);
      }
    };

    const sampling = sampler();
    const background = [nodeKiller(), portalRestarter(), pgRestarter(), nodePauser()];
    await Promise.all(Array.from({ length: CLIENTS }, (_, k) => clientLoop(k)));
    await Promise.all(background);
    await sample();
    stopping = true;
    await sampling;

    // ---------------------------------------------------------------- invariants
    log('clients stopped; waiting for every node online and every job ended');
    await waitAllOnline('at the end');
    const settle = async (what: string, probe: () => Promise<string | undefined>, ms = 180_000) => {
      const end = Date.now() + ms;
      let last: string | undefined;
      while ((last = await probe()) !== undefined) {
        if (Date.now() > end) {
          problems.push(`${what}: ${last}`);
          return;
        }
        await sleep(1000);
      }
    };
    await settle('every job ended', async () => {
      const { rows } = await db.query<{ job_uid: string }>("SELECT job_uid FROM jobs WHERE state <> 'exited'");
      return rows.length ? `${rows.length} not exited: ${rows.map((r) => r.job_uid).join(', ')}` : undefined;
    });
    const { rows: known } = await db.query<{ job_uid: string }>('SELECT job_uid FROM jobs');
    const knownSet = new Set(known.map((r) => r.job_uid));
    const lostJobs = [...started].filter((u) => !knownSet.has(u));
    if (lostJobs.length) problems.push(`jobs started but unknown to the portal: ${lostJobs.join(', ')}`);
    // A job its node ended: the index holds exactly its result_counts.total results. A job the portal
    // ended (its node went offline, end_reason set) keeps the portal's account, which can miss a run
    // the node finished just before it died and uploaded on its return: at least that many, and the
    // extra ones are listed (the node's own results are checked against the index below).
    const undercounted: string[] = [];
    await settle('every result of every exited job in the index exactly once', async () => {
      const { rows } = await db.query<{ job_uid: string; total: number; indexed: string; distinct_ids: string; portal_ended: boolean }>(
        `SELECT j.job_uid, (j.job->'result_counts'->>'total')::int AS total, count(r.result_id) AS indexed, count(DISTINCT r.result_id) AS distinct_ids,
                j.end_reason IS NOT NULL AS portal_ended
           FROM jobs j LEFT JOIN results r ON r.job_uid = j.job_uid
          WHERE j.state = 'exited' GROUP BY j.job_uid, j.job, j.end_reason`,
      );
      const bad = rows.filter((r) => (r.portal_ended ? Number(r.indexed) < r.total : Number(r.indexed) !== r.total) || Number(r.distinct_ids) !== Number(r.indexed));
      undercounted.splice(0, Infinity, ...rows.filter((r) => r.portal_ended && Number(r.indexed) > r.total).map((r) => `${r.job_uid} (portal's total ${r.total}, indexed ${r.indexed})`));
      return bad.length ? `${bad.length} jobs, e.g. ${bad.slice(0, 5).map((b) => `${b.job_uid} total ${b.total} indexed ${b.indexed}`).join('; ')}` : undefined;
    });
    await settle('every result a node holds is in the farm index', async () => {
      const { rows } = await db.query<{ result_id: string }>('SELECT result_id FROM results');
      const indexed = new Set(rows.map((r) => r.result_id));
      const missing: string[] = [];
      for (const [id, n] of nodes) {
        const r = await timedRequest(`${n.url}/api/v1/results?sort=date:asc`, { timeoutMs: 30_000 }).catch(() => undefined);
        if (r?.status !== 200) return `node ${id} did not list its results`;
        for (const x of JSON.parse(r.body.toString()) as Array<{ result_id: string }>) if (!indexed.has(x.result_id)) missing.push(x.result_id);
      }
      return missing.length ? `${missing.length} missing, e.g. ${missing.slice(0, 5).join(', ')}` : undefined;
    });
    const { rows: idx } = await db.query<{ result_id: string }>('SELECT result_id FROM results');
    const indexedNow = new Set(idx.map((r) => r.result_id));
    const vanished = [...seenResults].filter((id) => !indexedNow.has(id));
    if (vanished.length) problems.push(`results a client read that are gone: ${vanished.slice(0, 5).join(', ')}`);
    await settle('no live reservation', async () => {
      const { rows } = await db.query<{ live: string; stale: string }>(
        `SELECT (SELECT count(*) FROM reservations WHERE ended_at IS NULL) AS live,
                (SELECT count(*) FROM reservation_nodes rn JOIN reservations r USING (reservation_id) WHERE rn.active AND r.ended_at IS NOT NULL) AS stale`,
      );
      return Number(rows[0]!.live) || Number(rows[0]!.stale) ? `${rows[0]!.live} live, ${rows[0]!.stale} ended but still holding a node` : undefined;
    });
    // Node events are delivered at least once and stored once: no job event twice in the outbox (whoever made it:
    // the node, its restart's recovery, or the portal's fault rule, whose later node events are dropped).
    const { rows: twice } = await db.query<{ job_uid: string; type: string; result_id: string | null; n: string }>(
      `SELECT data->>'job_uid' AS job_uid, type, data->>'result_id' AS result_id, count(*) AS n
         FROM events_outbox WHERE type IN ('job.started', 'run.started', 'run.finished', 'job.exited')
        GROUP BY 1, 2, 3 HAVING count(*) > 1`,
    );
    if (twice.length) problems.push(`node events twice in the outbox: ${twice.slice(0, 5).map((r) => `${r.type} ${r.result_id ?? r.job_uid} x${r.n}`).join(', ')}`);
    // Jobs their node ended (no end_reason) and whose job.exited is in the outbox: with it, one run.finished per result.
    const { rows: outboxJobs } = await db.query<{ job_uid: string; total: number; finished: string; exited: string; started: string }>(
      `SELECT j.job_uid, (j.job->'result_counts'->>'total')::int AS total,
              count(*) FILTER (WHERE o.type = 'run.finished') AS finished, count(*) FILTER (WHERE o.type = 'job.exited') AS exited,
              count(*) FILTER (WHERE o.type = 'job.started') AS started
         FROM jobs j JOIN events_outbox o ON o.data->>'job_uid' = j.job_uid AND o.node_id = j.node_id
        WHERE j.state = 'exited' AND j.end_reason IS NULL GROUP BY j.job_uid, j.job`,
    );
    const complete = outboxJobs.filter((r) => Number(r.started) === 1 && Number(r.exited) === 1 && Number(r.finished) === r.total).length;
    const fiveHundreds = [...stats.statuses].filter(([k]) => / 500$/.test(k));
    if (fiveHundreds.length) problems.push(`answers of 500: ${fiveHundreds.map(([k, v]) => `${k} x${v}`).join(', ')}`);

    // ---------------------------------------------------------------- report
    const { rows: totals } = await db.query<{ jobs: string; results: string; errors: string; offline: string }>(
      `SELECT (SELECT count(*) FROM jobs) AS jobs, (SELECT count(*) FROM results) AS results,
              (SELECT count(*) FROM results WHERE result = 'error') AS errors,
              (SELECT count(*) FROM results WHERE failure_reason LIKE '%went offline%') AS offline`,
    );
    console.log('');
    console.log(
      `farm soak: ${MINUTES} min, ${CLIENTS} clients, 3 nodes; ${faults.nodeKills} node SIGKILLs, ${faults.portalRestarts} portal restarts, ` +
        `${faults.pgRestarts} PostgreSQL restarts, ${faults.nodePauses} node pauses (SIGSTOP past the heartbeat limit, SIGCONT), ` +
        `${exitsOnTheirOwn} portal exits on their own (started again); load average ${os.loadavg().map((l) => l.toFixed(2)).join(' ')}`,
    );
    console.log(`  client iterations ${stats.iterations}, completed ${stats.completed}, reservations ${stats.reserved}, jobs started ${started.size}`);
    console.log(`  artifacts downloaded and md5-checked ${stats.artifacts} (${(stats.artifactBytes / 2 ** 20).toFixed(1)} MiB), results.xml ${stats.xml}`);
    console.log(`  farm index: ${totals[0]!.jobs} jobs, ${totals[0]!.results} results (${totals[0]!.errors} errors, ${totals[0]!.offline} of them runs lost with a killed node)`);
    console.log(`  answers: ${[...stats.statuses].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}: ${v}`).join('; ')}`);
    const answered = [...stats.statuses].filter(([k]) => /^[a-z_/.]+ \d{3}$/.test(k));
    const total = answered.reduce((n, [, v]) => n + v, 0);
    const n503 = answered.filter(([k]) => k.endsWith(' 503')).reduce((n, [, v]) => n + v, 0);
    console.log(`  503 answers: ${n503} of ${total} (${total ? ((100 * n503) / total).toFixed(2) : '0'} %)`);
    const errors = [...stats.statuses].filter(([k]) => k.startsWith('error ') || (/ \d{3}$/.test(k) && !/ (200|202|204)$/.test(k)) || / failed$/.test(k));
    console.log(`  errors by kind (not 200/202/204, or no answer): ${errors.length ? errors.sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}: ${v}`).join('; ') : 'none'}`);
    console.log('');
    console.log('  time s  portal  gen  RSS MiB  fds  heap MiB (after GC)  CPU %  pg conns  jobs  results  nodes at');
    for (const s of samples) {
      console.log(
        `  ${s.t.toFixed(0).padStart(6)}  ${s.portal.padStart(6)}  ${String(s.generation).padStart(3)}  ${s.rssMb.toFixed(1).padStart(7)}  ${String(s.fds).padStart(3)}  ${s.heapMb.toFixed(1).padStart(19)}  ` +
          `${(Number.isNaN(s.cpuPct) ? '-' : s.cpuPct.toFixed(0)).padStart(5)}  ${String(s.pgConnections).padStart(8)}  ${String(s.jobs).padStart(4)}  ${String(s.results).padStart(7)}  ${s.owners}`,
      );
    }
    for (const slot of slots) {
      const last = samples.filter((s) => s.portal === slot.name && s.generation === slot.generation);
      if (last.length < 2) continue;
      const a = last[0]!;
      const b = last[last.length - 1]!;
      const cpu = last.filter((s) => !Number.isNaN(s.cpuPct));
      console.log(
        `  ${slot.name}, last generation (${(b.t - a.t).toFixed(0)} s, no faults): RSS ${a.rssMb.toFixed(1)} -> ${b.rssMb.toFixed(1)} MiB, heap ${a.heapMb.toFixed(1)} -> ${b.heapMb.toFixed(1)} MiB, ` +
          `fds ${a.fds} -> ${b.fds}, pg connections ${a.pgConnections} -> ${b.pgConnections}, CPU ${cpu.length ? (cpu.reduce((x, s) => x + s.cpuPct, 0) / cpu.length).toFixed(0) : '-'} % of a core on average`,
      );
    }
    const { rows: ended } = await db.query<{ n: string }>('SELECT count(*) AS n FROM jobs WHERE end_reason IS NOT NULL');
    console.log(
      `  outbox: ${complete} of ${outboxJobs.length} jobs their node ended have job.started, job.exited and one run.finished per counted run, once each; job events stored twice: ${twice.length}`,
    );
    console.log(`  jobs started ${started.size}: each recorded once (jobs rows ${[...started].filter((u) => knownSet.has(u)).length}, lost ${lostJobs.length}); job events stored twice: ${twice.length}`);
    if (haproxy) {
      const { rows: where } = await db.query<{ owner: string | null; n: string; epochs: string }>(`SELECT owner_replica AS owner, count(*) AS n, sum(owner_epoch) AS epochs FROM nodes GROUP BY 1 ORDER BY 1`);
      console.log(`  nodes at the end: ${where.map((r) => `${r.owner ?? 'none'}: ${r.n}`).join(', ')}; changes of owner (owner_epoch, summed): ${where.reduce((n, r) => n + Number(r.epochs), 0)}`);
      console.log(`  HAProxy sessions per replica: ${JSON.stringify(await haproxy.sent())}`);
    }
    console.log(`  jobs the portal ended (node offline): ${ended[0]!.n}; of them with more results indexed than the portal's result_counts: ${undercounted.length ? undercounted.join(', ') : 'none'}`);
    console.log('');
    console.log(problems.length ? `INVARIANTS FAILED (${problems.length}):` : 'invariants: every job ended; every exited job\'s results indexed exactly once; every node result indexed; no result lost; no live reservation; no job event twice in the outbox; every paused node back online; no 500');
    for (const p of problems) console.log(`  PROBLEM ${p}`);
    process.exitCode = problems.length ? 1 : 0;
  } finally {
    closing = true;
    await Promise.all([...procs].map((p) => p.stop(10_000)));
    haproxy?.stop();
    await db.end();
    await cluster.stop();
    await pack.cleanup();
    await rm(work, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exitCode = 2;
});
