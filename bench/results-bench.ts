/**
 * Results store benchmark: 100,000 results on disk, then open() time, memory
 * after open, and query medians. Run as
 *   node --import tsx bench/results-bench.ts [--count N] [--runs N] [--rebuild]
 * (`--generate-only <dir>` writes the data set and stops; `--measure <dir>`
 * measures an existing one.)
 * The parent writes the data (index.jsonl and one folder with result.json per
 * run) into a temporary folder; a fresh child process opens and measures it,
 * so its memory is the store's, not the generator's (bench/lib/results-data.ts). HTTP overhead is not
 * included: these are the store's share of a request.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { parseResultQuery } from '../src/core/query.js';
import { FileResultRepository } from '../src/storage/results/index.js';
import { BENCH_NODE, generateResults, TEST_CASES } from './lib/results-data.js';

const NODE = BENCH_NODE;

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

function time<T>(runs: number, fn: () => T): { median: number; max: number; last: T } {
  const ms: number[] = [];
  let last!: T;
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    last = fn();
    ms.push(performance.now() - t0);
  }
  return { median: median(ms), max: Math.max(...ms), last };
}

/** Child: open the store and measure. */
async function measure(dir: string, runs: number): Promise<void> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  const base = process.memoryUsage();
  const t0 = performance.now();
  const store = new FileResultRepository({ dir, retention: { max_results: 1_000_000, min_free_mb: 0 } });
  await store.open();
  const openMs = performance.now() - t0;
  gc();
  const mem = process.memoryUsage();
  const mb = (n: number) => (n / 2 ** 20).toFixed(1);
  console.log(`open():                          ${openMs.toFixed(0)} ms for ${store.size} results`);
  console.log(`memory after open (after gc):    heap used ${mb(mem.heapUsed)} MB (+${mb(mem.heapUsed - base.heapUsed)} MB for the index), heap total ${mb(mem.heapTotal)} MB, external ${mb(mem.external)} MB, rss ${mb(mem.rss)} MB (${mb(base.rss)} MB before open)`);
  await new Promise((r) => setTimeout(r, 3000));
  gc();
  console.log(`rss 3 s later (idle, after gc):  ${mb(process.memoryUsage().rss)} MB`);
  const tc = TEST_CASES[7]!;
  const cases: Array<[string, () => number]> = [
    ['no filter, 2000 + JSON.stringify', () => JSON.stringify(store.query(parseResultQuery({}))).length],
    [`testcase:<x> result:fail`, () => store.query(parseResultQuery({ filter: `testcase:${tc} result:fail` })).length],
    ['sort duration:desc (2000)', () => store.query(parseResultQuery({ sort: 'duration:desc' })).length],
    ['sort duration:desc + JSON.stringify', () => JSON.stringify(store.query(parseResultQuery({ sort: 'duration:desc' }))).length],
    [`testcase:<x> date:>"<dt>" date:asc`, () => store.query(parseResultQuery({ filter: `testcase:${tc} date:>"2026-01-20 10:00:00"`, sort: 'date:asc' })).length],
    ['job:<uid>', () => store.query(parseResultQuery({ filter: `job:/${NODE}/ab12/2500` })).length],
    ['free text "step 3"', () => store.query(parseResultQuery({ filter: '"step 3"' })).length],
    ['sort testcase:asc', () => store.query(parseResultQuery({ sort: 'testcase:asc' })).length],
    ['sort job:desc (worst case for the heap)', () => store.query(parseResultQuery({ sort: 'job:desc' })).length],
  ];
  console.log(`query medians over ${runs} runs:`);
  for (const [name, fn] of cases) {
    fn(); // warm up
    const r = time(runs, fn);
    console.log(`  ${name.padEnd(38)} median ${r.median.toFixed(1).padStart(6)} ms   max ${r.max.toFixed(1).padStart(6)} ms   (${r.last})`);
  }
  await store.close();
  const peak = process.memoryUsage().rss;
  gc();
  console.log(`rss after the queries:           ${mb(peak)} MB, ${mb(process.memoryUsage().rss)} MB after gc`);
}

async function main(): Promise<void> {
  const mi = process.argv.indexOf('--measure');
  if (mi >= 0) return measure(process.argv[mi + 1]!, arg('--runs', 30));
  const count = arg('--count', 100_000);
  const gi = process.argv.indexOf('--generate-only');
  if (gi >= 0) return void generateResults(process.argv[gi + 1]!, count);
  const root = mkdtempSync(join(tmpdir(), 'farmhand-results-bench-'));
  const dir = join(root, 'results');
  try {
    const t0 = performance.now();
    generateResults(dir, count);
    console.log(`generated ${count} results (index + folders) in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const self = fileURLToPath(import.meta.url);
    const child = (runs: number) =>
      spawnSync(process.execPath, ['--import', 'tsx', self, '--measure', dir, '--runs', String(runs)], { stdio: 'inherit' });
    if (child(arg('--runs', 30)).status !== 0) process.exitCode = 1;
    if (process.argv.includes('--rebuild')) {
      unlinkSync(join(dir, 'index.jsonl'));
      console.log('\nindex.jsonl deleted; opening again (rebuild from folders):');
      if (child(3).status !== 0) process.exitCode = 1;
    }
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
}

await main();
