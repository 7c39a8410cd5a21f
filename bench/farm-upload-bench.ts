/**
 * Result uploads node -> portal on loopback: a result with one large file
 * (a video-sized artifact) and the usual small files, delivered by the
 * node's ResultUploader to a real portal server (upload API over a throwaway
 * PostgreSQL), N times. Prints throughput and the uploader process's memory
 * growth (chunks are read into one reused 1 MiB buffer).
 *
 *   node --import tsx bench/farm-upload-bench.ts [--mib 256] [--runs 3]
 */
import { randomBytes } from 'node:crypto';
import { open, writeFile } from 'node:fs/promises';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { ResultUploader } from '../src/farm/uploader.js';
import { FileResultRepository } from '../src/storage/results/index.js';
import { startResultsPortal } from '../test/helpers/farmResultsPortal.js';
import { mkdtemp } from 'node:fs/promises';
import os from 'node:os';

const arg = (name: string, def: number): number => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : def;
};
const MIB = arg('mib', 256);
const RUNS = arg('runs', 3);
const NODE = 'bench-node';

async function main(): Promise<void> {
  const portal = await startResultsPortal();
  portal.credentials.map.set(NODE, 'bench-cred');
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'farm-upload-bench-'));
  const results = new FileResultRepository({ dir: path.join(dataDir, 'results'), retention: { max_results: 1e6, min_free_mb: 0 } });
  await results.open();
  const ids: string[] = [];
  for (let i = 0; i < RUNS; i++) {
    const start = new Date(Date.UTC(2026, 10, 24, 1, 0, i));
    const id = `/${NODE}/beef/${i + 1}/2026-11-24_01.00.${String(i).padStart(2, '0')}`;
    const dir = await results.createRunDir(id);
    const fh = await open(path.join(dir, 'video.mp4'), 'w');
    const block = randomBytes(1 << 20);
    for (let m = 0; m < MIB; m++) await fh.write(block);
    await fh.close();
    for (const f of ['farmhand.log', 'stdout.log', 'stderr.log', 'combined.log']) await writeFile(path.join(dir, f), randomBytes(20_000).toString('hex'));
    await results.add({
      result_id: id, job_uid: `/${NODE}/beef/${i + 1}`, test_case: 'tests/a.py::test_a', test_pack_sha: 'f'.repeat(40), test_pack_branch: 'main',
      category: 'default', username: 'bench', tags: {}, start_time: start.toISOString(), end_time: new Date(start.getTime() + 1000).toISOString(),
      duration: 1, result: 'pass', failure_reason: null, traceback: null,
    });
    ids.push(id);
  }
  const uploader = new ResultUploader({
    nodeId: NODE, portalUrl: portal.url, credential: 'bench-cred', results,
    events: { subscribe: () => ({ close: () => undefined }) }, queueFile: path.join(dataDir, 'farm-uploads.json'),
  });
  await uploader.start();
  const rss0 = process.memoryUsage().rss;
  let peak = rss0;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().rss)), 50);
  const times: number[] = [];
  for (const id of ids) {
    const t0 = performance.now();
    const done = new Promise<void>((resolve) => {
      const off = uploader.onDelivered((got) => {
        if (got === id) {
          off();
          resolve();
        }
      });
    });
    uploader.enqueue(id);
    await done;
    times.push(performance.now() - t0);
  }
  clearInterval(sampler);
  await uploader.stop();
  const mb = MIB + 0.16;
  console.log(`result upload, loopback, ${MIB} MiB file + 4 logs, ${RUNS} runs (portal in the same process)`);
  for (const [i, t] of times.entries()) console.log(`  run ${i + 1}: ${(t / 1000).toFixed(2)} s, ${(mb / (t / 1000)).toFixed(1)} MiB/s`);
  console.log(`  process RSS growth during uploads (uploader + portal): peak ${((peak - rss0) / 2 ** 20).toFixed(1)} MiB`);
  console.log(`  portal received ${(portal.uploads.stats.bytesReceived / 2 ** 20).toFixed(1)} MiB, files completed ${portal.uploads.stats.filesCompleted}`);
  await results.close();
  await portal.close();
  await rm(dataDir, { recursive: true, force: true });
}

await main();
