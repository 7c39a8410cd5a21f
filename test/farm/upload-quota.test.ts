/**
 * The quota of one node's unfinished uploads on the portal (docs/farm.md, "What a node can do to the portal"):
 * the upload API on a real HTTP server and PostgreSQL, with a quota of 1 MiB per node. A chunk that would take a
 * node's partial files past it is refused whole (507 JSON, nothing of it kept), other nodes are not held to it,
 * completing or discarding a file makes room, chunks of many files at once cannot pass it together, a partial file untouched for an hour is released to make room,
 * and the count survives a restart of the portal (its files are named by node).
 */
import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { readdir, utimes } from 'node:fs/promises';
import path from 'node:path';
import { FarmUploads } from '../../src/farm/uploads.js';
import { startResultsPortal, type ResultsPortal } from '../helpers/farmResultsPortal.js';
import { rawRequest } from '../helpers/rawRequest.js';

const QUOTA = 1024 * 1024;
const KiB = 1024;
const A = 'quota-a';
const B = 'quota-b';
const idOf = (node: string) => `/${node}/abcd/1/2026-11-26_02.00.00`;
const fileOf = (node: string, name: string) => `/farm/v1/results${idOf(node)}/files/${name}`;
const sha = (b: Buffer): string => createHash('sha256').update(b).digest('hex');

describe('farm: the quota of a node`s partial uploads', function () {
  this.timeout(120_000);
  let portal: ResultsPortal;
  const call = (node: string, method: string, p: string, body?: string | Buffer) => rawRequest(portal.url, method, p, body, { Authorization: `node cred-${node}`, 'X-Farmhand-Node': node });
  const offset = async (node: string, name: string) => (await call(node, 'GET', fileOf(node, name))).json.offset;

  before(async () => {
    portal = await startResultsPortal({ maxPartialBytesPerNode: QUOTA });
    portal.credentials.map.set(A, `cred-${A}`);
    portal.credentials.map.set(B, `cred-${B}`);
  });
  after(async () => {
    await portal?.close();
  });

  it('refuses (507 JSON) a chunk past the node`s quota, keeps nothing of it, and holds no other node to it; completing a file makes room', async () => {
    const x = Buffer.alloc(700 * KiB, 1);
    expect((await call(A, 'PUT', `${fileOf(A, 'x.bin')}?offset=0`, x)).status).to.equal(200);
    const refused = await call(A, 'PUT', `${fileOf(A, 'y.bin')}?offset=0`, Buffer.alloc(400 * KiB, 2));
    expect(refused.status, refused.text).to.equal(507);
    expect(refused.type).to.equal('application/json');
    expect(refused.json.error).to.equal('storage_full');
    expect(refused.json.message).to.contain('max_partial_upload_bytes_per_node').and.contain(String(QUOTA));
    expect(await offset(A, 'y.bin'), 'nothing of the refused chunk kept').to.equal(0);
    // The file under way counts too: it cannot grow past the quota either.
    expect((await call(A, 'PUT', `${fileOf(A, 'x.bin')}?offset=${x.length}`, Buffer.alloc(400 * KiB, 1))).status).to.equal(507);
    expect(await offset(A, 'x.bin')).to.equal(x.length);
    // Another node has its own quota.
    expect((await call(B, 'PUT', `${fileOf(B, 'x.bin')}?offset=0`, Buffer.alloc(700 * KiB, 3))).status).to.equal(200);
    expect(await portal.uploads.partialBytes(A)).to.equal(700 * KiB);
    // A completed file is no longer partial: room again.
    const done = await call(A, 'POST', fileOf(A, 'x.bin'), JSON.stringify({ sha256: sha(x) }));
    expect(done.status, done.text).to.equal(200);
    expect(await portal.uploads.partialBytes(A)).to.equal(0);
    expect((await call(A, 'PUT', `${fileOf(A, 'y.bin')}?offset=0`, Buffer.alloc(400 * KiB, 2))).status).to.equal(200);
    // And a discarded one.
    expect((await call(B, 'DELETE', fileOf(B, 'x.bin'))).status).to.equal(204);
    expect(await portal.uploads.partialBytes(B)).to.equal(0);
  });

  it('chunks of many files sent at once cannot pass the quota together', async () => {
    const C = 'quota-c';
    portal.credentials.map.set(C, `cred-${C}`);
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => call(C, 'PUT', `${fileOf(C, `f${i}.bin`)}?offset=0`, Buffer.alloc(300 * KiB, i))));
    const ok = answers.filter((a) => a.status === 200).length;
    expect(answers.every((a) => a.status === 200 || (a.status === 507 && a.json.error === 'storage_full')), answers.map((a) => a.text).join('\n')).to.equal(true);
    // 3 x 300 KiB fit under 1 MiB, a fourth does not.
    expect(ok, 'chunks accepted').to.equal(3);
    expect(await portal.uploads.partialBytes(C)).to.equal(ok * 300 * KiB);
    for (let i = 0; i < 8; i++) await call(C, 'DELETE', fileOf(C, `f${i}.bin`));
    expect(await portal.uploads.partialBytes(C)).to.equal(0);
  });

  it('a chunk sent without a length is held to the quota as it arrives', async () => {
    const u = new URL(portal.url);
    const answer = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = httpRequest(
        { host: u.hostname, port: u.port, method: 'PUT', path: `${fileOf(B, 'streamed.bin')}?offset=0`, headers: { Authorization: `node cred-${B}`, 'X-Farmhand-Node': B, 'Transfer-Encoding': 'chunked' } },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        },
      );
      req.on('error', reject);
      for (let i = 0; i < 20; i++) req.write(Buffer.alloc(64 * KiB, 4));
      req.end();
    });
    expect(answer.status, answer.text).to.equal(507);
    expect(JSON.parse(answer.text).error).to.equal('storage_full');
    expect(await offset(B, 'streamed.bin')).to.equal(0);
    expect(await portal.uploads.partialBytes(B)).to.equal(0);
  });

  it('releases the node`s partial files untouched for an hour to make room, and counts the files again after a restart', async () => {
    // y.bin (400 KiB, the first test's) has not been written to for two hours: an upload the node gave up.
    const partials = path.join(portal.storageDir, '.partial');
    const twoHoursAgo = new Date(Date.now() - 2 * 3600_000);
    const mine = (await readdir(partials)).filter((n) => n.startsWith(`${A}.`));
    expect(mine).to.have.length(1);
    await utimes(path.join(partials, mine[0]!), twoHoursAgo, twoHoursAgo);
    const z = await call(A, 'PUT', `${fileOf(A, 'z.bin')}?offset=0`, Buffer.alloc(900 * KiB, 5));
    expect(z.status, z.text).to.equal(200);
    expect(await offset(A, 'y.bin'), 'the stale partial file released: the node sends it again from 0').to.equal(0);
    expect(portal.uploads.stats.stalePartialsReleased).to.equal(1);
    // A portal started again finds the node's partial files by their names.
    const again = new FarmUploads(portal.store, { maxPartialBytesPerNode: QUOTA });
    expect(await again.partialBytes(A)).to.equal(900 * KiB);
    expect(await again.partialBytes(B)).to.equal(0);
  });
});
