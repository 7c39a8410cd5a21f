/**
 * The power-cycle endpoint through the farm's portal (docs/power.md, "The power-cycle endpoint"), with real
 * PostgreSQL, a real portal and a real node whose outlet is the virtual box's mains (`power.uri` "virtual:"):
 * - a `manual` user's `POST /api/v2/nodes/<id>/power/cycle` is forwarded to the node: 200, and the box's own log
 *   of its mains shows one switch off, then one switch on; with no body, the outlet's own off_secs (5);
 * - a `read` user: the portal's 403, nothing reaches the node; an unknown node: 404; while a job runs: the node's 409;
 * - the portal's audit trail has `power.cycle` once per request, with `off_secs` (detail), and the node's own
 *   trail has the requests that reached it (via portal), with `off_secs` too;
 * - `GET /app/session` names the reader's role, which the live page's script reads: in Chromium, signed in on the
 *   portal, a `read` user never sees the Power panel (the portal refuses her the live view), a `manual` user sees
 *   it (shown once the session named her role) and power-cycles the box with it.
 */
import { expect } from 'chai';
import type { Browser, Page } from 'playwright-core';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import request from 'supertest';
import { parseAuditQuery } from '../../src/core/audit.js';
import { registerNode } from '../../src/farm/nodeCredentials.js';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { queryAuditDir } from '../../src/storage/auditLog.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { launchBrowser } from '../helpers/browser.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { expectError } from '../helpers/errors.js';
import { startTestFarm, type TestFarm } from '../helpers/farm.js';
import { capturingLogger } from '../helpers/logger.js';
import { waitFor } from '../helpers/wait.js';

const NODE = 'power-n1';
const CYCLE = `/api/v2/nodes/${NODE}/power/cycle`;

interface AuditRow {
  who: string;
  via: string;
  node: string | null;
  outcome: number;
  detail: Record<string, unknown>;
}

