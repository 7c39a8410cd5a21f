/**
 * Security: tokens never appear in the daemon's log (debug level, good and
 * failing requests), the token store holds hashes only, token comparison
 * does not depend on how much of a token matches, and a symlink in a result
 * folder that points outside (at a canary file) is never followed by any
 * endpoint.
 */
import { expect } from 'chai';
import { mkdir, mkdtemp, readFile, readdir, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { parseToken } from '../../src/core/auth.js';
import { FileTokenVerifier, TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { silentLogger } from '../../src/logger.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { testConfig } from '../helpers/daemon.js';
import { capturingLogger, type CapturingLogger } from '../helpers/logger.js';
import { waitFor } from '../helpers/wait.js';

const CANARY = 'CANARY-b81e44-never-serve-me';

describe('security: secrets and symlinks', function () {
  this.timeout(60_000);
  let pack: TestPackRepo;
  let parent: string;
  let dataDir: string;
  let daemon: Daemon;
  let log: CapturingLogger;
  let token: string;
  let resultId: string;

  before(async () => {
    pack = await makeTestPack({ 'tests/t.py': 'def test_pass():\n    print("ok")\n' });
    parent = await mkdtemp(path.join(os.tmpdir(), 'farmhand-sec-'));
    dataDir = path.join(parent, 'data');
    await mkdir(dataDir);
    await writeFile(path.join(parent, 'canary.txt'), CANARY);
    log = capturingLogger();
    daemon = await startDaemon(testConfig(pack.dir, dataDir, { capture: { uri: 'none:' }, log_level: 'debug' }), log);
    token = (await new TokenStore(tokensFile(dataDir)).create('alice')).token;
    const run = await fetch(`${daemon.url}/api/v1/run_tests`, { method: 'POST', body: JSON.stringify({ test_pack_revision: 'main', test_cases: ['tests/t.py::test_pass'] }) });
    const job = (await run.json()) as { job_uid: string };
    await waitFor(async () => ((await (await fetch(`${daemon.url}/api/v1/jobs${job.job_uid}`)).json()) as { status: string }).status === 'exited', 'the job to end');
    resultId = ((await (await fetch(`${daemon.url}/api/v1/results`)).json()) as Array<{ result_id: string }>)[0]!.result_id;
  });
  after(async () => {
    await daemon?.stop();
    await rm(parent, { recursive: true, force: true });
    await pack.cleanup();
  });

  it('tokens never appear in the log at debug level, for good, wrong, malformed and revoked tokens', async () => {
    const store = new TokenStore(tokensFile(dataDir));
    const revoked = await store.create('bob');
    await store.revoke(revoked.entry.id);
    const secret = parseToken(token)!.secret;
    const wrong = token.slice(0, -5) + 'AAAAA';
    const tried = [token, wrong, revoked.token, `${token}x`, 'fh_zzzz_' + secret];
    for (const t of tried) {
      for (const p of ['/api/v2/user', '/api/v2/results', `/api/v2/results${resultId}/artifacts/`, '/api/v2/no/such/endpoint']) {
        await (await fetch(daemon.url + p, { headers: { Authorization: `token ${t}` } })).arrayBuffer();
      }
      await (await fetch(`${daemon.url}/api/v2/run_tests`, { method: 'POST', headers: { Authorization: `token ${t}` }, body: '{"node_id": 5}' })).arrayBuffer();
      await (await fetch(`${daemon.url}/api/v2/user?token=${encodeURIComponent(t)}`)).arrayBuffer();
    }
    expect(log.entries.some((e) => e.level === 'debug'), 'the daemon logged at debug level').to.equal(true);
    // Every secret tried is 40+ characters of base64url: none may appear, nor any token as sent.
    for (const s of [...tried, secret, parseToken(revoked.token)!.secret, wrong.slice(12)]) {
      expect(log.text().includes(s), `secret ${s.slice(0, 6)}... in the log`).to.equal(false);
    }
  });

  it('the token store holds hashes only', async () => {
    const text = await readFile(tokensFile(dataDir), 'utf8');
    // The secret is base64url, so it may itself hold '_': split the way the daemon does.
    const secret = parseToken(token)!.secret;
    expect(text).to.not.include(secret);
    const { createHash } = await import('node:crypto');
    expect(text).to.include(createHash('sha256').update(secret).digest('hex'));
  });

  it('token comparison is constant-time: fixed-length sha256 digests through timingSafeEqual, whatever the prefix shared', async () => {
    const calls: Array<[number, number]> = [];
    const { timingSafeEqual } = await import('node:crypto');
    const spy = (a: Buffer, b: Buffer) => (calls.push([a.length, b.length]), timingSafeEqual(a, b));
    const v = new FileTokenVerifier(tokensFile(dataDir), silentLogger, { equal: spy });
    const { id, secret } = parseToken(token)!;
    const prefix = token.slice(0, token.length - secret.length);
    expect(prefix).to.equal(`fh_${id}_`);
    const alt = (keep: number) => prefix + secret.slice(0, keep) + [...secret.slice(keep)].map((c) => (c === 'A' ? 'B' : 'A')).join('');
    expect(v.verify(token)?.user).to.equal('alice');
    expect(v.verify(alt(0))).to.equal(undefined);
    expect(v.verify(alt(40))).to.equal(undefined);
    expect(calls.every(([a, b]) => a === 32 && b === 32), 'every compare is of two 32-byte digests').to.equal(true);
    // The timing itself (0 vs 40 characters right) is measured by bench/micro-bench.ts, not asserted here.
  });

  it('a symlink in a result folder pointing outside is never followed: listing, artifact file, screenshot, log, triage page, CSV, XML', async () => {
    const [, node, hex, num, stamp] = resultId.split('/') as [string, string, string, string, string];
    const dir = path.join(dataDir, 'results', hex, num, stamp);
    const canary = path.join(parent, 'canary.txt');
    await symlink(canary, path.join(dir, 'leak.txt'));
    await symlink(parent, path.join(dir, 'outside'));
    for (const f of ['screenshot.png', 'farmhand.log', 'combined.log', 'thumbnail.jpg']) {
      await unlink(path.join(dir, f)).catch(() => undefined);
      await symlink(canary, path.join(dir, f));
    }
    const v2 = { Authorization: `token ${token}` };
    const paths = [
      `/api/v1/result${resultId}/artifacts/`, `/api/v2/results${resultId}/artifacts/`,
      `/api/v1/result${resultId}/artifacts/leak.txt`, `/api/v2/results${resultId}/artifacts/leak.txt`,
      `/api/v2/results${resultId}/artifacts/outside/canary.txt`, `/api/v1/result${resultId}/artifacts/outside/canary.txt`,
      `/api/v2/results${resultId}/artifacts/combined.log`, `/api/v2/results${resultId}/artifacts/screenshot.png`,
      `/api/v1/result${resultId}/screenshot.png`, `/api/v2/results${resultId}/screenshot.png`,
      `/api/v1/result${resultId}/farmhand.log`, `/api/v1/result${resultId}/stbt.log`, `/api/v2/results${resultId}/stbt.log`, `/api/v2/results${resultId}/stbt.log?tz=Europe/London`,
      `/app/results/${node}/${hex}/${num}/${stamp}`, `/api/v2/results${resultId}`, `/api/v1/result${resultId}`,
      '/api/v2/results.csv', '/api/v2/results.xml', '/api/v2/results',
    ];
    const seen: string[] = [];
    for (const p of paths) {
      const res = await fetch(daemon.url + p, { headers: v2 });
      const body = Buffer.from(await res.arrayBuffer()).toString('latin1');
      seen.push(`${res.status} ${p}`);
      expect(res.status, p).to.be.lessThan(500);
      expect(body.includes(CANARY), `canary served by ${p}`).to.equal(false);
      if (p.endsWith('/artifacts/')) expect(Object.keys(JSON.parse(body) as object), 'listing').to.not.include.members(['leak.txt', 'outside/canary.txt']);
    }
    expect(await readdir(dir)).to.include('leak.txt'); // the planted links were there all along
  });
});
