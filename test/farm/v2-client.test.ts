/**
 * The command-line v2 client (scripts/farmhand-v2-client.py, standard-library
 * Python as CI systems run it) against a real portal with three real nodes,
 * naming each node in turn, and against a single node: the same client, the
 * same files written, the same exit statuses.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { startReplicaFarm } from '../helpers/replicaFarm.js';
import { waitFor } from '../helpers/wait.js';
import { makeTestPack, STANDARD_FILES, type TestPackRepo } from '../fixtures/testPack.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const CLIENT = path.join(ROOT, 'scripts/farmhand-v2-client.py');
// Debian's interpreter, standard library only (another python3 may come first on PATH).
const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';
const NODES = ['rack1-a', 'rack1-b', 'rack2-a'];
const CASES = ['tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/config_tags.py::test_tags'];

interface Ran {
  code: number;
  stdout: string;
  stderr: string;
}

/** Run the client in `cwd` as a CI job does; never throws on a non-zero exit. */
function client(cwd: string, args: string[], env: Record<string, string> = {}): Promise<Ran> {
  return new Promise((resolve) => {
    execFile(PYTHON, [CLIENT, ...args], { cwd, env: { PATH: process.env.PATH ?? '', ...env }, timeout: 280_000 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      resolve({ code, stdout, stderr });
    });
  });
}
/** What the flows need of a farm: a single portal (startTestFarm) or replicas behind HAProxy (startReplicaFarm). */
type ClientFarm = Pick<TestFarm, 'url' | 'db' | 'tokenFor' | 'addNode' | 'stop'>;

const FARMS: { title: string; start: () => Promise<ClientFarm>; joined?: (f: ClientFarm) => Promise<void> }[] = [
  // Heartbeats every 5 s (the default): a node in this loaded test process must not miss 3 of them.
  { title: 'against a portal with three nodes', start: () => startTestFarm({ portal: { heartbeat_secs: 5 } }) },
  // Issue 19: stbt_rig's flows through 3 replicas behind HAProxy (roundrobin): the nodes join through it, so to
  // different replicas, and every request of the client lands on the next replica, which proxies it to the node's.
  {
    title: 'against 3 portal replicas behind HAProxy (roundrobin) with three nodes',
    start: async () => {
      const r = await startReplicaFarm(3, { portal: { heartbeat_secs: 5 } });
      return { url: r.url, db: r.db, tokenFor: (u) => r.tokenFor(u), addNode: (id, o) => r.addNode(id, o), stop: () => r.stop() };
    },
    async joined(f) {
      const { rows } = await f.db.query<{ node_id: string; owner_replica: string }>('SELECT node_id, owner_replica FROM nodes ORDER BY node_id');
      console.log(`      the nodes' replicas: ${rows.map((x) => `${x.node_id} on ${x.owner_replica}`).join(', ')}`);
    },
  },
];

const said = (r: Ran) => `exit ${r.code}\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`;

/** The jUnit XML's testcases as [classname, name, time]; the suite's timestamp. */
function junit(xml: string) {
  const suite = /<testsuite\b[^>]*\btimestamp="([^"]+)"/.exec(xml);
  const cases = [...xml.matchAll(/<testcase classname="([^"]*)" name="([^"]*)" time="([^"]*)"/g)].map((m) => [m[1]!, m[2]!, m[3]!]);
  return { timestamp: suite?.[1], cases };
}

/**
 * What every server must give the client: a run of CASES (one fails, so exit 1) with the
 * files a CI job keeps, then a second run that skips the artifacts it already has.
 */
async function runAndCheck(base: string[], nodeId: string, work: string): Promise<void> {
  const env = { JENKINS_URL: 'http://jenkins.invalid/', BUILD_ID: '42' };
  const r = await client(work, ['run', ...base, '--node-id', nodeId, '--revision', 'HEAD', '--category', 'nightly', '--tag', 'bamboo.buildPlanName=plan', ...CASES], env);
  expect(r.code, said(r)).to.equal(1);
  expect(r.stdout, said(r)).to.match(new RegExp(`Started job /${nodeId}/`));
  expect(r.stdout, said(r)).to.include('tests/basic.py::test_fail: fail: AssertionError: arithmetic is broken');
  expect(r.stdout, said(r)).to.include('tests/basic.py::test_pass: pass');

  // jUnit as the original portal writes it: classname the file, name the function, time in seconds.
  const xml = junit(await readFile(path.join(work, 'stbt-results.xml'), 'utf8'));
  expect(xml.timestamp).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00$/);
  expect(xml.cases.map(([c, n]) => `${c}::${n}`).sort()).to.deep.equal([...CASES].sort());
  for (const [, , time] of xml.cases) expect(Number(time), time).to.be.a('number').and.not.NaN;

  // The test's own file (the Jenkins tag reached the test), the tool's files, and the log.
  const tagsDir = path.join(work, 'stbt-artifacts/tests/config_tags.py/test_tags');
  expect(await readFile(path.join(tagsDir, 'tag.txt'), 'utf8')).to.equal('42 vstb fallback');
  const log = await readFile(path.join(tagsDir, 'stbt.log'), 'utf8');
  expect(log.split('\n')[0]).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d/);
  expect(await readFile(path.join(work, 'stbt-artifacts/tests/basic.py/test_pass/stdout.log'), 'utf8')).to.include('hello from test_pass');
  const first = await stat(path.join(tagsDir, 'tag.txt'));

  // Again: files whose size and md5 match the listing are not downloaded again.
  const again = await client(work, ['run', ...base, '--node-id', nodeId, ...CASES], env);
  expect(again.code, said(again)).to.equal(1);
  const skipped = /(\d+) downloaded, (\d+) unchanged \(skipped\)/.exec(again.stdout);
  expect(skipped, said(again)).to.not.equal(null);
  expect(Number(skipped![2])).to.be.at.least(2);
  expect((await stat(path.join(tagsDir, 'tag.txt'))).mtimeMs).to.equal(first.mtimeMs);
}