describe('power-cycle through the portal', function () {
  this.timeout(240_000);
  let farm: TestFarm;
  let node: TestDaemon;
  let credentials: string;
  let browser: Browser | undefined;
  const t: Record<string, string> = {};
  const log = capturingLogger();
  /** The virtual box's own record of its mains: true on, false off, in order. */
  const mains = () => log.entries.filter((e) => e.msg === 'virtual set-top box: mains power').map((e) => e.obj.on);
  const as = (token: string) => ({
    get: (p: string) => request(farm.url).get(p).set('Authorization', `token ${token}`),
    post: (p: string) => request(farm.url).post(p).set('Authorization', `token ${token}`),
  });
  /** A Chromium page signed in on the portal through its form with `token`, at the node's live view. */
  const signedIn = async (token: string): Promise<Page> => {
    browser ??= await launchBrowser();
    const page = await (await browser.newContext({ viewport: { width: 1400, height: 1000 } })).newPage();
    const live = `/app/nodes/${NODE}/live`;
    await page.goto(`${farm.url}/app/sign-in?next=${encodeURIComponent(live)}`);
    await page.getByLabel('Access token').fill(token);
    await Promise.all([page.waitForURL((u) => u.pathname === live, { timeout: 60_000, waitUntil: 'commit' }), page.getByRole('button', { name: 'Sign in' }).click()]);
    return page;
  };
  const row = (e: AuditRow) => [e.who, e.via, e.node, e.outcome, e.detail.off_secs];

  before(async () => {
    farm = await startTestFarm();
    // The node as farm.addNode starts it, with the test's own logger (the box's mains are read from its log).
    credentials = await mkdtemp(path.join(os.tmpdir(), 'farmhand-power-portal-'));
    const file = path.join(credentials, `${NODE}.credential`);
    await writeFile(file, (await registerNode(farm.db, NODE)) + '\n', { mode: 0o600 });
    node = await startTestDaemon({
      files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF },
      config: {
        node_id: NODE,
        portal: { url: farm.portal.url, node_credential_file: file },
        ir: { uri: 'virtual:' },
        capture: { uri: 'virtual:', width: 320, height: 180 },
        power: { uri: 'virtual:' },
      },
      logger: log,
    });
    farm.nodes.set(NODE, node);
    await waitFor(() => farm.portal.hub.link(NODE)?.online && farm.portal.hub.link(NODE)?.snapshot, { what: `node ${NODE} to join the portal`, timeoutMs: 60_000 });
    for (const [user, role] of [['mia', 'manual'], ['rita', 'read'], ['ada', 'admin']] as const) t[user] = await farm.tokenFor(user, role);
  });
  after(async () => {
    await browser?.close();
    await farm?.stop();
    if (credentials) await rm(credentials, { recursive: true, force: true });
  });

  it('the session names the role the live page reads; the node renders the Power panel hidden, for the portal to show', async () => {
    for (const [user, role] of [['mia', 'manual'], ['rita', 'read']] as const) {
      const s = await as(t[user]!).get('/app/session').set('Accept', 'application/json');
      expect(s.status, s.text).to.equal(200);
      expect(s.body).to.deep.equal({ login: user, csrf: null, role });
    }
    const page = await as(t.mia!).get(`/app/nodes/${NODE}/live`).set('Accept', 'text/html');
    expect(page.status).to.equal(200);
    expect(page.text).to.contain('id="power-cycle"').and.to.match(/id="power-panel"[^>]*data-ask-portal="yes"[^>]*hidden/);
  });

  it('a manual user power-cycles the box through the portal: off, then on; no body: the outlet\'s off_secs', async () => {
    const res = await as(t.mia!).post(CYCLE).send({ off_secs: 0 });
    expect(res.status, res.text).to.equal(200);
    expect(res.body).to.have.all.keys('node_id', 'off_secs', 'started', 'ended');
    expect(res.body).to.include({ node_id: NODE, off_secs: 0 });
    expect(mains()).to.deep.equal([false, true]);
    // The button's request: no body, so the outlet's default (virtual: 5 s).
    const button = await as(t.mia!).post(CYCLE);
    expect(button.status, button.text).to.equal(200);
    expect(button.body.off_secs).to.equal(5);
    expect(Date.parse(button.body.ended as string) - Date.parse(button.body.started as string)).to.be.at.least(5000);
    expect(mains()).to.deep.equal([false, true, false, true]);
    expect(node.daemon.virtualStb!.mains()).to.equal(true);
  });

  it('refused before anything is switched: read 403 (the portal), unknown node 404, a running job 409 (the node)', async () => {
    const before = mains().length;
    const denied = await as(t.rita!).post(CYCLE).send({ off_secs: 0 });
    expectError(denied, 403, 'forbidden');
    expect(denied.body.message).to.match(/^read may not power-cycle the device under test/);
    const unknown = await as(t.mia!).post('/api/v2/nodes/no-such-node/power/cycle').send({ off_secs: 0 });
    expectError(unknown, 404, 'not_found');
    expect(unknown.body.message).to.contain('no-such-node');

    const run = await as(t.ada!).post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] });
    expect(run.status, run.text).to.equal(200);
    const uid = run.body.job_uid as string;
    try {
      const busy = await as(t.mia!).post(CYCLE).send({ off_secs: 0 });
      expectError(busy, 409, 'conflict');
      expect(busy.body.message).to.contain('a test job is running');
    } finally {
      expect((await as(t.ada!).post(`/api/v2/jobs${uid}/stop`)).status).to.be.oneOf([200, 202]);
      await waitForJob(node, uid);
    }
    expect(mains().length).to.equal(before);
  });

  it("in Chromium through the portal: a read user never sees the Power panel (the live view is not hers); a manual user does, and power-cycles the box", async () => {
    // The live view itself needs manual: the portal answers a read user its "not allowed" page, with no panel.
    const reader = await signedIn(t.rita!);
    await reader.locator('#forbidden').waitFor({ timeout: 60_000 });
    expect(await reader.locator('.forbidden-need').textContent()).to.equal('manual');
    expect(await reader.locator('#power-panel').count()).to.equal(0);

    const before = mains().length;
    const p = await signedIn(t.mia!);
    await p.getByRole('button', { name: 'Power cycle' }).click({ timeout: 60_000 });
    await p.getByRole('button', { name: 'Yes, power-cycle' }).click();
    await p.locator('#power-status').getByText(/^Power-cycled: off for 5 s, on again at /).waitFor({ timeout: 60_000 });
    expect(mains().slice(before)).to.deep.equal([false, true]);
  });

  it("audited once per request as power.cycle with off_secs: the portal's trail, and the node's for what reached it", async () => {
    const res = await as(t.ada!).get('/api/v2/audit?action=power.cycle');
    expect(res.status, res.text).to.equal(200);
    const portal = (res.body.entries as AuditRow[]).reverse();
    expect(portal.map(row)).to.deep.equal([
      ['mia', 'token', NODE, 200, 0],
      ['mia', 'token', NODE, 200, 5],
      ['rita', 'token', NODE, 403, 0],
      ['mia', 'token', 'no-such-node', 404, 0],
      ['mia', 'token', NODE, 409, 0],
      ['mia', 'session', NODE, 200, 5],
    ]);
    // The node's own trail: the four that reached it, the portal's user named, via the portal.
    const own = await queryAuditDir(path.join(node.dataDir, 'audit'), parseAuditQuery({ action: 'power.cycle' }, () => true));
    expect((own.entries as AuditRow[]).reverse().map(row)).to.deep.equal([
      ['mia', 'portal', NODE, 200, 0],
      ['mia', 'portal', NODE, 200, 5],
      ['mia', 'portal', NODE, 409, 0],
      ['mia', 'portal', NODE, 200, 5],
    ]);
  });
});
