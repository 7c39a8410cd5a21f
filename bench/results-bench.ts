/**
 * Results store benchmark: 100,000 results on disk, then open() time, memory
 * after open, and query medians. Run as
 *   node --import tsx bench/results-bench.ts [--count N] [--runs N] [--rebuild]
 * (`--generate-only <dir>` writes the data set and stops; `--measure <dir>`
 * measures an existing one.)
 * The parent writes the data (index.jsonl and one folder with result.json per
 * run) into a temporary folder; a fresh child process opens and measures it,
 * so its memory is the store's, not the generator's. HTTP overhead is not
 * included: these are the store's share of a request.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import type { Outcome, ResultRecord } from '../src/core/model.js';
import { parseResultQuery } from '../src/core/query.js';
import { FileResultRepository } from '../src/storage/results/index.js';

const NODE = 'farmhand-0123456789ab';
const AREAS = ['menu', 'epg', 'vod', 'settings', 'search'];
const ACTIONS = ['open', 'navigate', 'play', 'pause', 'resume', 'record', 'search_title', 'change_channel', 'rewind', 'exit'];
const TEST_CASES = AREAS.flatMap((a) => ACTIONS.map((x) => `tests/${a}/test_${a}.py::test_${x}`)); // 50
const CATEGORIES = ['default', 'nightly', 'smoke', 'refs/snapshots/alice', 'release-27.4'];

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

/** A deterministic pseudo-random sequence, so every run measures the same data. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

function makeRecords(count: number): ResultRecord[] {
  const rand = rng(42);
  const out: ResultRecord[] = [];
  let t = Date.UTC(2026, 0, 1);
  let job = 1;
  for (let i = 0; i < count; i++) {
    if (rand() < 0.05) job++;
    const testCase = TEST_CASES[Math.floor(rand() * TEST_CASES.length)]!;
    const duration = Math.round((5 + rand() * rand() * 300) * 1000) / 1000;
    const roll = rand();
    const result: Outcome = roll < 0.8 ? 'pass' : roll < 0.92 ? 'fail' : 'error';
    const variant = Math.floor(rand() * 10);
    t += Math.ceil(duration + 2) * 1000;
    const start = new Date(t + Math.floor(rand() * 1000));
    const iso = start.toISOString();
    const jobUid = `/${NODE}/ab12/${job}`;
    out.push({
      result_id: `${jobUid}/${iso.slice(0, 10)}_${iso.slice(11, 19).replaceAll(':', '.')}`,
      job_uid: jobUid, test_case: testCase, test_pack_sha: 'c0ffee'.padEnd(40, String(job % 10)), test_pack_branch: 'main',
      category: CATEGORIES[job % CATEGORIES.length]!, username: job % 3 ? 'jenkins' : 'alice',
      tags: { 'jenkins/BUILD_ID': String(job), 'jenkins/JOB_NAME': 'stb-nightly' },
      start_time: iso, end_time: new Date(start.getTime() + duration * 1000).toISOString(), duration, result,
      failure_reason: result === 'pass' ? null : `${result === 'fail' ? 'UITestFailure' : 'RuntimeError'}: ${testCase.split('::')[1]} step ${variant} did not match`,
      traceback: result === 'pass' ? null : `Traceback (most recent call last):\n  File "${testCase.split('::')[0]}", line ${40 + variant}, in ${testCase.split('::')[1]}\n    wait_for_match("images/${variant}.png")\n  File "farmhand/api.py", line 212, in wait_for_match\n    raise UITestFailure("did not match")\n`,
    });
  }
  return out;
}

function generate(dir: string, count: number): void {
  const records = makeRecords(count);
  const lines: string[] = [];
  for (const r of records) {
    const [, , hex, num, stamp] = r.result_id.split('/');
    const folder = join(dir, hex!, num!, stamp!);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, 'result.json'), JSON.stringify(r, null, 2));
    const { result_id, ...rest } = r;
    lines.push(JSON.stringify({ result_id, ...rest }));
  }
  writeFileSync(join(dir, 'index.jsonl'), lines.join('\n') + '\n');
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
  if (gi >= 0) return generate(process.argv[gi + 1]!, count);
  const root = mkdtempSync(join(tmpdir(), 'farmhand-results-bench-'));
  const dir = join(root, 'results');
  try {
    const t0 = performance.now();
    generate(dir, count);
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
