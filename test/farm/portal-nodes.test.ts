/**
 * End to end: a real portal (startPortal, throwaway PostgreSQL) and a real
 * `farmhand serve` node (startTestDaemon, testsrc capture) connected to it
 * through src/farm/link/. The v2 calls go to the portal only.
 */
import { mkdtemp, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { expect } from 'chai';
import { startPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startTestPortal, type TestPortal } from '../helpers/farmPortal.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'farmhand-e2e';
const WAIT = { timeoutMs: 30_000 };

describe('farm portal with a real farmhand serve node', function () {
  this.timeout(120_000);
  let cluster: TestPostgres;
  let t: TestPortal;
  let d: TestDaemon | undefined;
  let token: string;

  const call = (p: string, init: RequestInit = {}) =>
    fetch(`${t.portal.url}${p}`, { ...init, headers: { Authorization: `token ${token}`, ...(init.body ? { 'Content-Type': 'application/json' } : {}) } });

  before(async function () {
    this.timeout(180_000);
    cluster = await startPostgres();
    t = await startTestPortal(cluster, { heartbeat_secs: 1 });
    token = t.tokenFor('carol');
    const dir = await mkdtemp(path.join(os.tmpdir(), 'farm-cred-'));
    const file = path.join(dir, 'credential');
    await writeFile(file, `${await t.registerNode(NODE)}\n`);
    d = await startTestDaemon({ config: { node_id: NODE, portal: { url: t.portal.url, node_credential_file: file } } });
    await waitFor(() => t.portal.hub.link(NODE)?.online, { what: 'the node connected to the portal', ...WAIT });
  });
  after(async () => {
    await d?.stop();
    await t?.stop();
    await cluster?.stop();
  });

  it('lists the node online, with its URL on the portal, and forwards its screenshot', async () => {
    const node = await waitFor(
      async () => {
        const list = (await (await call('/api/v2/nodes')).json()) as Record<string, unknown>[];
        return list.find((n) => n.node_id === NODE && n.online === true);
      },
      { what: 'the node online in the portal list', ...WAIT },
    );
    expect(node).to.deep.include({ node_url: `${t.portal.url}/api/v2/nodes/${NODE}`, external_ip_address: '127.0.0.1', available: true });
    const png = await call(`/api/v2/nodes/${NODE}/screenshot.png`);
    expect(png.status).to.equal(200);
    expect(png.headers.get('content-type')).to.equal('image/png');
    expect(Buffer.from(await png.arrayBuffer()).subarray(1, 4).toString()).to.equal('PNG');
  });

  it('runs a job through the portal: links on the portal, await_completion, the jobs table kept from the node events', async () => {
    const r = await call('/api/v2/run_tests', {
      method: 'POST',
      body: JSON.stringify({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/basic.py::test_pass'], shuffle: false, tags: {} }),
    });
    const job = (await r.json()) as { job_uid: string; job_url: string };
    expect(r.status, JSON.stringify(job)).to.equal(200);
    expect(job.job_url).to.equal(`${t.portal.url}/api/v2/jobs${job.job_uid}`);
    const done = await waitFor(
      async () => {
        const a = await call(`/api/v2/jobs${job.job_uid}/await_completion`);
        return a.status === 200 ? ((await a.json()) as { status: string; result_counts: { pass: number } }) : undefined;
      },
      { what: 'the job to end', timeoutMs: 90_000 },
    );
    expect(done.status).to.equal('exited');
    expect(done.result_counts.pass).to.equal(1);
    const row = await waitFor(async () => {
      const j = await t.portal.jobs.get(job.job_uid);
      return j?.state === 'exited' ? j : undefined;
    }, WAIT);
    expect(row).to.deep.include({ node_id: NODE, username: 'carol', end_reason: null });
    expect(row.job.result_counts).to.deep.include({ pass: 1, total: 1 });
  });
});
