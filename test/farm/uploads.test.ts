/**
 * Result uploads from a real node to a real portal HTTP server on a real
 * PostgreSQL: after a run the result is in the farm index with every file
 * byte-identical to the node's; a connection cut mid-file resumes where the
 * portal's copy ends (no byte sent twice); a portal down while the node runs
 * and restarts still gets every result once it is back, never twice; and the
 * upload API refuses a wrong checksum, another node's result, a path leaving
 * the result folder and a record that does not match its path. The record
 * goes ahead of the files: it is in the index while every file request is
 * held, and the portal reads the files from the node until they are uploaded.
 *
 * The node credentials are an in-test NodeCredentials (helpers/farmResultsPortal.ts).
 */
import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, stat, utimes, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { ResultRecord } from '../../src/core/model.js';
import { parseResultQuery, type ResultQuery } from '../../src/core/query.js';
import { ConfigError, loadConfig } from '../../src/config/load.js';
import { startDaemon } from '../../src/daemon.js';
import { UPLOAD_QUEUE_FILE, type ResultUploader } from '../../src/farm/uploader.js';
import { asUser } from '../helpers/auth.js';
import { rawRequest, type RawAnswer } from '../helpers/rawRequest.js';
import { daemonLogger } from '../helpers/daemonLogs.js';
import { startTestDaemon, type TestDaemon } from '../helpers/daemon.js';
import { startResultsPortal, type ResultsPortal } from '../helpers/farmResultsPortal.js';
import { waitFor } from '../helpers/wait.js';
import { STANDARD_FILES } from '../fixtures/testPack.js';

const NODE = 'node-a';
const CREDENTIAL = 'cred-' + randomBytes(16).toString('hex');
const BLOB = 'tests/blob.py::test_blob';
const PASS = 'tests/basic.py::test_pass';
const FAIL = 'tests/basic.py::test_fail';

export const FILES = {
  ...STANDARD_FILES,
  // A file of several chunks (1 MiB each) in a sub-folder.
  'tests/blob.py': [
    'import os',
    '',
    'def test_blob():',
    '    os.makedirs("big", exist_ok=True)',
    '    with open("big/blob.bin", "wb") as f:',
    '        f.write(os.urandom(3 * 1024 * 1024 + 12345))',
    '',
  ].join('\n'),
};

/** sha256 of every file under a folder, by relative path (the record file aside: each side writes its own). */
export async function filesOf(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string, prefix: string): Promise<void> => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const rel = prefix + e.name;
      if (e.isDirectory()) await walk(path.join(d, e.name), rel + '/');
      else if (rel !== 'result.json') out[rel] = createHash('sha256').update(await readFile(path.join(d, e.name))).digest('hex');
    }
  };
  await walk(dir, '');
  return out;
}

