/**
 * Issue 23. Layouts (`--layouts`, default all): `memory`, the store before
 * the columns (index.jsonl read whole into MemoryIndex, one object per
 * record; the reference every other layout's answers are checked against);
 * `jsonl` and `snapshot`, the store now (FileResultRepository, its columnar
 * index, from index.jsonl whole or from the index.snapshot a clean stop
 * wrote); `columns` and `objects`, the second pass's prototypes below.
 *
 * The second pass, the next step measured before it was built: how long start-up
 * takes and how much memory the results index holds when it is loaded from
 * `index.jsonl` (today: every line parsed, one frozen object per record)
 * against a compact columnar snapshot (typed arrays for times, durations and
 * outcomes, every repeated string once in a table, the per-run part of the id
 * as text), and what the benchmark's three queries cost on the columns.
 * Run as
 *   node --import tsx bench/index-layout-bench.ts [--count N] [--runs N] [--layouts memory,jsonl,snapshot,columns,objects]
 *
 * The columnar side is a PROTOTYPE living in this file, not the store: it
 * only answers the filters the queries below use (testcase, result) and the
 * date and duration sorts. Every answer of it is compared with the store's
 * (the same records, same order, same JSON); a difference stops the benchmark
 * (exit 2) instead of printing a fast number.
 *
 * Each layout is measured in a fresh child process (its memory is the
 * index's, not the generator's): wall and CPU time of the load, then
 * resident memory and heap used after a full collection, then the median of
 * `--runs` runs of each query including the records of its answer. The
 * snapshot is written by the parent; writing it is not start-up.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { compareFor, parseResultQuery, type FilterTerm, type ResultQuery } from '../src/core/query.js';
import type { ResultRecord } from '../src/core/model.js';
import { FileResultRepository } from '../src/storage/results/index.js';
import { IndexFile } from '../src/storage/results/index-file.js';
import { MemoryIndex, smallest } from '../src/storage/results/memory-index.js';
import { checkRecord, recordLine } from '../src/storage/results/record.js';
import { makeRecords, TEST_CASES } from './lib/results-data.js';

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;

const QUERIES: Array<[string, () => ResultQuery]> = [
  ['no filter (newest 2,000)', () => parseResultQuery({})],
  ['testcase:<x> result:fail', () => parseResultQuery({ filter: `testcase:${TEST_CASES[7]!} result:fail` })],
  ['sort=duration:desc', () => parseResultQuery({ sort: 'duration:desc' })],
];

// ------------------------------------------------------------ the prototype

/** The string fields kept as indexes into one table (NONE for null); `tags` as its JSON. */
const INTERNED = ['job_uid', 'test_case', 'test_pack_sha', 'test_pack_branch', 'category', 'username', 'tags', 'failure_reason', 'traceback'] as const;
const NONE = 0xffffffff;
const OUTCOMES = ['pass', 'fail', 'error'] as const;

interface Columns {
  n: number;
  strs: string[];
  /** The part of result_id after `<job_uid>/`: the run's stamp. */
  stamps: string[];
  cols: Uint32Array[];
  start: Float64Array;
  end: Float64Array;
  dur: Float64Array;
  res: Uint8Array;
  /** Parsed tag sets by table index, made on first use and shared (the store shares a job's too). */
  tags: Map<number, Readonly<Record<string, string>>>;
}

/** Header (JSON: count, string table, stamps), then each column's bytes. Records in date order. */
function writeSnapshot(path: string, recs: ResultRecord[]): void {
  const n = recs.length;
  const table = new Map<string, number>();
  const strs: string[] = [];
  const idOf = (s: string): number => {
    let i = table.get(s);
    if (i === undefined) table.set(s, (i = strs.push(s) - 1));
    return i;
  };
  const cols = INTERNED.map(() => new Uint32Array(n));
  const start = new Float64Array(n);
  const end = new Float64Array(n);
  const dur = new Float64Array(n);
  const res = new Uint8Array(n);
  const stamps: string[] = [];
  recs.forEach((r, i) => {
    INTERNED.forEach((k, c) => {
      const v = k === 'tags' ? JSON.stringify(r.tags) : r[k];
      cols[c]![i] = v === null ? NONE : idOf(v);
    });
    start[i] = Date.parse(r.start_time);
    end[i] = Date.parse(r.end_time);
    dur[i] = r.duration;
    res[i] = OUTCOMES.indexOf(r.result);
    stamps.push(r.result_id.slice(r.job_uid.length + 1));
  });
  const head = Buffer.from(JSON.stringify({ n, strs, stamps: stamps.join('\n') }));
  const len = Buffer.alloc(8);
  len.writeUInt32LE(head.length, 0);
  const fd = openSync(path, 'w');
  for (const b of [len, head, ...cols, start, end, dur, res]) writeSync(fd, b instanceof Buffer ? b : new Uint8Array(b.buffer));
  closeSync(fd);
}