/** A 4xx ends the client with exit 3 and the server's message; nothing is retried. */
async function refusals(base: string[], nodeId: string, work: string): Promise<void> {
  const bad = await client(work, ['run', ...base, '--node-id', nodeId, '--category', 'refs/snapshots/me', CASES[0]!]);
  expect(bad.code, said(bad)).to.equal(3);
  expect(bad.stderr).to.match(/POST \S+\/api\/v2\/run_tests: HTTP 400: .*category.*"\/".*\(invalid_request\)/);
  const unknown = await client(work, ['run', ...base, '--node-id', 'no-such-node', CASES[0]!]);
  expect(unknown.code, said(unknown)).to.equal(3);
  expect(unknown.stderr).to.match(/HTTP 404: .*no-such-node/);
  const forbidden = await client(work, ['user', '--portal', base[1]!, '--token-file', path.join(work, 'bad-token')]);
  expect(forbidden.code, said(forbidden)).to.equal(3);
  expect(forbidden.stderr).to.match(/GET \S+\/api\/v2\/user: HTTP 403: /);
}

describe('the command-line v2 client (scripts/farmhand-v2-client.py)', function () {
  // Two client runs per test, each a whole CI job with its uploads: on a loaded 2-core machine one
  // test took 235 s. Generous, not a speed target.
  this.timeout(600_000);

  for (const kind of FARMS) describe(kind.title, () => {
    let farm: ClientFarm;
    let pack: TestPackRepo;
    let work: string;
    let base: string[];
    let token: string;

    before(async function () {
      this.timeout(300_000);
      // The example pack's vstb remote (with key codes), so a press can be sent: rack2-a has the virtual IR blaster.
      const remote = await readFile(path.join(ROOT, 'examples/test-pack/config/remote-control/vstb.lircd.conf'), 'utf8');
      pack = await makeTestPack({ ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': remote });
      // Heartbeats every 5 s (the default): a node in this loaded test process must not miss 3 of them.
      farm = await kind.start();
      for (const id of NODES) await farm.addNode(id, { pack, ...(id === 'rack2-a' && { config: { ir: { uri: 'virtual:' } } }) });
      await kind.joined?.(farm);
      token = await farm.tokenFor('ci');
      work = await mkdtemp(path.join(os.tmpdir(), 'farmhand-v2-client-'));
      await writeFile(path.join(work, 'token'), `${token}\n`);
      await writeFile(path.join(work, 'bad-token'), 'not-a-token\n');
      base = ['--portal', farm.url, '--token-file', path.join(work, 'token')];
    });
    after(async () => {
      await farm?.stop();
      await pack?.cleanup();
      if (work) await rm(work, { recursive: true, force: true });
    });

    it('GET /api/v2/user: the login of the token', async () => {
      const r = await client(work, ['user', ...base]);
      expect(r.code, said(r)).to.equal(0);
      expect(r.stdout).to.equal('ci\n');
    });

    for (const nodeId of NODES) {
      it(`run --node-id ${nodeId}: the job runs there; stbt-results.xml, artifacts and stbt.log written; a second run skips unchanged artifacts`, async () => {
        const dir = path.join(work, nodeId);
        await rm(dir, { recursive: true, force: true });
        await mkdir(dir);
        await runAndCheck(base, nodeId, dir);
        // The run happened on that node and no other: its results carry its id.
        const { rows } = await farm.db.query<{ c: string }>("SELECT count(*) AS c FROM results WHERE job_uid LIKE $1 AND username = 'ci'", [`/${nodeId}/%`]);
        expect(Number(rows[0]!.c)).to.equal(2 * CASES.length);
      });
    }

    it('--force on a busy node: the node\'s job is stopped and the tests run; without --force, exit 3 saying so', async () => {
      const busy = await fetch(`${farm.url}/api/v2/run_tests`, {
        method: 'POST',
        headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' },
        body: JSON.stringify({ node_id: 'rack1-b', test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'], shuffle: false, tags: {} }),
      });
      const hung = (await busy.json()) as { job_uid: string };
      expect(busy.status, JSON.stringify(hung)).to.equal(200);
      const refused = await client(work, ['run', ...base, '--node-id', 'rack1-b', '--artifacts-dir', '', '--junit-xml', '', CASES[0]!]);
      expect(refused.code, said(refused)).to.equal(3);
      expect(refused.stderr).to.include('node rack1-b is busy').and.include('--force');
      const forced = await client(work, ['run', ...base, '--node-id', 'rack1-b', '--force', '--artifacts-dir', '', '--junit-xml', '', CASES[0]!]);
      expect(forced.code, said(forced)).to.equal(0);
      expect(forced.stdout).to.include(`Stopping job ${hung.job_uid}`).and.include('tests/basic.py::test_pass: pass');
      const old = await (await fetch(`${farm.url}/api/v2/jobs${hung.job_uid}`, { headers: { Authorization: `token ${token}` } })).json();
      expect(old).to.include({ status: 'exited' });
    });

    it('its job stopped before its last test case (by someone else): the client reports the run there is at once, waiting for no result that never comes', async () => {
      // An hour: a client waiting for result_counts.total results runs into the test's limit instead of passing late.
      const ran = client(work, ['run', ...base, '--node-id', 'rack1-a', '--results-wait-secs', '3600', '--artifacts-dir', '', '--junit-xml', '', 'tests/hang.py::test_hang', CASES[0]!]);
      const { rows } = await waitFor(
        async () => {
          const r = await farm.db.query<{ job_uid: string }>("SELECT job_uid FROM jobs WHERE node_id = 'rack1-a' AND state = 'running' AND current_run IS NOT NULL");
          return r.rowCount === 1 ? r : undefined;
        },
        { what: "the client's job hanging in its first test case", timeoutMs: 120_000 },
      );
      const stop = await fetch(`${farm.url}/api/v2/jobs${rows[0]!.job_uid}/stop`, { method: 'POST', headers: { Authorization: `token ${token}` } });
      expect(stop.status).to.equal(200);
      const r = await ran;
      expect(r.code, said(r)).to.equal(1);
      expect(r.stdout, said(r)).to.match(/tests\/hang\.py::test_hang: (fail|error)/);
      expect(r.stdout).to.not.include('test_pass');
      expect(r.stderr, said(r)).to.not.include('results are listed');
    });

    it('a 4xx ends the client with exit 3 and the error body\'s message', async () => {
      await refusals(base, 'rack2-a', work);
    });

    it('press: POST /api/v2/nodes/<id>/press reaches the node named (its refusals printed as any 4xx)', async () => {
      const ok = await client(work, ['press', ...base, '--node-id', 'rack2-a', 'KEY_OK']);
      expect(ok.code, said(ok)).to.equal(0);
      expect(ok.stdout).to.equal('Pressed KEY_OK on rack2-a\n');
      const r = await client(work, ['press', ...base, '--node-id', 'rack2-a', 'KEY_NO_SUCH']);
      expect(r.code, said(r)).to.equal(3);
      expect(r.stderr, said(r)).to.match(/POST \S+\/api\/v2\/nodes\/rack2-a\/press: HTTP 404: .*KEY_NO_SUCH/);
      // rack1-a has no IR blaster: its own answer comes back through the portal.
      const none = await client(work, ['press', ...base, '--node-id', 'rack1-a', 'KEY_OK']);
      expect(none.code, said(none)).to.equal(3);
      expect(none.stderr, said(none)).to.match(/HTTP 503: no IR blaster configured \(device_unavailable\)/);
    });
  });

  describe('against a single node (no portal)', () => {
    let d: TestDaemon;
    let work: string;
    let base: string[];

    before(async function () {
      this.timeout(120_000);
      d = await startTestDaemon();
      const { token } = await new TokenStore(tokensFile(d.dataDir)).create('ci');
      work = await mkdtemp(path.join(os.tmpdir(), 'farmhand-v2-client-'));
      await writeFile(path.join(work, 'token'), `${token}\n`);
      await writeFile(path.join(work, 'bad-token'), 'not-a-token\n');
      base = ['--portal', d.url, '--token-file', path.join(work, 'token')];
      await waitFor(async () => (await client(work, ['user', ...base])).code === 0, { what: 'the node to accept the new token', timeoutMs: 30_000 });
    });
    after(async () => {
      await d?.stop();
      if (work) await rm(work, { recursive: true, force: true });
    });

    it('the same run, files and second run as through the portal', async () => {
      await runAndCheck(base, 'farmhand-test', work);
    });

    it('the same refusals', async () => {
      await refusals(base, 'farmhand-test', work);
    });
  });
});
