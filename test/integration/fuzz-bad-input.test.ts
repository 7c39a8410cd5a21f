/**
 * Bad input: a few thousand generated malformed requests against every
 * endpoint, v1 and v2 (with a valid token) - bodies of the wrong shape and
 * type, huge bodies, deep nesting, bad UTF-8, odd path segments, traversal in
 * every id and file name, bad filters, sorts and time zones. No 5xx; every
 * answer a JSON error or a valid success; nothing outside the data directory
 * read (a canary file's content never appears, its mtime is unchanged) or
 * written (the parent folder lists the same before and after).
 */
import { expect } from 'chai';
import http from 'node:http';
import { mkdir, mkdtemp, readdir, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { startDaemon, type Daemon } from '../../src/daemon.js';
import { silentLogger } from '../../src/logger.js';
import { TokenStore, tokensFile } from '../../src/storage/tokens.js';
import { makeTestPack, type TestPackRepo } from '../fixtures/testPack.js';
import { testConfig } from '../helpers/daemon.js';
import { recordResponse } from '../helpers/contract.js';
import { fuzz } from '../helpers/fuzzRequests.js';
import { waitFor } from '../helpers/wait.js';

const CANARY = 'CANARY-7f3a9c-do-not-serve';

interface Answer {
  status: number;
  type: string;
  body: Buffer;
}

/** A raw request: the path goes on the wire exactly as given (fetch would normalise `..`). */
function raw(base: URL, method: string, p: string, headers: Record<string, string>, body?: Buffer): Promise<Answer | undefined> {
  return new Promise((resolve, reject) => {
    let req: http.ClientRequest;
    try {
      req = http.request({ host: base.hostname, port: base.port, method, path: p, headers: { ...headers, ...(body ? { 'Content-Length': String(body.length) } : {}) }, agent: false });
    } catch {
      resolve(undefined); // a path Node itself will not send (control characters)
      return;
    }
    req.on('response', (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type'] ?? ''), body: Buffer.concat(chunks) }));
    });
    req.on('error', (e: NodeJS.ErrnoException) => (e.code === 'EPIPE' || e.code === 'ECONNRESET' ? resolve({ status: -1, type: '', body: Buffer.alloc(0) }) : reject(e)));
    req.end(body);
  });
}

async function listTree(dir: string, skip: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    const full = path.join(e.parentPath, e.name);
    if (!full.startsWith(skip)) out.push(full);
  }
  return out.sort();
}