function loadSnapshot(path: string): Columns {
  const buf = readFileSync(path);
  const hl = buf.readUInt32LE(0);
  const head = JSON.parse(buf.toString('utf8', 8, 8 + hl)) as { n: number; strs: string[]; stamps: string };
  const n = head.n;
  let off = 8 + hl;
  const take = (bytes: number): ArrayBuffer => {
    const ab = new ArrayBuffer(bytes);
    new Uint8Array(ab).set(buf.subarray(off, off + bytes));
    off += bytes;
    return ab;
  };
  const cols = INTERNED.map(() => new Uint32Array(take(4 * n)));
  const start = new Float64Array(take(8 * n));
  const end = new Float64Array(take(8 * n));
  const dur = new Float64Array(take(8 * n));
  const res = new Uint8Array(take(n));
  return { n, strs: head.strs, tags: new Map(), stamps: head.stamps === '' ? [] : head.stamps.split('\n'), cols, start, end, dur, res };
}

/** Record `i` as the store answers it (same fields, same order). */
function materialize(c: Columns, i: number): ResultRecord {
  const s = (k: number): string | null => (c.cols[k]![i]! === NONE ? null : c.strs[c.cols[k]![i]!]!);
  const jobUid = s(0)!;
  const t = c.cols[6]![i]!;
  let tags = c.tags.get(t);
  if (!tags) c.tags.set(t, (tags = Object.freeze(JSON.parse(c.strs[t]!) as Record<string, string>)));
  return Object.freeze({
    result_id: `${jobUid}/${c.stamps[i]}`,
    job_uid: jobUid,
    test_case: s(1)!,
    test_pack_sha: s(2)!,
    test_pack_branch: s(3),
    category: s(4)!,
    username: s(5)!,
    tags,
    start_time: new Date(c.start[i]!).toISOString(),
    end_time: new Date(c.end[i]!).toISOString(),
    duration: c.dur[i]!,
    result: OUTCOMES[c.res[i]!]!,
    failure_reason: s(7),
    traceback: s(8),
  });
}

/** A filter on the columns: each term compared once per distinct string, then per row on integers. */
function columnTest(c: Columns, terms: FilterTerm[]): (i: number) => boolean {
  const tests = terms.map((t): ((i: number) => boolean) => {
    let test: (i: number) => boolean;
    if (t.kind === 'testcase' && !t.value.includes('*')) {
      const want = c.strs.indexOf(t.value);
      const col = c.cols[1]!;
      test = (i) => col[i] === want;
    } else if (t.kind === 'result') {
      const want = OUTCOMES.indexOf(t.value);
      test = (i) => c.res[i] === want;
    } else {
      throw new Error(`prototype: no ${t.kind} term`);
    }
    return t.negated ? (i) => !test(i) : test;
  });
  return (i) => tests.every((t) => t(i));
}

function columnQuery(c: Columns, q: ResultQuery): ResultRecord[] {
  const test = columnTest(c, q.terms ?? []);
  if (q.sort.field === 'date') {
    const out: ResultRecord[] = [];
    if (q.sort.dir !== 'desc') throw new Error('prototype: date sorts newest first only');
    for (let i = c.n - 1; i >= 0 && out.length < q.limit; i--) if (test(i)) out.push(materialize(c, i));
    return out;
  }
  if (q.sort.field !== 'duration') throw new Error(`prototype: no ${q.sort.field} sort`);
  const sign = q.sort.dir === 'desc' ? -1 : 1;
  const rows: number[] = [];
  for (let i = c.n - 1; i >= 0; i--) if (test(i)) rows.push(i);
  // Rows are in date order, so a later row is a later (start_time, result_id): the tie-break on the index.
  const best = smallest(rows, (a, b) => sign * (c.dur[a]! - c.dur[b]! || a - b), q.limit);
  return best.map((i) => materialize(c, i));
}

