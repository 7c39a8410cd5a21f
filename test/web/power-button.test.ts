/**
 * The live page's "Power cycle" button (docs/power.md) in a real Chromium, on a node whose outlet is the
 * virtual box's mains: Cancel switches nothing; confirmed, the box goes off and on again and the page says
 * so; a refusal (a running job) is shown inline with the API's message.
 */
import { expect } from 'chai';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { VSTB_LIRCD_CONF } from '../../src/hardware/virtual/index.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';
import { launchBrowser } from '../helpers/browser.js';
import { client as request } from '../helpers/contract.js';
import { startTestDaemon, waitForJob, type TestDaemon } from '../helpers/daemon.js';
import { capturingLogger } from '../helpers/logger.js';

const WAIT = { timeout: 60_000 };

describe('live page: the power-cycle button', function () {
  this.timeout(180_000);
  let d: TestDaemon;
  let browser: Browser;
  let mia: string;
  let ada: string;
  const contexts: BrowserContext[] = [];
  const log = capturingLogger();
  const mains = () => log.entries.filter((e) => e.msg === 'virtual set-top box: mains power').map((e) => e.obj.on);

  const page = async (token: string): Promise<Page> => {
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 }, extraHTTPHeaders: { Authorization: `token ${token}` } });
    contexts.push(ctx);
    const p = await ctx.newPage();
    await p.goto(`${d.url}/app/live`);
    return p;
  };

  before(async () => {
    d = await startTestDaemon({
      files: { ...STANDARD_FILES, 'config/remote-control/vstb.lircd.conf': VSTB_LIRCD_CONF },
      config: { ir: { uri: 'virtual:' }, capture: { uri: 'virtual:', width: 320, height: 180 }, power: { uri: 'virtual:' } },
      logger: log,
    });
    const store = new TokenStore(tokensFile(d.dataDir));
    mia = (await store.create('mia', { role: 'manual' })).token;
    ada = (await store.create('ada', { role: 'admin' })).token;
    browser = await launchBrowser();
  });
  after(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
    await d?.stop();
  });

  it('asks first: Cancel switches nothing; Yes power-cycles the box and says so under the button', async () => {
    const p = await page(mia);
    await p.getByRole('button', { name: 'Power cycle' }).click();
    await p.getByRole('button', { name: 'Cancel' }).click();
    await p.getByRole('button', { name: 'Power cycle' }).waitFor(WAIT);
    expect(await p.locator('#power-confirm').isHidden()).to.equal(true);
    expect(mains()).to.deep.equal([]);

    await p.getByRole('button', { name: 'Power cycle' }).click();
    await p.getByRole('button', { name: 'Yes, power-cycle' }).click();
    await p.locator('#power-status').getByText(/^Power-cycled: off for 5 s, on again at /).waitFor(WAIT);
    expect(mains()).to.deep.equal([false, true]);
    expect(d.daemon.virtualStb!.mains()).to.equal(true);
  });

  it("a refusal is shown inline with the API's message (a running job)", async () => {
    const run = await request(d.url).post('/api/v2/run_tests').set('Authorization', `token ${ada}`).send({ node_id: 'farmhand-test', test_pack_revision: 'main', test_cases: ['tests/hang.py::test_hang'] });
    expect(run.status, run.text).to.equal(200);
    try {
      const p = await page(mia);
      await p.getByRole('button', { name: 'Power cycle' }).click();
      await p.getByRole('button', { name: 'Yes, power-cycle' }).click();
      await p.locator('#power-status').getByText(/^Power cycle failed: a test job is running/).waitFor(WAIT);
      expect(await p.locator('#power-status').getAttribute('class')).to.contain('problem');
    } finally {
      await request(d.url).post(`/api/v2/jobs${run.body.job_uid as string}/stop`).set('Authorization', `token ${ada}`);
      await waitForJob(d, run.body.job_uid as string);
    }
    expect(mains()).to.deep.equal([false, true]);
  });
});
