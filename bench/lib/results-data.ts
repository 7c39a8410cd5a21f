/**
 * A deterministic history of test results for the benchmarks: records shaped
 * like a busy node's (50 test cases, 80 % pass, jobs of ~20 runs, tags,
 * tracebacks), written to disk the way the results store keeps them (one
 * folder with result.json per run, plus index.jsonl), so a store or a whole
 * daemon opens them as its own. Shared by results-bench.ts and http-bench.ts.
 */
import { closeSync, mkdirSync, openSync, writeFileSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Outcome, ResultRecord } from '../../src/core/model.js';

/** The node id the generated results belong to unless another is given. */
export const BENCH_NODE = 'farmhand-0123456789ab';
/** The installation hex digits of the generated job uids. */
export const BENCH_HEX = 'ab12';

const AREAS = ['menu', 'epg', 'vod', 'settings', 'search'];
const ACTIONS = ['open', 'navigate', 'play', 'pause', 'resume', 'record', 'search_title', 'change_channel', 'rewind', 'exit'];
/** The 50 test case names the records use, evenly. */
export const TEST_CASES = AREAS.flatMap((a) => ACTIONS.map((x) => `tests/${a}/test_${a}.py::test_${x}`));
const CATEGORIES = ['default', 'nightly', 'smoke', 'refs/snapshots/alice', 'release-27.4'];

/** A deterministic pseudo-random sequence, so every run measures the same data. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s, 1664525) + 1013904223) >>> 0) / 2 ** 32);
}

/** `count` records in start-time order, the same ones on every call. */
export function makeRecords(count: number, node = BENCH_NODE): ResultRecord[] {
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
    const jobUid = `/${node}/${BENCH_HEX}/${job}`;
    const [file, fn] = testCase.split('::') as [string, string];
    out.push({
      result_id: `${jobUid}/${iso.slice(0, 10)}_${iso.slice(11, 19).replaceAll(':', '.')}`,
      job_uid: jobUid, test_case: testCase, test_pack_sha: 'c0ffee'.padEnd(40, String(job % 10)), test_pack_branch: 'main',
      category: CATEGORIES[job % CATEGORIES.length]!, username: job % 3 ? 'jenkins' : 'alice',
      tags: { 'jenkins/BUILD_ID': String(job), 'jenkins/JOB_NAME': 'stb-nightly' },
      start_time: iso, end_time: new Date(start.getTime() + duration * 1000).toISOString(), duration, result,
      failure_reason: result === 'pass' ? null : `${result === 'fail' ? 'UITestFailure' : 'RuntimeError'}: ${fn} step ${variant} did not match`,
      traceback: result === 'pass' ? null : `Traceback (most recent call last):\n  File "${file}", line ${40 + variant}, in ${fn}\n    wait_for_match("images/${variant}.png")\n  File "farmhand/api.py", line 212, in wait_for_match\n    raise UITestFailure("did not match")\n`,
    });
  }
  return out;
}

/** The folder of a record below the results directory: `<hex>/<n>/<stamp>`. */
export function recordDir(resultsDir: string, r: ResultRecord): string {
  const [, , hex, num, stamp] = r.result_id.split('/');
  return join(resultsDir, hex!, num!, stamp!);
}

/**
 * Write `count` records into `resultsDir` (`<data_dir>/results`): a folder
 * with result.json per run and the index.jsonl the store loads at open.
 * Returns the records.
 */
export function generateResults(resultsDir: string, count: number, node = BENCH_NODE): ResultRecord[] {
  const records = makeRecords(count, node);
  // Written in batches: 1,000,000 lines (548 MiB) are longer than a string may be.
  const fd = openSync(join(resultsDir, 'index.jsonl'), 'w');
  try {
    let batch = '';
    for (const r of records) {
      const folder = recordDir(resultsDir, r);
      mkdirSync(folder, { recursive: true });
      writeFileSync(join(folder, 'result.json'), JSON.stringify(r, null, 2));
      batch += JSON.stringify(r) + '\n';
      if (batch.length > 1 << 20) {
        writeSync(fd, batch);
        batch = '';
      }
    }
    writeSync(fd, batch);
  } finally {
    closeSync(fd);
  }
  return records;
}