// ------------------------------------------------------------------ children

async function child(layout: string, dir: string, runs: number): Promise<void> {
  setFlagsFromString('--expose-gc');
  const gc = runInNewContext('gc') as () => void;
  gc();
  const base = process.memoryUsage().rss;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  let ask: (q: ResultQuery) => ResultRecord[];
  let size: number;
  if (layout === 'memory') {
    // The store before issue 23's columns: index.jsonl read whole into MemoryIndex (one frozen object per record).
    const m = new MemoryIndex();
    await new IndexFile(join(dir, 'index.jsonl')).load((line) => {
      const rec = checkRecord(JSON.parse(line));
      if (typeof rec === 'string') throw new Error(rec);
      m.loadOwned(rec);
    });
    m.loadEnd();
    ask = (q) => m.query(q);
    size = m.size;
  } else if (layout === 'jsonl' || layout === 'snapshot') {
    // The store: its columnar index, from index.jsonl whole (snapshots off) or from index.snapshot.
    const store = new FileResultRepository({ dir, retention: { max_results: 1e9, min_free_mb: 0 }, compactAfter: 1e9, snapshots: layout === 'snapshot' });
    await store.open();
    ask = (q) => store.query(q);
    size = store.size;
  } else if (layout === 'prepare') {
    // Not measured as a layout: write index.snapshot as a clean stop of the store does.
    const store = new FileResultRepository({ dir, retention: { max_results: 1e9, min_free_mb: 0 }, compactAfter: 1e9 });
    await store.open();
    const c1 = process.cpuUsage();
    const t1 = performance.now();
    await store.close();
    const cpu1 = process.cpuUsage(c1);
    console.log(JSON.stringify({ writeMs: performance.now() - t1, writeCpuMs: (cpu1.user + cpu1.system) / 1000 }));
    return;
  } else if (layout === 'columns') {
    const c = loadSnapshot(join(dir, 'snapshot.bin'));
    ask = (q) => columnQuery(c, q);
    size = c.n;
  } else {
    // The snapshot feeding today's kind of index: one frozen object per record, built from the columns.
    const c = loadSnapshot(join(dir, 'snapshot.bin'));
    const all: ResultRecord[] = new Array<ResultRecord>(c.n);
    for (let i = 0; i < c.n; i++) all[i] = materialize(c, i);
    ask = (q) => {
      const out: ResultRecord[] = [];
      for (let i = all.length - 1; i >= 0 && out.length < q.limit; i--) if (q.predicate(all[i]!)) out.push(all[i]!);
      return q.sort.field === 'date' ? out : smallest(all.filter(q.predicate).reverse(), compareFor(q.sort), q.limit);
    };
    size = all.length;
  }
  const loadMs = performance.now() - t0;
  const cpu = process.cpuUsage(c0);
  gc();
  const mem = process.memoryUsage();
  const queries = QUERIES.map(([name, make]) => {
    const q = make();
    const ms: number[] = [];
    let answer: ResultRecord[] = [];
    for (let i = 0; i < runs + 3; i++) {
      const t = performance.now();
      answer = ask(q);
      if (i >= 3) ms.push(performance.now() - t);
    }
    return { name, ms: median(ms), rows: answer.length, hash: createHash('sha256').update(JSON.stringify(answer)).digest('hex') };
  });
  console.log(JSON.stringify({ layout, size, loadMs, cpuMs: (cpu.user + cpu.system) / 1000, rssMiB: mem.rss / 2 ** 20, baseRssMiB: base / 2 ** 20, heapUsedMiB: mem.heapUsed / 2 ** 20, queries }));
}

// -------------------------------------------------------------------- parent

