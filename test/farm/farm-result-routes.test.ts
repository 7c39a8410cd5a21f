/**
 * The portal's v2 result endpoints against a real node whose uploader
 * delivered its results to a real portal server on a real PostgreSQL: the
 * lists (.json, .csv, .xml) answer as the node answers for the same results,
 * detail, logs, screenshot, artifacts and artifact files are served from the
 * portal's storage, identical to the node's; a result not uploaded yet is
 * passed on to its node (an in-test FarmHub.forward over HTTP:
 * helpers/farmResultsPortal.ts); unknown ids are 404, deleted ones 410.
 */
import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseResultQuery } from '../../src/core/query.js';
import { asUser } from '../helpers/auth.js';
import { startTestDaemon, waitOnline, type TestDaemon } from '../helpers/daemon.js';
import { startResultsPortal, type ResultsPortal } from '../helpers/farmResultsPortal.js';
import { waitFor } from '../helpers/wait.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';

const NODE = 'node-r';
const CREDENTIAL = 'cred-' + randomBytes(16).toString('hex');
const TESTS = ['tests/basic.py::test_pass', 'tests/basic.py::test_fail', 'tests/basic.py::test_error', 'tests/config_tags.py::test_tags'];

const emptySuiteTime = (xml: string): string => xml.replace(/(<testsuite [^>]*tests="0"[^>]*timestamp=")[^"]*"/, '$1"');

interface Answer { status: number; type: string; text: string; body: Buffer }

describe('farm: the portal`s v2 result endpoints', function () {
  this.timeout(180_000);
  let portal: ResultsPortal;
  let d: TestDaemon;
  let credDir: string;
  let as: Awaited<ReturnType<typeof asUser>>;
  let ids: string[];

  /** The node's answer, its URLs rewritten to the portal's (the only difference allowed). */
  const fromNode = async (p: string, rewrite = true): Promise<Answer> => {
    const res = await fetch(`${d.url}${p}`, { headers: { Authorization: `token ${as.token}` } });
    const body = Buffer.from(await res.arrayBuffer());
    const text = rewrite ? body.toString('utf8').split(d.url).join(portal.url) : body.toString('utf8');
    return { status: res.status, type: res.headers.get('content-type') ?? '', text, body };
  };
  const fromPortal = async (p: string): Promise<Answer> => {
    const res = await fetch(`${portal.url}${p}`);
    const body = Buffer.from(await res.arrayBuffer());
    return { status: res.status, type: res.headers.get('content-type') ?? '', text: body.toString('utf8'), body };
  };
  /** `forwarded`: the answer came from the node through the in-test forwarder, which does not pass the portal's base URL on. */
  const same = async (p: string, opts: { binary?: boolean; forwarded?: boolean } = {}): Promise<Answer> => {
    const [n, f] = [await fromNode(p, !opts.forwarded), await fromPortal(p)];
    expect(f.status, `${p}: ${f.text.slice(0, 300)}`).to.equal(n.status);
    expect(f.type, p).to.equal(n.type);
    if (opts.binary) expect(f.body.equals(n.body), `${p}: same bytes`).to.equal(true);
    // An empty JUnit report is stamped with the time of the request: the two requests may be a second apart.
    else expect(emptySuiteTime(f.text), p).to.equal(emptySuiteTime(n.text));
    return f;
  };

  before(async () => {
    portal = await startResultsPortal();
    portal.credentials.map.set(NODE, CREDENTIAL);
    credDir = await mkdtemp(path.join(os.tmpdir(), 'farm-cred-'));
    await writeFile(path.join(credDir, 'node.cred'), CREDENTIAL);
    d = await startTestDaemon({
      files: STANDARD_FILES,
      config: {
        node_id: NODE,
        api: { await_completion_secs: 600 },
        rate_limit: { requests_per_second: 1000, burst: 1000 },
        portal: { url: portal.url, node_credential_file: path.join(credDir, 'node.cred') },
      },
    });
    as = await asUser(d, 'alice');
    portal.hub.nodes.set(NODE, { url: d.url, token: as.token });
    await waitOnline(d);
    const res = await as.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: TESTS, shuffle: false, tags: { 'jenkins/BUILD_ID': '7' } });
    expect(res.status, res.text).to.equal(200);
    const done = await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
    expect(done.body.status).to.equal('exited');
    ids = d.daemon.services.results.query(parseResultQuery({})).map((r) => r.result_id);
    expect(ids).to.have.length(TESTS.length);
    await waitFor(async () => (await portal.index.count()) === ids.length && d.daemon.uploader!.pending.length === 0, { what: 'every result uploaded', timeoutMs: 60_000 });
  });
  after(async () => {
    await d?.stop();
    await portal?.close();
    if (credDir) await rm(credDir, { recursive: true, force: true });
  });

  it('GET /api/v2/results, .csv and .xml answer as the node does, for every query', async () => {
    const queries = [
      '', '?filter=result:fail', '?filter=-result:pass&sort=testcase:asc', '?filter=testcase:tests/basic.py::*&sort=duration:desc',
      '?limit=2', '?sort=result:asc', '?filter=arithmetic', `?filter=job:${encodeURIComponent(ids[0]!.split('/').slice(0, 4).join('/'))}`,
      '?tz=Europe/Paris', '?filter=date:2020-01-01',
    ];
    for (const q of queries) {
      const f = await same(`/api/v2/results${q}`);
      if (q === '' || q.startsWith('?tz')) expect(JSON.parse(f.text)).to.have.length(ids.length);
      await same(`/api/v2/results.csv${q}`);
      await same(`/api/v2/results.xml${q}`);
    }
    await same('/api/v2/results.xml?include_tz=true&junit_classname=file&tz=America/New_York');
    await same('/api/v2/results.xml?include_tz=true&junit_classname=filename');
    // Bad queries: the node's error, from the same parser.
    for (const q of ['?filter=nokey:x', '?sort=nothing', '?tz=Mars/Base', '?filter=date:2020-13-45']) {
      const f = await same(`/api/v2/results${q}`);
      expect(f.status, q).to.equal(400);
    }
    await same('/api/v2/results.xml?include_tz=maybe');
    await same('/api/v2/results.xml?junit_classname=nope');
  });

  it('detail, logs, screenshot, artifacts and artifact files come from the portal`s storage, as the node serves them', async () => {
    const forwarded = portal.hub.forwarded;
    for (const id of ids) {
      await same(`/api/v2/results${id}`);
      await same(`/api/v2/results${id}/farmhand.log`, { binary: true });
      await same(`/api/v2/results${id}/stbt.log`, { binary: true });
      await same(`/api/v2/results${id}/farmhand.log?tz=Europe/Paris`, { binary: true });
      await same(`/api/v2/results${id}/screenshot.png`, { binary: true });
      const listing = JSON.parse((await same(`/api/v2/results${id}/artifacts`)).text) as Record<string, { size: number; md5: string }>;
      expect(Object.keys(listing)).to.include.members(['farmhand.log', 'screenshot.png']);
      for (const rel of Object.keys(listing)) await same(`/api/v2/results${id}/artifacts/${rel}`, { binary: true });
      await same(`/api/v2/results${id}/artifacts/no/such/file`);
      await same(`/api/v2/results${id}/artifacts/..%2F..%2Fresult.json`);
    }
    const tags = ids.find((id) => d.daemon.services.results.get(id) !== 'deleted' && (d.daemon.services.results.get(id) as { test_case: string }).test_case.endsWith('test_tags'))!;
    expect((await fromPortal(`/api/v2/results${tags}/artifacts/tag.txt`)).text).to.match(/^7 /);
    // A Range of an uploaded file, as the node answers it.
    const ranged = await fetch(`${portal.url}/api/v2/results${ids[0]}/farmhand.log`, { headers: { Range: 'bytes=0-9' } });
    expect(ranged.status).to.equal(206);
    expect((await ranged.arrayBuffer()).byteLength).to.equal(10);
    expect(portal.hub.forwarded, 'nothing was passed on to the node').to.equal(forwarded);
  });

  it('a result whose files are not uploaded yet is passed on to its node (its record came in the node stream); unknown ids are 404, a node not connected 503', async () => {
    await d.daemon.uploader!.stop();
    const res = await as.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: [TESTS[0]], shuffle: false, tags: {} });
    await as.get(`/api/v2/jobs${res.body.job_uid}/await_completion`);
    const [id] = d.daemon.services.results.query(parseResultQuery({ filter: `job:${res.body.job_uid}` })).map((r) => r.result_id);
    // The record is the stream's (docs/farm.md, "The node stream"); the files, the uploader's (stopped).
    await waitFor(async () => (await portal.index.get(id!)) !== undefined, { what: "the record in the farm index from the node's stream", timeoutMs: 60_000 });
    expect(await portal.store.filesOnNode(id!)).to.equal(true);
    const forwarded = portal.hub.forwarded;
    await same(`/api/v2/results${id}`, { forwarded: true });
    await same(`/api/v2/results${id}/farmhand.log`, { binary: true });
    await same(`/api/v2/results${id}/artifacts`);
    await same(`/api/v2/results${id}/screenshot.png`, { binary: true });
    expect(portal.hub.forwarded - forwarded).to.equal(4);
    // The farm-wide list is the index's: there with its record.
    expect(JSON.parse((await fromPortal('/api/v2/results')).text).map((r: { result_id: string }) => r.result_id)).to.include(id);
    // Unknown on the node: its own 404.
    const unknown = `/${NODE}/abcd/999/2026-01-01_00.00.00`;
    const f = await same(`/api/v2/results${unknown}`);
    expect(f.status).to.equal(404);
    expect(JSON.parse(f.text).error).to.equal('not_found');
    const ghost = await fromPortal('/api/v2/results/ghost-node/abcd/1/2026-01-01_00.00.00');
    expect(ghost.status).to.equal(503);
    expect(JSON.parse(ghost.text).error).to.equal('device_unavailable');
    const malformed = await fromPortal('/api/v2/results/node-r/xyz/1/2026-01-01_00.00.00');
    expect(malformed.status).to.equal(404);
    expect(JSON.parse(malformed.text).error).to.equal('not_found');
  });

  it('a result the portal deleted answers 410 and leaves the lists', async () => {
    const id = ids[0]!;
    const before = (JSON.parse((await fromPortal('/api/v2/results')).text) as unknown[]).length;
    expect(await portal.store.delete([id])).to.equal(1);
    for (const p of ['', '/farmhand.log', '/stbt.log', '/screenshot.png', '/artifacts', '/artifacts/farmhand.log']) {
      const f = await fromPortal(`/api/v2/results${id}${p}`);
      expect(f.status, p).to.equal(410);
      expect(JSON.parse(f.text).error, p).to.equal('gone');
    }
    const listed = JSON.parse((await fromPortal('/api/v2/results')).text).map((r: { result_id: string }) => r.result_id);
    expect(listed).to.not.include(id);
    expect(listed).to.have.length(before - 1);
  });
});