describe('bad input: generated malformed requests against every endpoint', function () {
  this.timeout(180_000);
  let pack: TestPackRepo;
  let parent: string;
  let dataDir: string;
  let daemon: Daemon;
  let token: string;
  let jobUid: string;
  let resultId: string;

  before(async () => {
    pack = await makeTestPack({ 'tests/t.py': 'def test_pass():\n    open("note.txt", "w").write("hi")\n', 'config/stbt.conf': '[test_pack]\ndefault_remote_control = vstb\n', 'config/remote-control/vstb.lircd.conf': 'begin remote\n  name vstb\nend remote\n' });
    parent = await mkdtemp(path.join(os.tmpdir(), 'farmhand-fuzz-'));
    dataDir = path.join(parent, 'data');
    await mkdir(dataDir);
    await writeFile(path.join(parent, 'canary.txt'), CANARY);
    await writeFile(path.join(parent, 'secret.log'), CANARY);
    // The rate limit would answer most of a flood with 429 before any handler saw it; here the handlers are under test.
    daemon = await startDaemon(testConfig(pack.dir, dataDir, { rate_limit: { requests_per_second: 1e6, burst: 1e6, artifact_burst: 1e6 } }), silentLogger);
    await waitFor(() => daemon.services.frames.health().online, { what: 'capture to come online', timeoutMs: 15_000 });
    token = (await new TokenStore(tokensFile(dataDir)).create('fuzzer')).token;
    const run = await fetch(`${daemon.url}/api/v1/run_tests`, { method: 'POST', body: JSON.stringify({ test_pack_revision: 'main', test_cases: ['tests/t.py::test_pass'] }) });
    jobUid = ((await run.json()) as { job_uid: string }).job_uid;
    await waitFor(async () => ((await (await fetch(`${daemon.url}/api/v1/jobs${jobUid}`)).json()) as { status: string }).status === 'exited', {
      what: 'the job to exit',
      timeoutMs: 30_000,
    });
    resultId = (((await (await fetch(`${daemon.url}/api/v1/results`)).json()) as Array<{ result_id: string }>)[0]!).result_id;
  });
  after(async () => {
    await daemon?.stop();
    await rm(parent, { recursive: true, force: true });
    await pack.cleanup();
  });

  it('no 5xx, every answer a JSON error (4xx) or a valid success, no file outside the data directory read or written', async () => {
    const canaryBefore = await stat(path.join(parent, 'canary.txt'));
    const treeBefore = await listTree(parent, dataDir);
    const base = new URL(daemon.url);
    const [node, hex, num, stamp] = resultId.slice(1).split('/') as [string, string, string, string];

    const badSegs = ['..', '%2e%2e', '..%2f..%2fcanary.txt', '%2e%2e%2f%2e%2e%2f%2e%2e%2fcanary.txt', '..%5c..%5ccanary.txt', '%00', 'a%00b', '%ff%fe', '%c0%ae%c0%ae', '%', '%zz', 'x'.repeat(3000), '.', '~', '-1', '1e9', '99999999999999999999', ';', 'canary.txt', encodeURIComponent(path.join(parent, 'canary.txt')), '%2fetc%2fpasswd', '%u002e'];
    const badFiles = [...badSegs, '../../../../canary.txt', '../../../../../secret.log', 'a/../../../../../canary.txt', '.%2e/.%2e/.%2e/.%2e/canary.txt', 'result.json/..', '..;/canary.txt'];
    const badQuery = [
      'filter=' + encodeURIComponent('job:../../x'),
      'filter=' + encodeURIComponent('date:>"not a date"'),
      'filter=' + encodeURIComponent('"unterminated'),
      'filter=' + encodeURIComponent('nosuch:field'),
      'filter=%ff%fe',
      'filter=' + 'a'.repeat(5000),
      'sort=bogus', 'sort=date:sideways', 'sort=', 'sort=%00',
      'tz=Mars/Olympus', 'tz=../../etc/localtime', 'tz=%ff', 'tz=' + 'Z'.repeat(300),
      'filter=a&filter=b', 'tz=UTC&tz=Etc/UTC', 'include_tz=maybe',
    ];
    const v2 = { Authorization: `token ${token}` };
    const reqs: Array<{ method: string; p: string; headers: Record<string, string>; body?: Buffer }> = [];
    const add = (method: string, p: string, body?: Buffer, type?: string) => {
      reqs.push({ method, p, headers: { ...(p.startsWith('/api/v2') ? v2 : {}), ...(type && { 'Content-Type': type }) }, ...(body && { body }) });
    };
    // Ids and file names: every segment of every id-bearing path, replaced by each bad value.
    const idPaths = (prefix: string) => [
      `${prefix}/{node}/{hex}/{num}`,
      `${prefix}/{node}/{hex}/{num}/results`,
      `${prefix}/{node}/{hex}/{num}/stop`,
    ];
    const resultPaths = (prefix: string) => [`${prefix}/{node}/{hex}/{num}/{stamp}`, `${prefix}/{node}/{hex}/{num}/{stamp}/artifacts/{file}`, `${prefix}/{node}/{hex}/{num}/{stamp}/{log}`, `${prefix}/{node}/{hex}/{num}/{stamp}/screenshot.png`];
    const templates = [...idPaths('/api/v1/jobs'), ...idPaths('/api/v2/jobs'), ...resultPaths('/api/v1/result'), ...resultPaths('/api/v2/results'), '/app/results/{node}/{hex}/{num}/{stamp}', '/api/v2/nodes/{node}', '/api/v2/nodes/{node}/job', '/api/v2/nodes/{node}/screenshot.png', '/api/v2/reservations/{num}', '/api/v1/test_pack/{file}/test_case_names', '/api/v2/test_pack/{file}/test_case_names'];
    const good: Record<string, string> = { node, hex, num, stamp, file: 'note.txt', log: 'stbt.log' };
    for (const t of templates) {
      const keys = [...t.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
      for (const k of keys) {
        for (const bad of k === 'file' || k === 'log' ? badFiles : badSegs) {
          const p = t.replace(/\{(\w+)\}/g, (_, kk: string) => (kk === k ? bad : good[kk]!));
          add(t.endsWith('/stop') ? 'POST' : t.startsWith('/api/v2/reservations') ? 'DELETE' : 'GET', p);
        }
      }
    }
    for (const q of badQuery) {
      for (const p of ['/api/v1/results', '/api/v2/results', '/api/v2/results.csv', '/api/v2/results.xml', `/api/v1/jobs${jobUid}/results`, `/api/v2/results${resultId}/stbt.log`, `/api/v1/result${resultId}/farmhand.log`]) add('GET', `${p}?${q}`);
    }
    // Bodies of the wrong shape and type, to every POST/PUT endpoint.
    const deep = (n: number) => '['.repeat(n) + ']'.repeat(n);
    const bodies: Buffer[] = [
      '', 'null', '1', '"text"', '[]', '{}', 'true', '{', '{"a":', 'not json', deep(100), deep(20000), '{"a":' + deep(5000) + '}',
      '{"test_cases": 5}', '{"test_cases": [1,2]}', '{"test_cases": ["../../canary.txt::test"]}', '{"test_pack_revision": {"x":1}}', '{"test_pack_revision": "--upload-pack=touch /tmp/x"}',
      '{"test_pack_revision": "main", "test_cases": ["tests/t.py::test_pass"], "category": "a/b"}', '{"tags": {"$x": "1"}}', '{"tags": []}', '{"node_id": 5}', '{"node_id": "../.."}',
      '{"node_ids": "x"}', '{"node_ids": [1]}', '{"duration_secs": "60", "node_ids": []}', '{"key": 7}', '{"key": "../../canary"}', '{"message": ' + JSON.stringify('m'.repeat(20000)) + '}',
      '{"__proto__": {"polluted": true}}', '{"constructor": {"prototype": {"x": 1}}}', '{"soak": "sometimes"}', '{"shuffle": "yes"}', '{"remote_control": "../../../canary"}',
    ].map((s) => Buffer.from(s));
    bodies.push(Buffer.from([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]), Buffer.from([0xc3, 0x28, 0xa0, 0xa1]), Buffer.concat([Buffer.from('{"test_cases": ["'), Buffer.from([0xed, 0xa0, 0x80]), Buffer.from('"]}')]));
    const posts = ['/api/v1/run_tests', '/api/v2/run_tests', `/api/v2/nodes/${node}/press`, `/api/v2/nodes/${node}/job/stop`, '/api/v2/reservations', '/api/v2/reservations/1/extend', '/api/v2/reservations/1/interrupt', `/api/v1/jobs${jobUid}/stop`, `/api/v2/jobs${jobUid}/stop`];
    // COMPAT: bodies arrive with no Content-Type, or a wrong one; all are parsed as JSON.
    for (const type of [undefined, 'application/json', 'text/plain', 'application/x-www-form-urlencoded; charset=latin1']) {
      for (const p of posts) for (const b of bodies) add('POST', p, b, type);
    }
    // Odd methods and paths.
    for (const p of ['/', '//', '///', '/api', '/api/v1', '/api/v3/results', '/api/v1/results/', '/%2e%2e/%2e%2e/canary.txt', '/api/../../canary.txt', '/app/results/../../../canary.txt', '/static/../../canary.txt']) {
      for (const m of ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD']) add(m, p);
    }

    const huge = Buffer.alloc(3 * 1024 * 1024, 0x20);
    const counts: Record<number, number> = {};
    const problems: string[] = [];
    let sent = 0;
    const check = async (r: (typeof reqs)[number]) => {
      const a = await raw(base, r.method, r.p, r.headers, r.body);
      if (!a) return;
      sent++;
      counts[a.status] = (counts[a.status] ?? 0) + 1;
      // The answer also keeps to the OpenAPI document (test/helpers/contract.ts; the root hook reports).
      if (a.status > 0) recordResponse({ method: r.method, path: r.p, status: a.status, contentType: a.type || undefined, body: a.body, length: a.body.length });
      const where = `${r.method} ${r.p.slice(0, 120)}${r.body ? ` body ${r.body.subarray(0, 40).toString('latin1')}` : ''}`;
      if (a.status >= 500 || a.status < 100) problems.push(`${a.status} for ${where}`);
      if (a.status >= 400 && r.method !== 'HEAD') {
        let ok = false;
        try {
          ok = /json/.test(a.type) && typeof (JSON.parse(a.body.toString('utf8')) as { error?: unknown }).error === 'string';
        } catch {
          ok = false;
        }
        if (!ok) problems.push(`non-JSON ${a.status} error for ${where}: ${a.body.subarray(0, 80).toString()}`);
      }
      if (a.body.includes(CANARY)) problems.push(`CANARY served for ${where}`);
    };
    for (let i = 0; i < reqs.length; i += 16) await Promise.all(reqs.slice(i, i + 16).map(check));

    // Over-large bodies get 413, to every POST endpoint.
    for (const p of posts) {
      const a = await raw(base, 'POST', p, p.startsWith('/api/v2') ? v2 : {}, huge);
      sent++;
      if (a?.status !== 413 && a?.status !== -1) problems.push(`huge body to ${p}: ${a?.status}`);
    }

    expect(problems.slice(0, 30), `${problems.length} problems of ${sent} requests; statuses ${JSON.stringify(counts)}`).to.deep.equal([]);
    expect(sent).to.be.greaterThan(2000);
    const canaryAfter = await stat(path.join(parent, 'canary.txt'));
    expect(canaryAfter.mtimeMs).to.equal(canaryBefore.mtimeMs);
    expect(canaryAfter.atimeMs, 'the canary was never read').to.equal(canaryBefore.atimeMs);
    expect(await listTree(parent, dataDir)).to.deep.equal(treeBefore);
    // The node still works: the fuzzing started no job and reserved nothing.
    const nodeState = (await (await fetch(`${daemon.url}/api/v2/nodes/${node}`, { headers: v2 })).json()) as { reservation: unknown };
    expect(nodeState.reservation).to.equal(null);
    console.log(`      bad inputs: ${sent} requests, statuses ${JSON.stringify(counts)}`);
  });

  // Issue 11: our own generator over every route and method, with content encodings (valid, corrupt,
  // a bomb), huge and duplicated headers, bad Range, Authorization and Accept, odd paths and queries.
  // bench/soak/fuzz.ts runs the same generator longer and measures event-loop stalls.
  it('generated requests to every route, method, encoding and odd header: no 500, every error JSON {error, message}', async () => {
    const node = resultId.split('/')[1]!;
    const out = await fuzz(new URL(daemon.url), { node, jobUid, resultId, token }, {
      count: 3000,
      seed: 11,
      concurrency: 8,
      onAnswer: (r, a) => {
        if (a.status > 0) recordResponse({ method: r.method, path: r.path, status: a.status, contentType: a.type || undefined, body: a.body, length: a.body.length });
      },
    });
    expect(out.problems.slice(0, 20), `${out.problems.length} problems in ${out.sent} requests; statuses ${JSON.stringify(out.counts)}`).to.deep.equal([]);
    expect(out.counts[500] ?? 0).to.equal(0);
    expect(out.sent).to.be.greaterThan(2900);
    // The generator reached the interesting answers, not only 404s.
    for (const status of [200, 400, 403, 404, 405, 413, 415, 416, 431]) expect(out.counts[status] ?? 0, `status ${status}`).to.be.greaterThan(0);
    console.log(`      generated: ${out.sent} requests, statuses ${JSON.stringify(out.counts)}`);
  });

  it('a slow client cannot hold a connection forever: the server sets headersTimeout and requestTimeout (the real cut-off is measured in bench/soak/slow-client.ts)', () => {
    expect(daemon.server.headersTimeout).to.be.within(1, 60_000);
    // Above the 55 s await_completion hold, so a long poll is never cut; bounded, so a trickling body is.
    expect(daemon.server.requestTimeout).to.be.within(56_000, 300_000);
  });

  // Regression: a path of only slashes ('//') answered 500, because foldTrailingSlash in src/http/app.ts
  // stripped every slash and left Koa an empty path.
  it('a path of only slashes (GET //) is the front door, as /, not a 500', async () => {
    const a = await raw(new URL(daemon.url), 'GET', '//', {});
    expect(a?.status).to.equal(200);
    expect(a?.type).to.match(/^text\/html/);
  });
});