async function main(): Promise<void> {
  const ci = process.argv.indexOf('--child');
  if (ci >= 0) return child(process.argv[ci + 1]!, process.argv[ci + 2]!, arg('--runs', 10));
  const count = arg('--count', 100_000);
  const runs = arg('--runs', 10);
  const li = process.argv.indexOf('--layouts');
  const layouts = li >= 0 ? process.argv[li + 1]!.split(',') : ['memory', 'jsonl', 'snapshot', 'columns', 'objects'];
  const dir = mkdtempSync(join(tmpdir(), 'farmhand-index-layout-'));
  try {
    const recs = makeRecords(count);
    const fd = openSync(join(dir, 'index.jsonl'), 'w');
    for (let i = 0; i < recs.length; i += 10_000) writeSync(fd, recs.slice(i, i + 10_000).map((r) => recordLine(r) + '\n').join(''));
    closeSync(fd);
    if (layouts.some((l) => l === 'columns' || l === 'objects')) writeSnapshot(join(dir, 'snapshot.bin'), recs);
    recs.length = 0;
    const self = fileURLToPath(import.meta.url);
    // The store's own snapshot, written by a clean stop (in a child: its time is printed, not start-up).
    const prep = spawnSync(process.execPath, [...process.execArgv, self, '--child', 'prepare', dir], { encoding: 'utf8', maxBuffer: 1 << 24 });
    if (prep.status !== 0) throw new Error(`prepare failed: ${prep.stderr}`);
    const wrote = JSON.parse(prep.stdout.trim().split('\n').pop()!) as { writeMs: number; writeCpuMs: number };
    const size = (f: string): number => (existsSync(join(dir, f)) ? statSync(join(dir, f)).size / 2 ** 20 : NaN);
    console.log(`${count} results: index.jsonl ${size('index.jsonl').toFixed(1)} MiB, the store's index.snapshot ${size('index.snapshot').toFixed(1)} MiB ` +
      `(written at close in ${wrote.writeMs.toFixed(0)} ms, ${wrote.writeCpuMs.toFixed(0)} ms CPU), prototype snapshot ${size('snapshot.bin').toFixed(1)} MiB`);
    const rows = layouts.map((layout) => {
      const r = spawnSync(process.execPath, [...process.execArgv, self, '--child', layout, dir, '--runs', String(runs)], { encoding: 'utf8', maxBuffer: 1 << 24 });
      if (r.status !== 0) throw new Error(`${layout} child failed: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split('\n').pop()!) as {
        layout: string; size: number; loadMs: number; cpuMs: number; rssMiB: number; baseRssMiB: number; heapUsedMiB: number;
        queries: Array<{ name: string; ms: number; rows: number; hash: string }>;
      };
    });
    const [ref] = rows;
    for (const r of rows) {
      if (r.size !== ref!.size) throw Object.assign(new Error(`${r.layout}: ${r.size} records, jsonl has ${ref!.size}`), { exit: 2 });
      r.queries.forEach((q, i) => {
        if (q.hash !== ref!.queries[i]!.hash) throw Object.assign(new Error(`${r.layout}: "${q.name}" answered differently from the store`), { exit: 2 });
      });
    }
    const f = (x: number, d = 0): string => x.toFixed(d);
    console.log('every answer of every layout is the store\'s (same records, order and JSON)\n');
    console.log('| layout | load wall | load CPU | RSS after gc (before load) | heap used | ' + QUERIES.map(([n]) => n).join(' | ') + ' |');
    console.log('|---|---|---|---|---|' + QUERIES.map(() => '---').join('|') + '|');
    for (const r of rows) {
      console.log(`| ${r.layout} | ${f(r.loadMs)} ms | ${f(r.cpuMs)} ms | ${f(r.rssMiB)} MiB (${f(r.baseRssMiB)}) | ${f(r.heapUsedMiB)} MiB | ` +
        r.queries.map((q) => `${f(q.ms, 1)} ms (${q.rows})`).join(' | ') + ' |');
    }
    // Ratios to the start-up targets: the index's load alone, against the whole start-up's budget.
    const target = count <= 100_000 ? 1000 : 3000;
    console.log(`\nthe load against the start-up target (${target / 1000} s for the whole daemon at ${count}), CPU (wall): ` +
      rows.map((r) => `${r.layout} ${(r.cpuMs / target).toFixed(2)} (${(r.loadMs / target).toFixed(2)})`).join(', '));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

main().catch((e: unknown) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit((e as { exit?: number }).exit ?? 2);
});