/** A TCP proxy in front of the portal that can cut every connection once `cutAfter` more bytes went up. */
async function startProxy(target: () => number): Promise<{ url: string; armCut(bytes: number): void; cuts: number; close(): Promise<void> }> {
  let budget: number | undefined;
  const state = { cuts: 0 };
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target(), '127.0.0.1');
    sockets.add(client).add(upstream);
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', () => sockets.delete(client));
    upstream.on('close', () => sockets.delete(upstream));
    client.on('error', end);
    upstream.on('error', end);
    upstream.on('close', end);
    client.on('close', end);
    upstream.pipe(client);
    client.on('data', (d: Buffer) => {
      if (budget !== undefined && (budget -= d.length) < 0) {
        budget = undefined;
        state.cuts++;
        end();
        return;
      }
      upstream.write(d);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}`,
    armCut: (bytes) => (budget = bytes),
    get cuts() {
      return state.cuts;
    },
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('farm: result uploads from a node to the portal', function () {
  this.timeout(180_000);
  let portal: ResultsPortal;
  let proxy: Awaited<ReturnType<typeof startProxy>>;
  let d: TestDaemon;
  let credDir: string;
  let as: Awaited<ReturnType<typeof asUser>>;
  const uploader = (): ResultUploader => d.daemon.uploader!;

  before(async () => {
    portal = await startResultsPortal();
    portal.credentials.map.set(NODE, CREDENTIAL);
    portal.credentials.map.set('node-b', 'cred-b');
    proxy = await startProxy(() => Number(new URL(portal.url).port));
    credDir = await mkdtemp(path.join(os.tmpdir(), 'farm-cred-'));
    await writeFile(path.join(credDir, 'node.cred'), `${CREDENTIAL}\n`);
    d = await startTestDaemon({
      files: FILES,
      config: {
        node_id: NODE,
        capture: { uri: 'none:' },
        api: { await_completion_secs: 600 },
        portal: { url: proxy.url, node_credential_file: path.join(credDir, 'node.cred') },
      },
    });
    as = await asUser(d, 'alice');
  });
  after(async () => {
    await d?.stop();
    await proxy?.close();
    await portal?.close();
    if (credDir) await rm(credDir, { recursive: true, force: true });
  });

  async function runJob(testCases: string[]): Promise<string[]> {
    const res = await as.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: testCases, shuffle: false, tags: {} });
    expect(res.status, res.text).to.equal(200);
    const uid = res.body.job_uid as string;
    await waitFor(async () => (await as.get(`/api/v2/jobs${uid}`)).body.status === 'exited', { what: `job ${uid} to end`, timeoutMs: 120_000, maxIntervalMs: 500 });
    return d.daemon.services.results.query(queryJob(uid)).map((r) => r.result_id);
  }

  it('after a run the result is in the farm index, every file byte-identical to the node`s, even across a connection cut mid-file (resumed, no byte sent twice)', async () => {
    const received = portal.uploads.stats.bytesReceived;
    proxy.armCut(1_500_000); // inside the second 1 MiB chunk of big/blob.bin
    const res = await as.post('/api/v2/run_tests').send({ node_id: NODE, test_pack_revision: 'main', test_cases: [BLOB], shuffle: false, tags: {} });
    expect(res.status, res.text).to.equal(200);
    const uid = res.body.job_uid as string;
    const rec = await waitFor(async () => (await portal.index.query(queryJob(uid)))[0], { what: 'the result in the farm index', timeoutMs: 120_000, maxIntervalMs: 500 });
    // The record goes ahead of the files: wait for the files too.
    await waitFor(() => uploader().delivered > 0, { what: 'the files uploaded', timeoutMs: 120_000 });
    expect(proxy.cuts, 'the connection was cut').to.equal(1);
    expect(uploader().failures).to.be.greaterThan(0);
    const nodeRec = d.daemon.services.results.get(rec.result_id);
    expect(rec).to.deep.equal(asIndexed(nodeRec));
    const nodeFiles = await filesOf(d.daemon.services.results.dirOf(rec.result_id));
    expect(nodeFiles).to.have.property('big/blob.bin');
    expect(nodeFiles).to.have.property('farmhand.log');
    expect(await filesOf(portal.store.dirOf(rec.result_id))).to.deep.equal(nodeFiles);
    // What came through is exactly the files' bytes: the cut chunk resumed after what had arrived.
    let total = 0;
    for (const rel of Object.keys(nodeFiles)) total += (await stat(path.join(d.daemon.services.results.dirOf(rec.result_id), rel))).size;
    expect(portal.uploads.stats.bytesReceived - received).to.equal(total);
    // result.json is the record the portal folded from the node's stream (docs/farm.md, "The node stream").
    expect(JSON.parse(await readFile(path.join(portal.store.dirOf(rec.result_id), 'result.json'), 'utf8'))).to.deep.equal(asIndexed(nodeRec));
    await waitFor(() => uploader().pending.length === 0, 'the queue to empty');
    expect(portal.uploads.stats.checksumMismatches).to.equal(0);
    expect(portal.errors, 'the cut is a client error, not a 500').to.deep.equal([]);
  });

  it('a portal down while the node runs and restarts gets every result once it is back, each once', async () => {
    await portal.pause();
    const before = uploader().failures;
    const ids = await runJob([PASS, FAIL]);
    expect(ids).to.have.length(2);
    await waitFor(() => uploader().failures > before && uploader().pending.length === 2, 'the uploader to try and keep both results');
    for (const id of ids) expect(await portal.index.get(id)).to.equal(undefined);
    // The node restarts while the portal is still down: the queue is in its data directory.
    await d.daemon.stop();
    const queued = JSON.parse(await readFile(path.join(d.dataDir, UPLOAD_QUEUE_FILE), 'utf8')) as { results: Array<{ result_id: string }> };
    expect(queued.results.map((r) => r.result_id).sort()).to.deep.equal([...ids].sort());
    d.daemon = await startDaemon(d.config, daemonLogger().logger);
    await waitFor(() => uploader().failures > 0, 'the restarted node to try the portal');
    await portal.start();
    uploader().nudge();
    await waitFor(() => uploader().pending.length === 0, { what: 'every result delivered', timeoutMs: 60_000 });
    for (const id of ids) {
      expect(await portal.index.get(id)).to.deep.equal(asIndexed(d.daemon.services.results.get(id)));
      expect(await filesOf(portal.store.dirOf(id))).to.deep.equal(await filesOf(d.daemon.services.results.dirOf(id)));
    }
    // Delivered again (a node that lost its queue's last write): replaced, never duplicated.
    const count = await portal.index.count();
    const delivered = uploader().delivered;
    uploader().enqueue(ids[0]!);
    await waitFor(() => uploader().delivered > delivered, 'the second delivery');
    expect(await portal.index.count()).to.equal(count);
    expect(count).to.equal(3);
    const farm = (await portal.index.query(queryAll())).map((r) => r.result_id).sort();
    expect(farm).to.deep.equal(d.daemon.services.results.query(queryAll()).map((r) => r.result_id).sort());
  });

  it('results recorded after the queue file was last written (a crash between) are queued at the next start', async () => {
    const all = d.daemon.services.results.query(queryAll()); // newest first
    expect(all).to.have.length(3);
    const [newest, second, oldest] = all as [ResultRecord, ResultRecord, ResultRecord];
    // The portal's copies of their files go (their records stay: they came in the node's stream).
    for (const r of [newest, second]) await rm(portal.store.dirOf(r.result_id), { recursive: true, force: true });
    await d.daemon.stop();
    // The queue as a crash right after the oldest run's record would have left it.
    await writeFile(path.join(d.dataDir, UPLOAD_QUEUE_FILE), JSON.stringify({ version: 1, since: oldest.start_time, results: [] }));
    d.daemon = await startDaemon(d.config, daemonLogger().logger);
    for (const r of [newest, second]) {
      await waitFor(async () => !(await portal.store.filesOnNode(r.result_id)), { what: `the files of ${r.result_id} uploaded again`, timeoutMs: 60_000 });
    }
    await waitFor(() => uploader().pending.length === 0, { what: 'their files uploaded', timeoutMs: 60_000 });
    expect(await portal.index.count()).to.equal(3);
    for (const r of [newest, second]) expect(await filesOf(portal.store.dirOf(r.result_id))).to.deep.equal(await filesOf(d.daemon.services.results.dirOf(r.result_id)));
  });

  describe('the upload API refuses', () => {
    const ID = `/${NODE}/abcd/999/2026-11-24_01.02.03`;
    const call = (method: string, p: string, body?: string | Buffer, headers: Record<string, string> = {}) =>
      rawRequest(portal.url, method, p, body, { Authorization: `node ${CREDENTIAL}`, 'X-Farmhand-Node': NODE, ...headers });

    it('a wrong checksum (400, and the partial file is discarded)', async () => {
      const f = `/farm/v1/results${ID}/files/some.log`;
      expect((await call('PUT', `${f}?offset=0`, Buffer.from('hello '))).status).to.equal(200);
      const second = await call('PUT', `${f}?offset=6`, Buffer.from('world'));
      expect(second.json).to.deep.include({ offset: 11 });
      const wrongOffset = await call('PUT', `${f}?offset=3`, Buffer.from('xx'));
      expect(wrongOffset.status).to.equal(409);
      expect(wrongOffset.json).to.include({ error: 'conflict', offset: 11 });
      const bad = await call('POST', f, JSON.stringify({ sha256: sha('hello there') }));
      expectJsonError(bad, 400, 'invalid_request');
      expect((await call('GET', f)).json).to.deep.equal({ offset: 0, complete_size: null });
      // The right bytes and checksum then complete it.
      await call('PUT', `${f}?offset=0`, Buffer.from('hello world'));
      const ok = await call('POST', f, JSON.stringify({ sha256: sha('hello world') }));
      expect(ok.status, ok.text).to.equal(200);
      expect(await readFile(path.join(portal.store.dirOf(ID), 'some.log'), 'utf8')).to.equal('hello world');
      expect((await call('GET', f)).json).to.deep.equal({ offset: 0, complete_size: 11 });
    });

    it('another node`s result, a wrong credential, no credential (403)', async () => {
      expectJsonError(await call('PUT', `/farm/v1/results/node-b/abcd/1/2026-11-24_01.02.03/files/x.log?offset=0`, Buffer.from('x')), 403, 'forbidden');
      expectJsonError(await call('PUT', `/farm/v1/results/node-b/abcd/1/2026-11-24_01.02.03/record`, '{}'), 403, 'forbidden');
      expectJsonError(await call('GET', `/farm/v1/results${ID}/files/x.log`, undefined, { 'X-Farmhand-Node': 'node-b' }), 403, 'forbidden');
      expectJsonError(await call('GET', `/farm/v1/results${ID}/files/x.log`, undefined, { Authorization: 'node wrong' }), 403, 'forbidden');
      expectJsonError(await rawRequest(portal.url, 'GET', `/farm/v1/results${ID}/files/x.log`), 403, 'forbidden');
    });

    it('a path leaving the result folder, or naming the record or a temporary file (400)', async () => {
      const escaped = `escaped-${randomBytes(4).toString('hex')}`;
      for (const p of ['..%2f..%2f..%2fetc%2fpasswd', `%2e%2e/%2e%2e/${escaped}`, `a/../../${escaped}`, `${'..%2f'.repeat(7)}${escaped}`, 'a/./b', '%2fetc%2fpasswd', 'a%5c..%5cb', 'a//b', 'result.json', 'x/.f.123.tmp', 'nul%00byte']) {
        expectJsonError(await call('PUT', `/farm/v1/results${ID}/files/${p}?offset=0`, Buffer.from('x')), 400, 'invalid_request', p);
        expectJsonError(await call('POST', `/farm/v1/results${ID}/files/${p}`, JSON.stringify({ sha256: sha('x') })), 400, 'invalid_request', p);
      }
      for (const dir of [path.dirname(portal.storageDir), portal.storageDir, path.join(portal.storageDir, NODE)]) expect(await readdir(dir)).to.not.include(escaped);
      expect(await readdir(portal.store.dirOf(ID))).to.deep.equal(['some.log']);
    });

    it('a record that is not valid or not the one of its path (400), a chunk too large (413)', async () => {
      expectJsonError(await call('PUT', `/farm/v1/results${ID}/record`, '{"result_id": 3}'), 400, 'invalid_request');
      expectJsonError(await call('PUT', `/farm/v1/results${ID}/record`, 'not json'), 400, 'invalid_request');
      const other = d.daemon.services.results.query(queryAll())[0]!;
      expectJsonError(await call('PUT', `/farm/v1/results${ID}/record`, JSON.stringify(other)), 400, 'invalid_request');
      expectJsonError(await call('PUT', `/farm/v1/results${ID}/record`, JSON.stringify({ ...other, result_id: ID })), 400, 'invalid_request');
      // A record under its own path that names another node's result or job (docs/farm.md, "What a node can do to the portal").
      expectJsonError(await call('PUT', `/farm/v1/results${ID}/record`, JSON.stringify({ ...other, result_id: '/node-b/abcd/1/2026-11-24_01.02.03', job_uid: '/node-b/abcd/1' })), 400, 'invalid_request');
      expectJsonError(await call('PUT', `/farm/v1/results${ID}/record`, JSON.stringify({ ...other, result_id: ID, job_uid: '/node-b/abcd/999' })), 400, 'invalid_request');
      expectJsonError(await call('PUT', `/farm/v1/results${ID}/files/big.bin?offset=0`, Buffer.alloc(portal.uploads.maxChunkBytes + 1)), 413, 'payload_too_large');
      expect(await portal.index.get(ID)).to.equal(undefined);
    });
  });

  it('retention on the portal: the oldest results go first past max_results and while free space is short; a deleted id answers 410', async () => {
    const before = await portal.index.count();
    expect(before, 'the runs above left results on the portal').to.be.at.least(3);
    const oldest = await portal.index.oldest(before);
    expect(await portal.store.enforceRetention({ max_results: before - 1, min_free_mb: 0 })).to.equal(1);
    expect(await portal.index.oldest(before)).to.deep.equal(oldest.slice(1));
    expect(await stat(portal.store.dirOf(oldest[0]!)).catch(() => 'gone')).to.equal('gone');
    expect((await fetch(`${portal.url}/api/v2/results${oldest[0]}`)).status).to.equal(410);
    // Free space "short" until two more are gone.
    const diskFree = async (): Promise<number> => ((await portal.index.count()) <= before - 3 ? 2 ** 40 : 0);
    expect(await portal.store.enforceRetention({ max_results: 1e9, min_free_mb: 1 }, diskFree)).to.equal(2);
    expect(await portal.index.oldest(before)).to.deep.equal(oldest.slice(3));
  });

  it('a result the portal never heard of, uploaded for a job the portal ended, counts in that job (the counts are the index`s)', async () => {
    const uid = `/${NODE}/feed/5`;
    const lost = `${uid}/2026-11-24_05.00.00`;
    const late = `${uid}/2026-11-24_05.01.00`;
    await portal.pool.query(`INSERT INTO nodes (node_id) VALUES ($1) ON CONFLICT DO NOTHING`, [NODE]);
    const counts = { pass: 0, fail: 0, error: 1, total: 1 };
    await portal.pool.query(`INSERT INTO jobs (job_uid, node_id, username, state, job, end_reason) VALUES ($1, $2, 'alice', 'exited', $3, 'node went offline')`, [
      uid,
      NODE,
      JSON.stringify({ status: 'exited', start_time: '2026-11-24T05:00:00.000Z', end_time: '2026-11-24T05:02:00.000Z', result_counts: counts }),
    ]);
    const model = d.daemon.services.results.query(queryAll())[0]!;
    // The portal's account of the run in flight, then the node's record of a run whose run.finished never arrived.
    await portal.index.put([{ ...model, result_id: lost, job_uid: uid, result: 'error', failure_reason: 'node went offline' }]);
    const res = await rawRequest(portal.url, 'PUT', `/farm/v1/results${late}/record`, JSON.stringify({ ...model, result_id: late, job_uid: uid, result: 'pass' }), {
      Authorization: `node ${CREDENTIAL}`,
      'X-Farmhand-Node': NODE,
    });
    expect(res.status, res.text).to.equal(200);
    const { rows } = await portal.pool.query<{ job: { result_counts: unknown } }>('SELECT job FROM jobs WHERE job_uid = $1', [uid]);
    expect(rows[0]!.job.result_counts).to.deep.equal({ pass: 1, fail: 0, error: 1, total: 2 });
    expect((await portal.index.query(queryJob(uid))).map((r) => r.result_id).sort()).to.deep.equal([lost, late]);
    // The lost run's detail is the portal's account while its node is connected (not forwarded to the node,
    // whose late version would say otherwise) though none of its files reached the portal.
    as = await asUser({ ...d, url: d.daemon.url }, 'alice');
    portal.hub.nodes.set(NODE, { url: d.daemon.url, token: as.token });
    expect(await portal.store.filesOnNode(lost)).to.equal(true);
    const forwarded = portal.hub.forwarded;
    const detail = await fetch(`${portal.url}/api/v2/results${lost}`);
    expect(detail.status).to.equal(200);
    expect(await detail.json()).to.include({ result_id: lost, result: 'error', failure_reason: 'node went offline' });
    expect(portal.hub.forwarded, 'answered by the portal').to.equal(forwarded);
  });

  it('a partial file nobody wrote to for 7 days is swept (the node is told offset 0 and sends it again); a fresh one stays', async () => {
    const ID = `/${NODE}/abcd/998/2026-11-24_01.02.03`;
    const call = (method: string, p: string, body?: string | Buffer) => rawRequest(portal.url, method, p, body, { Authorization: `node ${CREDENTIAL}`, 'X-Farmhand-Node': NODE });
    const stale = `/farm/v1/results${ID}/files/stale.log`;
    const fresh = `/farm/v1/results${ID}/files/fresh.log`;
    expect((await call('PUT', `${stale}?offset=0`, Buffer.from('abandoned'))).status).to.equal(200);
    expect((await call('PUT', `${fresh}?offset=0`, Buffer.from('under way'))).status).to.equal(200);
    const partials = path.join(portal.storageDir, '.partial');
    const before = await readdir(partials);
    const eightDaysAgo = new Date(Date.now() - 8 * 24 * 3600_000);
    for (const name of before) {
      const file = path.join(partials, name);
      if ((await readFile(file, 'utf8')) === 'abandoned') await utimes(file, eightDaysAgo, eightDaysAgo);
    }
    expect(await portal.uploads.sweepPartials()).to.equal(1);
    expect((await readdir(partials)).length).to.equal(before.length - 1);
    expect((await call('GET', stale)).json).to.deep.equal({ offset: 0, complete_size: null });
    expect((await call('GET', fresh)).json).to.deep.equal({ offset: 9, complete_size: null });
  });

  it('the record reaches the farm index before any file is uploaded; meanwhile the portal reads the result`s files from the node (its record alone when the node is away), then from its storage', async () => {
    // The node was restarted above (a new port).
    as = await asUser({ ...d, url: d.daemon.url }, 'alice');
    portal.hub.nodes.set(NODE, { url: d.daemon.url, token: as.token });
    const delivered = uploader().delivered;
    const completed = portal.uploads.stats.filesCompleted;
    const gate = portal.holdFiles();
    let id: string;
    let fromNode: Record<string, string>;
    try {
      [id] = (await runJob([PASS])) as [string];
      await waitFor(async () => (await portal.index.get(id)) !== undefined, { what: 'the record in the farm index', timeoutMs: 60_000 });
      await waitFor(() => gate.held > 0, 'the first file request to be held');
      expect(await portal.index.get(id)).to.deep.equal(asIndexed(d.daemon.services.results.get(id)));
      expect(portal.uploads.stats.filesCompleted, 'no file completed').to.equal(completed);
      expect(uploader().delivered).to.equal(delivered);
      expect(await portal.store.filesOnNode(id)).to.equal(true);
      expect(await readdir(portal.store.dirOf(id)).catch(() => []), 'nothing of it in storage').to.deep.equal([]);
      fromNode = await filesOf(d.daemon.services.results.dirOf(id));
      expect(fromNode).to.have.property('farmhand.log');
      const forwarded = portal.hub.forwarded;
      expect(await filesThroughPortal(portal.url, id)).to.deep.equal(fromNode);
      expect(portal.hub.forwarded, 'read from the node').to.be.greaterThan(forwarded);
      // The node not connected: the portal answers with what it holds (the record; no file yet), not 503.
      const node = portal.hub.nodes.get(NODE)!;
      portal.hub.nodes.delete(NODE);
      try {
        const detail = await fetch(`${portal.url}/api/v2/results${id}`);
        expect(detail.status).to.equal(200);
        expect(await detail.json()).to.include({ result_id: id, result: 'pass' });
        expect(await (await fetch(`${portal.url}/api/v2/results${id}/artifacts`)).json()).to.deep.equal({});
        expect((await fetch(`${portal.url}/api/v2/results${id}/artifacts/farmhand.log`)).status).to.equal(404);
      } finally {
        portal.hub.nodes.set(NODE, node);
      }
    } finally {
      gate.release();
    }
    await waitFor(() => uploader().delivered > delivered, { what: 'the files uploaded', timeoutMs: 60_000 });
    expect(await portal.store.filesOnNode(id)).to.equal(false);
    expect(await filesOf(portal.store.dirOf(id))).to.deep.equal(fromNode);
    const forwarded = portal.hub.forwarded;
    expect(await filesThroughPortal(portal.url, id)).to.deep.equal(fromNode);
    expect(portal.hub.forwarded, 'read from the portal`s storage').to.equal(forwarded);
    expect(portal.errors).to.deep.equal([]);
  });

  it('a record with files=<anything but pending> is refused (400); files=pending for a result already whole on the portal (a re-delivery) keeps it served from storage', async () => {
    const whole = d.daemon.services.results.query(queryAll())[0]!;
    expect(await portal.store.filesOnNode(whole.result_id)).to.equal(false);
    const call = (q: string) =>
      rawRequest(portal.url, 'PUT', `/farm/v1/results${whole.result_id}/record${q}`, JSON.stringify(whole), { Authorization: `node ${CREDENTIAL}`, 'X-Farmhand-Node': NODE });
    expectJsonError(await call('?files=later'), 400, 'invalid_request');
    const res = await call('?files=pending');
    expect(res.status, res.text).to.equal(200);
    expect(await portal.store.filesOnNode(whole.result_id)).to.equal(false);
    const forwarded = portal.hub.forwarded;
    expect(await filesThroughPortal(portal.url, whole.result_id)).to.deep.equal(await filesOf(d.daemon.services.results.dirOf(whole.result_id)));
    expect(portal.hub.forwarded).to.equal(forwarded);
  });

  it('portal.upload_delay_secs takes 0 to 300 seconds; anything else is refused naming the key', async () => {
    const file = path.join(credDir, 'farmhand.json');
    const withDelay = (v: unknown) =>
      writeFile(file, JSON.stringify({ test_pack: { url: 'https://example.com/pack.git' }, portal: { url: 'wss://portal.example', node_credential_file: 'node.cred', upload_delay_secs: v } }));
    for (const ok of [0, 2.5, 300]) {
      await withDelay(ok);
      expect(loadConfig(file).portal!.upload_delay_secs).to.equal(ok);
    }
    for (const bad of [-1, 301, '3']) {
      await withDelay(bad);
      expect(() => loadConfig(file), String(bad)).to.throw(ConfigError, /portal\.upload_delay_secs/);
    }
  });

  it('a run`s files wait portal.upload_delay_secs after its end (the next job`s start goes first), holding up no result behind them; what the queue file holds at a start goes at once', async () => {
    const slow = { ...d.config, portal: { ...d.config.portal!, upload_delay_secs: 3600 } };
    const restart = async (): Promise<string> => {
      await d.daemon.stop();
      const log = daemonLogger();
      d.daemon = await startDaemon(slow, log.logger);
      as = await asUser({ ...d, url: d.daemon.url }, 'alice');
      return log.file;
    };
    // A result of the node as configured (the default 3 s), delivered.
    const [older] = (await runJob([PASS])) as [string];
    await waitFor(() => uploader().pending.length === 0, { what: 'the first result delivered', timeoutMs: 60_000 });
    const logFile = await restart();
    const received = portal.uploads.stats.bytesReceived;
    const [id] = (await runJob([PASS])) as [string];
    await waitFor(async () => (await portal.index.get(id)) !== undefined, { what: 'the record in the farm index', timeoutMs: 60_000 });
    // The uploader came to it and waits, rather than sending it.
    await waitFor(async () => (await readFile(logFile, 'utf8')).split('\n').some((l) => l.includes('result waits before its upload') && l.includes(id)), 'the uploader to hold the result');
    expect(uploader().pending).to.deep.equal([id]);
    expect(portal.uploads.stats.bytesReceived, 'no byte sent').to.equal(received);
    expect(await portal.store.filesOnNode(id)).to.equal(true);
    // A result queued behind the waiting one (as one that failed goes to the back) is not held up by it.
    const delivered = uploader().delivered;
    uploader().enqueue(older);
    await waitFor(() => uploader().delivered > delivered, 'the result queued behind the waiting one delivered');
    expect(uploader().pending).to.deep.equal([id]);
    expect(await portal.store.filesOnNode(id)).to.equal(true);
    // The wait is not kept across a restart: the queue file's result goes at once, the hour's delay notwithstanding.
    await restart();
    await waitFor(() => uploader().pending.length === 0, { what: 'the result delivered after the restart', timeoutMs: 60_000 });
    expect(await filesOf(portal.store.dirOf(id))).to.deep.equal(await filesOf(d.daemon.services.results.dirOf(id)));
    await d.daemon.stop();
    d.daemon = await startDaemon(d.config, daemonLogger().logger);
  });
});

