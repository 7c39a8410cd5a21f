/**
 * The node's audit trail across a crash (docs/auth.md, "Audit trail"): the real `farmhand serve` as a child,
 * SIGKILLed while four clients keep sending audited requests. After a restart on the same data directory every
 * request that was answered has its entry (the entry is written before the answer leaves), the trail reads
 * whole, and new entries are appended cleanly after whatever the kill left.
 */
import { expect } from 'chai';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { fullLaneOnly } from '../helpers/lane.js';
import { waitFor } from '../helpers/wait.js';
import { kill, startCli, type Cli } from './crash-lib.js';

describe('audit trail: a SIGKILL loses no entry of an answered request', function () {
  this.timeout(180_000);
  let pack: TestPackRepo;
  let root: string;
  let cli: Cli | undefined;
  before(async () => {
    fullLaneOnly('real daemons killed and restarted');
    pack = await makeTestPack();
    root = await mkdtemp(path.join(os.tmpdir(), 'farmhand-audit-crash-'));
  });
  after(async () => {
    if (cli) await kill(cli);
    await pack?.cleanup();
    await rm(root, { recursive: true, force: true });
  });

  it('every answered request is in the trail after the kill and a restart; the trail goes on appending', async () => {
    const dataDir = path.join(root, 'data');
    const configFile = path.join(root, 'farmhand.json');
    await writeFile(configFile, JSON.stringify({ node_id: 'crash-node', listen: '127.0.0.1:0', data_dir: dataDir, test_pack: { url: pack.dir }, capture: { uri: 'none:' }, log_level: 'info', runner: { run_tests_as: false }, rate_limit: { requests_per_second: 1e6, burst: 1e6 } }));
    const { token } = await new TokenStore(tokensFile(dataDir)).create('alice');
    const call = (url: string, method: string, p: string, body?: unknown) =>
      fetch(url + p, { method, headers: { Authorization: `token ${token}`, 'Content-Type': 'application/json' }, ...(body !== undefined && { body: JSON.stringify(body) }) });
    cli = await startCli(configFile);
    const url = cli.url;
    let answered = 0;
    let stop = false;
    // Each extend of an unknown reservation is a 404 of a known caller: recorded, and cheap.
    const client = async () => {
      while (!stop) {
        try {
          const res = await call(url, 'POST', '/api/v2/reservations/424242/extend', { duration_secs: 60 });
          await res.text();
          if (res.status === 404) answered++;
        } catch {
          return; // the daemon is gone
        }
      }
    };
    const clients = [client(), client(), client(), client()];
    await waitFor(() => answered >= 200, { what: '200 answered requests', timeoutMs: 60_000 });
    await kill(cli);
    stop = true;
    await Promise.all(clients);

    cli = await startCli(configFile);
    const after = async (): Promise<{ entries: { action: string; outcome: number }[] }> => (await (await call(cli!.url, 'GET', '/api/v2/audit?action=reservation.extend&limit=1000')).json()) as never;
    const found = (await after()).entries;
    expect(found.length, `entries ${found.length}, answered ${answered}`).to.be.at.least(answered);
    expect(found.every((e) => e.outcome === 404)).to.equal(true);
    // The trail goes on: a new entry is read back after what the kill left.
    expect((await call(cli.url, 'POST', '/api/v2/reservations/424242/extend', { duration_secs: 60 })).status).to.equal(404);
    expect((await after()).entries.length).to.equal(found.length + 1);
  });
});
