/**
 * The fault the issue names first, with real processes: a `farmhand serve`
 * node (its own process, connected to a real portal) is SIGKILLed mid-job.
 * The portal marks it offline, ends the job, records the run in flight as an
 * error saying why; the node, restarted, reconnects and nothing of the
 * portal's is overwritten or duplicated.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startTestPortal, type TestPortal } from '../helpers/farmPortal.js';
import { testConfig } from '../helpers/daemon.js';
import { makeTestPack } from '../fixtures/testPack.js';
import { waitFor } from '../helpers/wait.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const NODE = 'farmhand-kill';

describe('farm fault: a node SIGKILLed mid-job', function () {
  this.timeout(180_000);
  let cluster: TestPostgres;
  let t: TestPortal;
  let work: string;
  let configFile: string;
  let logFile: string;
  const children: ChildProcess[] = [];

  const startNode = () => {
    const fd = openSync(logFile, 'a');
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'serve', '--config', configFile], {
      cwd: ROOT,
      detached: true,
      stdio: ['ignore', fd, fd],
    });
    closeSync(fd);
    children.push(child);
    return child;
  };
  const killGroup = (c: ChildProcess) => {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  const call = (token: string, p: string, body?: unknown) =>
    fetch(`${t.portal.url}${p}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { Authorization: `token ${token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });

  before(async function () {
    this.timeout(180_000);
    cluster = await startPostgres();
    t = await startTestPortal(cluster, { heartbeat_secs: 1 });
    work = await mkdtemp(path.join(os.tmpdir(), 'farm-fault-'));
    const credFile = path.join(work, 'credential');
    await writeFile(credFile, `${await t.registerNode(NODE)}\n`);
    const pack = await makeTestPack();
    const cfg = testConfig(pack.dir, path.join(work, 'data'), { node_id: NODE, portal: { url: t.portal.url, node_credential_file: credFile }, log_level: 'info' });
    configFile = path.join(work, 'farmhand.json');
    logFile = path.join(work, 'node.log');
    await writeFile(configFile, JSON.stringify(cfg));
  });
  after(async () => {
    for (const c of children) killGroup(c);
    await t?.stop();
    await cluster?.stop();
  });

  it('offline within the heartbeat limit, the job ended, the lost run an error saying why; the restarted node duplicates nothing', async () => {
    const node = startNode();
    const log = () => readFileSync(logFile, 'utf8').slice(-3000);
    await waitFor(() => t.portal.hub.link(NODE)?.online, { what: 'the node connected', timeoutMs: 60_000 }).catch((e: Error) => {
      throw new Error(`${e.message}\n${log()}`);
    });
    const token = t.tokenFor('erin');
    const r = await call(token, '/api/v2/run_tests', { node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'], shuffle: false, tags: {} });
    const job = (await r.json()) as { job_uid: string };
    expect(r.status, JSON.stringify(job)).to.equal(200);
    const run = await waitFor(
      async () => (await t.portal.pool.query<{ current_run: { result_id: string } | null }>('SELECT current_run FROM jobs WHERE job_uid = $1', [job.job_uid])).rows[0]?.current_run,
      { what: 'the run in flight known to the portal', timeoutMs: 60_000 },
    );

    killGroup(node);
    const result = await waitFor(() => t.portal.results.get(run.result_id), { what: 'the lost run recorded', timeoutMs: 30_000 });
    expect(result).to.deep.include({ result: 'error', failure_reason: `node ${NODE} went offline: connection closed`, username: 'erin', job_uid: job.job_uid });
    expect(t.portal.hub.link(NODE)).to.deep.include({ online: false, offlineReason: 'connection closed' });
    const ended = (await t.portal.jobs.get(job.job_uid))!;
    expect(ended).to.deep.include({ state: 'exited', end_reason: 'connection closed' });
    const offline = await call(token, `/api/v2/jobs${job.job_uid}`);
    const v2 = (await offline.json()) as { status: string; job_url: string };
    expect(v2.status).to.equal('exited');
    // v1's Job (the result page's Job link) from PostgreSQL too: the same object, its job_url v1's.
    const v1 = await call(token, `/api/v1/jobs${job.job_uid}`);
    expect(v1.status).to.equal(200);
    expect(await v1.json()).to.deep.equal({ ...v2, job_url: v2.job_url.replace('/api/v2/jobs/', '/api/v1/jobs/') });
    // The job page from the portal's records: why the portal ended the job, and the lost run linked.
    const page = await fetch(`${t.portal.url}/app/jobs${job.job_uid}`, { headers: { Accept: 'text/html' } });
    const html = await page.text();
    expect(page.status, html).to.equal(200);
    expect(html).to.contain(`Node <code>${NODE}</code> is offline`);
    expect(html).to.contain('The portal ended this job: its node went offline (connection closed).');
    expect(html).to.contain(`href="/app/results${run.result_id}"`);
    expect(html).not.to.contain('id="stop-job"');

    // The node comes back (its own restart recovery closes the job and the run on its side).
    startNode();
    await waitFor(() => t.portal.hub.link(NODE)?.online, { what: 'the node back', timeoutMs: 60_000 });
    await t.portal.hub.idle();
    const after = (await t.portal.jobs.get(job.job_uid))!;
    expect(after).to.deep.include({ state: 'exited', end_reason: 'connection closed' });
    expect(after.job.result_counts).to.deep.include({ error: 1, total: 1 });
    const { rows } = await t.portal.pool.query<{ c: string }>('SELECT count(*) AS c FROM results WHERE job_uid = $1', [job.job_uid]);
    expect(Number(rows[0]!.c)).to.equal(1);
  });
});