/** sha256 of every file of a result read through the portal's v2 API (its artifact listing, then each file). */
async function filesThroughPortal(base: string, id: string): Promise<Record<string, string>> {
  const listing = await fetch(`${base}/api/v2/results${id}/artifacts`);
  expect(listing.status).to.equal(200);
  const out: Record<string, string> = {};
  for (const rel of Object.keys((await listing.json()) as Record<string, unknown>)) {
    const res = await fetch(`${base}/api/v2/results${id}/artifacts/${rel.split('/').map(encodeURIComponent).join('/')}`);
    expect(res.status, rel).to.equal(200);
    out[rel] = createHash('sha256').update(Buffer.from(await res.arrayBuffer())).digest('hex');
  }
  return out;
}

/** The index gives infrastructure_error back only when there is one (results.ts). */
function asIndexed(r: unknown): unknown {
  const { infrastructure_error: kind, ...rest } = r as Record<string, unknown>;
  return kind == null ? rest : { ...rest, infrastructure_error: kind };
}

const sha = (s: string): string => createHash('sha256').update(s).digest('hex');

export const queryAll = (): ResultQuery => parseResultQuery({});
const queryJob = (uid: string): ResultQuery => parseResultQuery({ filter: `job:${uid}` });

function expectJsonError(res: RawAnswer, status: number, code: string, what = ''): void {
  expect(res.status, `${what} ${res.text}`).to.equal(status);
  expect(res.type, what).to.equal('application/json');
  expect(res.json.error, what).to.equal(code);
  expect(res.json.message, what).to.be.a('string').and.not.equal('');
}
