/**
 * Secure by default (issue 31): a farm started the way scripts/farm-demo.sh starts one (`farmhand portal` on a
 * throwaway PostgreSQL, `farmhand farm node add` writing the credential with umask 077, `farmhand serve` as root
 * with no `runner.run_tests_as`, a test pack in a real git repository) runs its tests as `farmhand-test`, and a
 * hostile test (test/fixtures/reattackPack.ts) fails at each of its attempts to get the node's credential and act
 * as the node: the credential file and its folder, the environment, the daemon's /proc, the data directory, what
 * the run hands it, the portal's database, an artifact uploaded and a result recorded as the node, the node's own
 * server believing it is the portal, the node's link opened and a spoofed node.state changing the node's page.
 * The positive control: the same script on a node whose config says `"run_tests_as": false` gets the credential,
 * opens the link and changes its node's page; that node warns at start and its row on the portal's page says so.
 */
import { expect } from 'chai';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { chmod, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { PROTOCOL_VERSION } from '../../src/farm/protocol.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { ATTEMPTS, reattackFiles } from '../fixtures/reattackPack.js';
import { connectionString } from '../helpers/farmPortal.js';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { exitOf, freePort, killGroup, PROCESS_WAIT } from '../helpers/processFarm.js';
import { holdSystemUser } from '../helpers/testUser.js';
import { waitFor } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const MAIN = path.join(ROOT, 'src/main.ts');
const TEST_USER = 'farmhand-test';
const SPOOFED = 'Spoofed by a test';
const run = promisify(execFile);

interface Attack {
  attempts: Record<string, { ok: boolean; detail: string }>;
  found: number;
  uid: number;
}

interface Node {
  id: string;
  url: string;
  log: string;
  child: ChildProcess;
  pack: TestPackRepo;
}

describe('a test cannot get its node\'s credential nor act as the node (tests as farmhand-test by default)', function () {
  this.timeout(240_000);
  // One file at a time runs tests as farmhand-test: a daemon ends that user's processes (test/helpers/testUser.ts).
  let releaseUser: (() => void) | undefined;
  before(async function () {
    this.timeout(11 * 60_000);
    releaseUser = await holdSystemUser(TEST_USER);
  });
  let cluster: TestPostgres;
  let work: string;
  let database: string;
  let portal: ChildProcess | undefined;
  let portalUrl: string;
  let token: string;
  const nodes: Node[] = [];

  const farm = async (...args: string[]) => (await run(process.execPath, ['--import', 'tsx', MAIN, 'farm', '--database', database, ...args], { cwd: ROOT })).stdout.trim();
  const api = async (p: string, init: RequestInit = {}) => {
    const res = await fetch(portalUrl + p, { ...init, headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json', ...init.headers } });
    const text = await res.text();
    return { status: res.status, text, json: () => JSON.parse(text) as Record<string, unknown> };
  };

  before(async () => {
    cluster = await startPostgres();
    database = connectionString(cluster);
    // As the demo's folder under a checkout: anyone may pass through; the credential files are the node's alone.
    work = await mkdtemp(path.join(os.tmpdir(), 'farmhand-reattack-'));
    await chmod(work, 0o755);
    await mkdir(path.join(work, 'nodes'), { mode: 0o755 });
    await farm('user', 'add', 'erin');
    token = await farm('token', 'create', 'erin');
    const port = await freePort();
    portalUrl = `http://127.0.0.1:${port}`;
    const portalConfig = path.join(work, 'portal.json');
    await writeFile(portalConfig, JSON.stringify({ listen: `127.0.0.1:${port}`, public_url: portalUrl, database, storage_dir: path.join(work, 'storage'), heartbeat_secs: 1, flush_secs: 1 }));
    const fd = openSync(path.join(work, 'portal.log'), 'a');
    portal = spawn(process.execPath, ['--import', 'tsx', MAIN, 'portal', '--config', portalConfig], { cwd: ROOT, detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    await waitFor(async () => (await api('/api/v2/user').catch(() => undefined))?.status === 200, { what: 'the portal to answer', ...PROCESS_WAIT });
  });

  after(async () => {
    for (const n of nodes) {
      killGroup(n.child);
      await exitOf(n.child);
      await n.pack.cleanup();
    }
    if (portal) {
      killGroup(portal);
      await exitOf(portal);
    }
    await cluster?.stop();
    if (work) await rm(work, { recursive: true, force: true });
  });
  after(() => releaseUser?.());

  /** Register `id`, write its credential (umask 077) and config as farm-demo.sh does, and start `farmhand serve`. */
  async function startNode(id: string, runner: Record<string, unknown>): Promise<Node> {
    const credentialFile = path.join(work, 'nodes', `${id}.credential`);
    await writeFile(credentialFile, `${await farm('node', 'add', id)}\n`, { mode: 0o600 });
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const pack = await makeTestPack(
      reattackFiles({ nodeId: id, credentialFile, portalUrl, nodeUrl: url, databaseHost: cluster.host, databasePort: cluster.port, protocol: PROTOCOL_VERSION, spoofedName: SPOOFED }),
    );
    const config = path.join(work, 'nodes', `${id}.json`);
    const settings = { node_id: id, listen: `127.0.0.1:${port}`, data_dir: path.join(work, 'nodes', id), test_pack: { url: pack.dir }, capture: { uri: 'none:' }, ir: { uri: 'virtual:' }, runner, portal: { url: portalUrl, node_credential_file: credentialFile } };
    await writeFile(config, JSON.stringify(settings), { mode: 0o644 });
    const log = path.join(work, `${id}.log`);
    const fd = openSync(log, 'a');
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN, 'serve', '--config', config], { cwd: ROOT, detached: true, stdio: ['ignore', fd, fd] });
    closeSync(fd);
    const node = { id, url, log, child, pack };
    nodes.push(node);
    await waitFor(() => child.exitCode === null && /listening on http/.test(logOf(node)), { what: `node ${id} to listen`, ...PROCESS_WAIT }).catch((e: Error) => {
      throw new Error(`${e.message}\n${logOf(node).slice(-3000)}`);
    });
    // Connected, and its own state (node.state, with who its tests run as) on the portal: the page reads it. The
    // registered node's row is there from the start, and its kept Node object has no licence_expiry until its state comes.
    await waitFor(
      async () => {
        // The list, not GET /api/v2/nodes/<id>: that one asks a connected node afresh, so it has licence_expiry before
        // the node's state reached the portal; the list, like the page, shows the state the portal keeps.
        const n = ((await api('/api/v2/nodes')).json() as unknown as Record<string, unknown>[]).find((x) => x.node_id === id);
        return (n?.farm as { connected?: boolean } | undefined)?.connected && n!.licence_expiry != null;
      },
      { what: `node ${id}'s state on the portal`, ...PROCESS_WAIT },
    );
    return node;
  }
  const logOf = (n: Node) => readFileSync(n.log, 'utf8');
  /** The node's row of the portal's front page (docs/farm.md, "Web pages on the portal"). */
  const frontRow = async (id: string): Promise<string> => {
    const html = (await api('/', { headers: { Accept: 'text/html' } })).text;
    const start = html.indexOf(`id="node-${id}"`);
    return start < 0 ? '' : html.slice(start, html.indexOf('</tr>', start));
  };

  /** Run the attack on `n` through the portal, as CI would; its attack.json from the node. */
  async function attack(n: Node): Promise<Attack> {
    const res = await api('/api/v2/run_tests', { method: 'POST', body: JSON.stringify({ node_id: n.id, test_pack_revision: 'main', test_cases: ['tests/attack.py::test_attack'] }) });
    expect(res.status, res.text).to.equal(200);
    const job = res.json().job_uid as string;
    await waitFor(async () => ((await (await fetch(`${n.url}/api/v1/jobs${job}`)).json()) as { status: string }).status === 'exited', { what: `the attack on ${n.id} to end`, timeoutMs: 120_000 });
    const [r] = (await (await fetch(`${n.url}/api/v1/jobs${job}/results`)).json()) as { result_id: string; result: string; failure_reason: string | null }[];
    const file = await fetch(`${n.url}/api/v1/result${r!.result_id}/artifacts/attack.json`);
    expect(file.status, `attack.json of a run that ended ${r!.result}: ${r!.failure_reason}`).to.equal(200);
    return (await file.json()) as Attack;
  }

  it('by default (a root daemon, no run_tests_as) tests run as farmhand-test, and each of the attempts fails', async () => {
    const node = await startNode('victim', { kill_grace_secs: 1 });
    expect(logOf(node)).to.include('tests run as another user').and.not.include('any test can read');
    expect(await frontRow(node.id)).to.not.include('node-test-user');
    const { attempts, found, uid } = await attack(node);
    expect(uid, 'the test ran as farmhand-test').to.equal(Number((await run('id', ['-u', TEST_USER])).stdout.trim()));
    expect(Object.keys(attempts)).to.have.members([...ATTEMPTS]);
    expect(ATTEMPTS.length).to.be.at.least(10);
    for (const name of ATTEMPTS) expect(attempts[name]!.ok, `${name}: ${attempts[name]!.detail}`).to.equal(false);
    expect(found, 'credentials found').to.equal(0);
    // Refused, not missed: the file and the database were there to be denied, the daemon found, the link answered 401.
    expect(attempts.credential_file!.detail).to.equal('EACCES');
    expect(attempts.database!.detail).to.equal('EACCES');
    expect(attempts.daemon_proc!.detail).to.match(/^daemons \[\d+/);
    expect(attempts.open_link!.detail).to.include('401');
    // What the portal shows of the node is still the node's own.
    const shown = (await api(`/api/v2/nodes/${node.id}`)).json();
    expect(shown.friendly_name).to.not.equal(SPOOFED);
    expect((shown.farm as { connected: boolean }).connected, 'the node keeps its link').to.equal(true);
    expect(shown.maintenance, 'the node was not put in maintenance').to.equal(undefined);
  });

  it('the positive control: with "run_tests_as": false the same test reads the credential and acts as the node; the node and its page say so', async () => {
    const node = await startNode('control', { kill_grace_secs: 1, run_tests_as: false });
    expect(logOf(node)).to.match(/tests run as the daemon's own user \(runner.run_tests_as is false\), so any test can read the node's portal credential/);
    expect(await frontRow(node.id)).to.include(`id="test-user-${node.id}"`).and.include('any test can read the node');
    const { attempts, found } = await attack(node);
    expect(found, 'credentials found').to.be.at.least(1);
    for (const name of ['credential_file', 'credential_folder', 'upload_artifact', 'forge_result', 'open_link', 'spoof_node_page']) {
      expect(attempts[name]!.ok, `${name}: ${attempts[name]!.detail}`).to.equal(true);
    }
    await waitFor(async () => (await api(`/api/v2/nodes/${node.id}`)).json().friendly_name === SPOOFED, { what: "the spoofed name on the control's page", timeoutMs: 30_000 });
  });
});
