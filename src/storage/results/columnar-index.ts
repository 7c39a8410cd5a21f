/**
 * The results index as it lives in memory, in columns (issue 23): one row per
 * live record, rows in date order (start_time, then result_id). Times,
 * durations, outcomes and the run's stamp are typed arrays; every repeated
 * string (job, test case, sha, branch, category, user, tag set as JSON,
 * failure reason, traceback) is stored once in a table and each row holds
 * 32-bit indexes into it. 100,000 records cost about 7 MB instead of one
 * object each, and the columns are what the snapshot (snapshot.ts) writes and
 * reads back as they are.
 *
 * Queries run on the columns when the query carries its parsed `terms` (every
 * query parseResultQuery makes): a job, category or exact test case compares
 * table indexes, a glob or a text term is evaluated once per distinct string,
 * dates compare numbers. Records are made only for the rows answered (a
 * small cache keeps the last few thousand: the newest page is asked most). A
 * query with a predicate only (internal callers) tests each row's record.
 * Answers are those of MemoryIndex (memory-index.ts, the reference the tests
 * compare against): the same records in the same order.
 *
 * Rows live in [head, len) of the arrays: retention removes the oldest rows
 * by moving `head`, an add is nearly always an append; both are O(1).
 */
import { INFRASTRUCTURE_KINDS, kindOfRecord } from '../../core/infrastructure.js';
import { compileGlob, compileSubstring } from '../../core/glob.js';
import { parseResultId, runStamp } from '../../core/ids.js';
import type { ResultRecord } from '../../core/model.js';
import { compareFor, jobNumber, type ResultQuery } from '../../core/query.js';
import { compileFilter, type FilterTarget, type FilterTerm } from '../../core/filter.js';
import { smallest } from './memory-index.js';

/** A test of one row of the index. */
type Row = (i: number) => boolean;

/** No string (a null field). */
export const NONE = 0xffffffff;
/** Outcome codes are their rank in a `result` sort (OUTCOME_RANK): pass < fail < error. */
const OUTCOMES = ['pass', 'fail', 'error'] as const;
const OUTCOME_CODE: Record<string, number> = { pass: 0, fail: 1, error: 2 };
/** infrastructure_error: 0 absent (a record stored before the field), 1 null, 2 + i the kind INFRASTRUCTURE_KINDS[i]. */
const INFRA_ABSENT = 0;
const INFRA_NULL = 1;

/** The string columns, in the snapshot's order. */
export const STRING_COLUMNS = ['job_uid', 'test_case', 'test_pack_sha', 'test_pack_branch', 'category', 'username', 'tags', 'failure_reason', 'traceback', 'id_job'] as const;
const J = 0, TC = 1, SHA = 2, BR = 3, CAT = 4, USER = 5, TAGS = 6, FR = 7, TB = 8, IDJ = 9;
/** Columns that may hold NONE. */
export const NULLABLE = new Set([BR, FR, TB]);

/** The columns of `n` rows, as a snapshot holds them (rows in date order, no dead rows). */
export interface ColumnData {
  n: number;
  strs: string[];
  /** ms since the epoch */
  start: Float64Array;
  end: Float64Array;
  dur: Float64Array;
  /** The run's stamp (the id after `<job>/`) as seconds since the epoch. */
  stamp: Float64Array;
  res: Uint8Array;
  infra: Uint8Array;
  /** One per STRING_COLUMNS entry; `id_job` is the job part of result_id (the same string as job_uid in every record add() takes). */
  cols: Uint32Array[];
}

/** Start times a date term cannot compare as numbers (the string order of the filter differs outside years 0000-9999). */
const MIN_PLAIN = Date.parse('0000-01-01T00:00:00.000Z');
const MAX_PLAIN = Date.parse('9999-12-31T23:59:59.999Z');
const isCanonicalTime = (s: string): boolean => s.length === 24 && s.charCodeAt(23) === 90 && s.charCodeAt(10) === 84;

/** Records made for answers, kept for the next query (the newest page is asked most). */
const CACHE_ENTRIES = 8192;

export class ColumnarIndex {
  private head = 0;
  private len = 0;
  private start: Float64Array = new Float64Array(0);
  private end: Float64Array = new Float64Array(0);
  private dur: Float64Array = new Float64Array(0);
  private stamp: Float64Array = new Float64Array(0);
  private res: Uint8Array = new Uint8Array(0);
  private infra: Uint8Array = new Uint8Array(0);
  private cols: Uint32Array[] = STRING_COLUMNS.map(() => new Uint32Array(0));
  private strs: string[] = [];
  private strIdx = new Map<string, number>();
  /** Parsed, frozen tag sets by table index (a job's runs share theirs). */
  private tagObjs = new Map<number, Readonly<Record<string, string>>>();
  private lastTags: { obj: Readonly<Record<string, string>>; idx: number } | undefined;
  private readonly stats = new Map<string, { sum: number; count: number }>();
  /** Ids of rows whose start second is not their stamp's, with their start (ms): `get` finds the others by their stamp. */
  private others = new Map<string, number>();
  /** Some start time lies outside years 0000-9999: date terms fall back to the records. */
  private oddTimes = false;
  private cache = new Map<number, ResultRecord>();
  // Loading: rows arrive in file order; a replaced or deleted one is marked dead until loadEnd.
  private loading = false;
  private dead: Uint8Array | undefined;
  private inOrder = true;
  private loadMap: Map<string, number> | undefined;

  get size(): number {
    return this.len - this.head;
  }

  // ------------------------------------------------------------- records

  /** The record of an id, or undefined. */
  get(id: string): ResultRecord | undefined {
    const row = this.find(id);
    return row < 0 ? undefined : this.record(row);
  }

  /** The `n` oldest records. */
  oldest(n: number): ResultRecord[] {
    const out: ResultRecord[] = [];
    for (let i = this.head; i < this.len && out.length < n; i++) out.push(this.make(i));
    return out;
  }

  /** Every live record in date order, made one at a time (for rewriting the index file). */
  *records(): Generator<ResultRecord> {
    for (let i = this.head; i < this.len; i++) yield this.make(i);
  }

  meanDuration(testCase: string): number | undefined {
    const s = this.stats.get(testCase);
    return s && s.count > 0 ? s.sum / s.count : undefined;
  }

  // ------------------------------------------------------------- loading

  /** Before the index file's lines: rows may come in any order, replace or delete each other. */
  loadBegin(): void {
    this.loading = true;
    this.inOrder = true;
    if (!this.isSorted()) this.leaveOrder();
  }

  /** Loading: add or replace a record; true when it replaced one. */
  loadSet(r: ResultRecord): boolean {
    const old = this.findLoading(r.result_id);
    if (old >= 0) this.killRow(old);
    const row = this.append(r);
    if (this.inOrder && row > this.head && this.compareRows(row - 1, row) > 0) this.leaveOrder();
    if (this.loadMap) this.loadMap.set(r.result_id, row);
    return old >= 0;
  }

  /** `loadSet`, for the JSON-lines loader (kept for MemoryIndex's interface; the record is not kept). */
  loadOwned(r: ResultRecord): boolean {
    return this.loadSet(r);
  }

  /** Loading: drop a record (its tombstone came); true when it was there. */
  loadDelete(id: string): boolean {
    const old = this.findLoading(id);
    if (old < 0) return false;
    this.killRow(old);
    return true;
  }

  /** After the last line: drop dead rows, sort once if rows came out of order. */
  loadEnd(): void {
    this.loading = false;
    this.loadMap = undefined;
    if (this.dead) {
      const dead = this.dead;
      this.dead = undefined;
      let w = this.head;
      for (let r = this.head; r < this.len; r++) if (!dead[r]) this.moveRow(r, w++);
      this.len = w;
    }
    if (!this.inOrder) {
      const rows = Array.from({ length: this.size }, (_, i) => this.head + i);
      rows.sort((a, b) => this.compareRows(a, b));
      this.permute(rows);
      this.inOrder = true;
    }
    this.cache.clear();
  }

  /** Take the columns of a snapshot (the index must be empty). */
  adopt(d: ColumnData): void {
    if (this.size !== 0) throw new Error('adopt: the index is not empty');
    this.head = 0;
    this.len = d.n;
    this.start = d.start;
    this.end = d.end;
    this.dur = d.dur;
    this.stamp = d.stamp;
    this.res = d.res;
    this.infra = d.infra;
    this.cols = d.cols;
    this.strs = d.strs;
    this.strIdx = new Map(d.strs.map((s, i) => [s, i]));
    this.tagObjs.clear();
    this.lastTags = undefined;
    this.others.clear();
    this.oddTimes = false;
    this.cache.clear();
    const tc = this.cols[TC]!;
    for (let i = 0; i < d.n; i++) {
      const s = this.strs[tc[i]!]!;
      let st = this.stats.get(s);
      if (!st) this.stats.set(s, (st = { sum: 0, count: 0 }));
      st.sum += this.dur[i]!;
      st.count++;
      this.noteRow(i);
    }
  }

  /**
   * The live rows' columns, for a snapshot: views, not copies (1,000,000 rows are 62 MB), so
   * valid only until the next write; the store writes its snapshot inside its write chain.
   */
  exportColumns(): ColumnData {
    const a = this.head;
    const b = this.len;
    return {
      n: b - a,
      strs: this.strs.slice(0),
      start: this.start.subarray(a, b),
      end: this.end.subarray(a, b),
      dur: this.dur.subarray(a, b),
      stamp: this.stamp.subarray(a, b),
      res: this.res.subarray(a, b),
      infra: this.infra.subarray(a, b),
      cols: this.cols.map((c) => c.subarray(a, b)),
    };
  }

  // ------------------------------------------------------------- writes

  /** Add or replace one record; returns the stored (frozen) record. */
  put(r: ResultRecord): ResultRecord {
    const old = this.find(r.result_id);
    if (old >= 0) this.removeRow(old);
    let row = this.append(r);
    // Runs finish in start order on one node, so this is nearly always an append.
    if (row > this.head && this.compareRows(row - 1, row) > 0) {
      const at = this.position(row);
      this.rotate(at, row);
      row = at;
    }
    return this.record(row);
  }

  /** Remove the `n` oldest records (retention); returns how many went. */
  removeOldest(n: number): number {
    const k = Math.min(Math.max(0, n), this.size);
    for (let i = this.head; i < this.head + k; i++) this.forget(i);
    this.head += k;
    return k;
  }

  /** Drop table strings no live row uses any more (after many deletions). */
  repool(): void {
    const old = this.strs;
    this.strs = [];
    this.strIdx = new Map();
    this.tagObjs.clear();
    this.lastTags = undefined;
    const map = new Uint32Array(old.length).fill(NONE);
    for (const col of this.cols) {
      for (let i = this.head; i < this.len; i++) {
        const k = col[i]!;
        if (k === NONE) continue;
        let m = map[k]!;
        if (m === NONE) map[k] = m = this.intern(old[k]!);
        col[i] = m;
      }
    }
    this.cache.clear();
  }

  // ------------------------------------------------------------- queries

  /** Filter, sort and cap: MemoryIndex.query's answer. */
  query(q: ResultQuery): ResultRecord[] {
    const limit = Math.max(0, q.limit);
    if (limit === 0 || this.size === 0) return [];
    const test = (q.terms && this.compile(q.terms)) ?? ((i: number) => q.predicate(this.make(i, true)));
    let rows: number[];
    if (q.sort.field === 'date') rows = this.walk(test, q.sort.dir, limit);
    else rows = this.top(test, q, limit);
    return rows.map((i) => this.record(i));
  }

  private walk(test: (i: number) => boolean, dir: 'asc' | 'desc', limit: number): number[] {
    const out: number[] = [];
    if (dir === 'desc') {
      for (let i = this.len - 1; i >= this.head && out.length < limit; i--) if (test(i)) out.push(i);
    } else {
      for (let i = this.head; i < this.len && out.length < limit; i++) if (test(i)) out.push(i);
    }
    return out;
  }

  /**
   * The best `limit` matching rows of a non-date sort. The sort key is a
   * number per row (duration, outcome rank, job number, or the rank of the
   * test case or category among the matches' strings); ties go by date order,
   * which is row order. A max-heap on the keys keeps the best `limit`.
   */
  private top(test: (i: number) => boolean, q: ResultQuery, limit: number): number[] {
    const matches: number[] = [];
    for (let i = this.head; i < this.len; i++) if (test(i)) matches.push(i);
    const sign = q.sort.dir === 'desc' ? -1 : 1;
    const key = this.sortKey(q.sort.field, matches);
    if (!key) {
      // A job_uid that is not /<node>/<hex>/<n> (a hand-edited index): the reference's comparator, fed as it is.
      const cmp = compareFor(q.sort);
      const recs = new Map<number, ResultRecord>();
      const rec = (i: number): ResultRecord => {
        let r = recs.get(i);
        if (!r) recs.set(i, (r = this.make(i, true)));
        return r;
      };
      if (sign < 0) matches.reverse();
      return smallest(matches, (a, b) => cmp(rec(a), rec(b)), limit);
    }
    const m = matches.length;
    const keys = new Float64Array(m);
    for (let j = 0; j < m; j++) keys[j] = sign * key(matches[j]!);
    // Total order on positions j: key, then date order in the sort's direction.
    const worse = (a: number, b: number): boolean => keys[a]! > keys[b]! || (keys[a] === keys[b] && sign * (a - b) > 0);
    let chosen: number[];
    if (m <= limit) {
      chosen = Array.from({ length: m }, (_, j) => j);
    } else {
      // A max-heap of the best `limit` so far: most rows lose against its top in one comparison.
      const heap = new Int32Array(limit);
      let n = 0;
      const down = (i: number): void => {
        for (;;) {
          const l = 2 * i + 1;
          const r = l + 1;
          let top = i;
          if (l < n && worse(heap[l]!, heap[top]!)) top = l;
          if (r < n && worse(heap[r]!, heap[top]!)) top = r;
          if (top === i) return;
          const t = heap[i]!;
          heap[i] = heap[top]!;
          heap[top] = t;
          i = top;
        }
      };
      for (let j = 0; j < m; j++) {
        if (n < limit) {
          heap[n] = j;
          for (let i = n++; i > 0; ) {
            const p = (i - 1) >>> 1;
            if (!worse(heap[i]!, heap[p]!)) break;
            const t = heap[i]!;
            heap[i] = heap[p]!;
            heap[p] = t;
            i = p;
          }
        } else if (worse(heap[0]!, j)) {
          heap[0] = j;
          down(0);
        }
      }
      chosen = Array.from(heap);
    }
    chosen.sort((a, b) => keys[a]! - keys[b]! || sign * (a - b));
    return chosen.map((j) => matches[j]!);
  }

  /** The numeric primary key of a sort field, or undefined when the rows' keys are not all numbers. */
  private sortKey(field: string, rows: number[]): ((i: number) => number) | undefined {
    switch (field) {
      case 'duration': {
        const d = this.dur;
        return (i) => d[i]!;
      }
      case 'result': {
        const r = this.res;
        return (i) => r[i]!;
      }
      case 'job': {
        const col = this.cols[J]!;
        const num = new Map<number, number>();
        for (const i of rows) {
          const k = col[i]!;
          if (num.has(k)) continue;
          const n = jobNumber(this.strs[k]!);
          if (Number.isNaN(n)) return undefined;
          num.set(k, n);
        }
        return (i) => num.get(col[i]!)!;
      }
      default: {
        // testcase, category: the rank of each distinct string among the matches (string order, as compareFor's).
        const col = this.cols[field === 'testcase' ? TC : CAT]!;
        const distinct = [...new Set(rows.map((i) => col[i]!))];
        distinct.sort((a, b) => {
          const x = this.strs[a]!;
          const y = this.strs[b]!;
          return x < y ? -1 : x > y ? 1 : 0;
        });
        const rank = new Map<number, number>(distinct.map((k, r) => [k, r]));
        return (i) => rank.get(col[i]!)!;
      }
    }
  }

  /** A row test for the filter's terms, or undefined when a term needs the records (then the predicate is used). */
  private compile(terms: readonly FilterTerm[]): Row | undefined {
    return compileFilter(terms, this.rowTests);
  }

  /** How the grammar's tests read the columns (core/filter.ts says which term tests which). */
  private readonly rowTests: FilterTarget<Row> = {
    equals: (field, value) => this.equals(field === 'job_uid' ? J : field === 'category' ? CAT : TC, value),
    glob: (_field, pattern) => {
      const glob = compileGlob(pattern);
      const col = this.cols[TC]!;
      const memo = this.memo((s) => glob(s));
      return (i) => memo(col[i]!);
    },
    result: (value) => {
      const want = OUTCOME_CODE[value]!;
      const res = this.res;
      return (i) => res[i] === want;
    },
    startedIn: (lo, hi) => this.startedIn(lo, hi),
    text: (value) => {
      // Case-insensitive substring of test_case, failure_reason, category or result_id.
      const has = compileSubstring(value);
      const memo = this.memo((s) => has(s));
      const [tc, fr, cat, idj] = [this.cols[TC]!, this.cols[FR]!, this.cols[CAT]!, this.cols[IDJ]!];
      return (i) =>
        memo(tc[i]!) || (fr[i] !== NONE && memo(fr[i]!)) || memo(cat[i]!) ||
        has(`${this.strs[idj[i]!]!}/${stampText(this.stamp[i]!)}`);
    },
    not: (test) => (i) => !test(i),
    all: (tests) => {
      if (tests.length === 0) return () => true;
      if (tests.length === 1) return tests[0]!;
      if (tests.length === 2) {
        const [a, b] = tests as [Row, Row];
        return (i) => a(i) && b(i);
      }
      return (i) => tests.every((t) => t(i));
    },
  };

  private startedIn(lo: string | undefined, hi: string | undefined): Row | undefined {
    if (this.oddTimes) return undefined;
    if ((lo !== undefined && !isCanonicalTime(lo)) || (hi !== undefined && !isCanonicalTime(hi))) return undefined;
    const from = lo === undefined ? -Infinity : Date.parse(lo);
    const to = hi === undefined ? Infinity : Date.parse(hi);
    const start = this.start;
    return (i) => start[i]! >= from && start[i]! < to;
  }

  private equals(c: number, value: string): (i: number) => boolean {
    const want = this.strIdx.get(value);
    if (want === undefined) return () => false;
    const col = this.cols[c]!;
    return (i) => col[i] === want;
  }

  /** A test of a table string, evaluated once per distinct string. */
  private memo(test: (s: string) => boolean): (k: number) => boolean {
    const seen = new Uint8Array(this.strs.length);
    return (k) => {
      let m = seen[k]!;
      if (m === 0) seen[k] = m = test(this.strs[k]!) ? 1 : 2;
      return m === 1;
    };
  }

  // ------------------------------------------------------------- rows

  /** The record of a row, from the cache or made and cached. */
  private record(i: number): ResultRecord {
    let r = this.cache.get(i);
    if (r) return r;
    r = this.make(i);
    if (this.cache.size >= CACHE_ENTRIES) this.cache.clear();
    this.cache.set(i, r);
    return r;
  }

  /** Make row `i`'s record (fields in the order add() stores them); `peek`: use the cache but do not fill it. */
  private make(i: number, peek = false): ResultRecord {
    if (peek) {
      const c = this.cache.get(i);
      if (c) return c;
    }
    const s = this.strs;
    const c = this.cols;
    const job = s[c[J]![i]!]!;
    const str = (col: number): string | null => {
      const k = c[col]![i]!;
      return k === NONE ? null : s[k]!;
    };
    const rec: ResultRecord = {
      result_id: `${s[c[IDJ]![i]!]!}/${stampText(this.stamp[i]!)}`,
      job_uid: job,
      test_case: s[c[TC]![i]!]!,
      test_pack_sha: s[c[SHA]![i]!]!,
      test_pack_branch: str(BR),
      category: s[c[CAT]![i]!]!,
      username: s[c[USER]![i]!]!,
      tags: this.tagsOf(c[TAGS]![i]!),
      start_time: new Date(this.start[i]!).toISOString(),
      end_time: new Date(this.end[i]!).toISOString(),
      duration: this.dur[i]!,
      result: OUTCOMES[this.res[i]!]!,
      failure_reason: str(FR),
      traceback: str(TB),
    };
    const inf = this.infra[i]!;
    if (inf !== INFRA_ABSENT) rec.infrastructure_error = inf === INFRA_NULL ? null : INFRASTRUCTURE_KINDS[inf - 2]!;
    return Object.freeze(rec);
  }

  private tagsOf(k: number): Readonly<Record<string, string>> {
    let t = this.tagObjs.get(k);
    if (!t) this.tagObjs.set(k, (t = Object.freeze(JSON.parse(this.strs[k]!) as Record<string, string>)));
    return t;
  }

  private intern(s: string): number {
    let k = this.strIdx.get(s);
    if (k === undefined) {
      k = this.strs.push(s) - 1;
      this.strIdx.set(s, k);
    }
    return k;
  }

  private internTags(t: Readonly<Record<string, string>>): number {
    const last = this.lastTags;
    if (last && sameTags(last.obj, t)) return last.idx;
    const idx = this.intern(JSON.stringify(t));
    this.lastTags = { obj: this.tagsOf(idx), idx };
    return idx;
  }

  /** Append a record's row at the end (no order kept); returns the row. */
  private append(r: ResultRecord): number {
    if (this.len === this.start.length) this.grow();
    const id = splitId(r.result_id);
    const i = this.len++;
    this.start[i] = Date.parse(r.start_time);
    this.end[i] = Date.parse(r.end_time);
    this.dur[i] = r.duration;
    this.stamp[i] = id.seconds;
    this.res[i] = OUTCOME_CODE[r.result]!;
    const kind = kindOfRecord(r);
    this.infra[i] = kind !== null ? 2 + INFRASTRUCTURE_KINDS.indexOf(kind) : r.infrastructure_error === undefined ? INFRA_ABSENT : INFRA_NULL;
    const c = this.cols;
    c[J]![i] = this.intern(r.job_uid);
    c[TC]![i] = this.intern(r.test_case);
    c[SHA]![i] = this.intern(r.test_pack_sha);
    c[BR]![i] = r.test_pack_branch === null ? NONE : this.intern(r.test_pack_branch);
    c[CAT]![i] = this.intern(r.category);
    c[USER]![i] = this.intern(r.username);
    c[TAGS]![i] = this.internTags(r.tags);
    c[FR]![i] = r.failure_reason === null ? NONE : this.intern(r.failure_reason);
    c[TB]![i] = r.traceback === null ? NONE : this.intern(r.traceback);
    c[IDJ]![i] = r.job_uid === id.jobUid ? c[J]![i] : this.intern(id.jobUid);
    this.count(r.test_case, r.duration, 1);
    this.noteRow(i);
    if (this.dead) this.dead[i] = 0;
    return i;
  }

  /** Bookkeeping of a new row: `others` and odd times. */
  private noteRow(i: number): void {
    const st = this.start[i]!;
    if (st < MIN_PLAIN || st > MAX_PLAIN) this.oddTimes = true;
    if (Math.floor(st / 1000) !== this.stamp[i]) this.others.set(this.idOf(i), st);
  }

  /** A row leaves the index: its duration and `others` entry go. */
  private forget(i: number): void {
    this.count(this.strs[this.cols[TC]![i]!]!, this.dur[i]!, -1);
    if (Math.floor(this.start[i]! / 1000) !== this.stamp[i]) this.others.delete(this.idOf(i));
  }

  private count(testCase: string, duration: number, sign: 1 | -1): void {
    let s = this.stats.get(testCase);
    if (!s) this.stats.set(testCase, (s = { sum: 0, count: 0 }));
    s.sum += sign * duration;
    s.count += sign;
    if (s.count === 0) this.stats.delete(testCase);
  }

  private idOf(i: number): string {
    return `${this.strs[this.cols[IDJ]![i]!]!}/${stampText(this.stamp[i]!)}`;
  }

  /** Date order of two rows: start time, then result_id (compareByDate). */
  private compareRows(a: number, b: number): number {
    const d = this.start[a]! - this.start[b]!;
    if (d !== 0) return d;
    const x = this.idOf(a);
    const y = this.idOf(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }

  private isSorted(): boolean {
    for (let i = this.head + 1; i < this.len; i++) if (this.compareRows(i - 1, i) > 0) return false;
    return true;
  }

  /** The live row of an id, or -1 (rows in date order). */
  private find(id: string): number {
    if (this.loading) return this.findLoading(id);
    const p = parseResultId(id);
    if (!p) return -1;
    const job = this.strIdx.get(p.jobUid);
    if (job === undefined) return -1;
    const other = this.others.get(id);
    const lo = other ?? p.seconds * 1000;
    const hi = other ?? p.seconds * 1000 + 999;
    const idj = this.cols[IDJ]!;
    for (let i = this.lowerBound(lo); i < this.len && this.start[i]! <= hi; i++) {
      if (idj[i] === job && this.stamp[i] === p.seconds && !this.dead?.[i]) return i;
    }
    return -1;
  }

  private findLoading(id: string): number {
    if (this.loadMap) return this.loadMap.get(id) ?? -1;
    this.loading = false;
    try {
      return this.find(id);
    } finally {
      this.loading = true;
    }
  }

  /** Rows stopped coming in date order while loading: look ids up in a map until loadEnd sorts. */
  private leaveOrder(): void {
    this.inOrder = false;
    this.loadMap = new Map();
    for (let i = this.head; i < this.len; i++) if (!this.dead?.[i]) this.loadMap.set(this.idOf(i), i);
  }

  /** First row whose start is >= ms. */
  private lowerBound(ms: number): number {
    let lo = this.head;
    let hi = this.len;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.start[mid]! < ms) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Where row `r` (outside the order) belongs among the rows before it. */
  private position(r: number): number {
    let lo = this.head;
    let hi = r;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.compareRows(mid, r) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Loading: mark a row dead (it is dropped at loadEnd). */
  private killRow(i: number): void {
    this.forget(i);
    (this.dead ??= new Uint8Array(this.start.length))[i] = 1;
    if (this.loadMap) this.loadMap.delete(this.idOf(i));
  }

  /** Remove a row, closing the gap. */
  private removeRow(i: number): void {
    this.forget(i);
    for (const a of this.arrays()) a.copyWithin(i, i + 1, this.len);
    this.len--;
    this.cache.clear();
  }

  /** Move row `from` (> to) to `to`, shifting the rows between up by one. */
  private rotate(to: number, from: number): void {
    for (const a of this.arrays()) {
      const v = a[from]!;
      a.copyWithin(to + 1, to, from);
      a[to] = v;
    }
    this.cache.clear();
  }

  private moveRow(from: number, to: number): void {
    if (from === to) return;
    for (const a of this.arrays()) a[to] = a[from]!;
  }

  /** Reorder the live rows as `rows` lists them. */
  private permute(rows: number[]): void {
    for (const a of this.arrays()) {
      const copy = a.slice(this.head, this.len);
      rows.forEach((r, j) => (a[this.head + j] = copy[r - this.head]!));
    }
  }

  private arrays(): Array<Float64Array | Uint8Array | Uint32Array> {
    return [this.start, this.end, this.dur, this.stamp, this.res, this.infra, ...this.cols];
  }

  /** Room for more rows: live rows move to the front of arrays a quarter larger (at least 1,024 more). */
  private grow(): void {
    const n = this.size;
    const cap = n + Math.max(1024, n >> 2);
    const a = this.head;
    const b = this.len;
    const f64 = (x: Float64Array): Float64Array => {
      const y = new Float64Array(cap);
      y.set(x.subarray(a, b));
      return y;
    };
    const u8 = (x: Uint8Array): Uint8Array => {
      const y = new Uint8Array(cap);
      y.set(x.subarray(a, b));
      return y;
    };
    const u32 = (x: Uint32Array): Uint32Array => {
      const y = new Uint32Array(cap);
      y.set(x.subarray(a, b));
      return y;
    };
    this.start = f64(this.start);
    this.end = f64(this.end);
    this.dur = f64(this.dur);
    this.stamp = f64(this.stamp);
    this.res = u8(this.res);
    this.infra = u8(this.infra);
    this.cols = this.cols.map(u32);
    if (this.dead) this.dead = u8(this.dead);
    if (this.loadMap) for (const [id, r] of this.loadMap) this.loadMap.set(id, r - a);
    this.head = 0;
    this.len = n;
    this.cache.clear();
  }
}

/**
 * The job part and stamp seconds of a result id the store accepted
 * (isCanonicalResultId: `/<node>/<hex>/<n>/<YYYY-MM-DD_hh.mm.ss>`), without
 * parseResultId's regexes: loading runs this for every line.
 */
function splitId(id: string): { jobUid: string; seconds: number } {
  const cut = id.lastIndexOf('/');
  const stamp = id.slice(cut + 1);
  if (cut > 0 && stamp.length === 19) {
    const day = stamp.slice(0, 10);
    let dayMs = lastDay.day === day ? lastDay.ms : NaN;
    if (Number.isNaN(dayMs)) {
      dayMs = Date.UTC(Number(day.slice(0, 4)), Number(day.slice(5, 7)) - 1, Number(day.slice(8, 10)));
      lastDay = { day, ms: dayMs };
    }
    const secs = Number(stamp.slice(11, 13)) * 3600 + Number(stamp.slice(14, 16)) * 60 + Number(stamp.slice(17, 19));
    const seconds = dayMs / 1000 + secs;
    // Every caller checked the id (isCanonicalResultId or parseResultId): a real date and time.
    if (Number.isInteger(seconds)) return { jobUid: id.slice(0, cut), seconds };
  }
  const p = parseResultId(id);
  if (!p) throw new Error(`results index: ${id} is not a result id`);
  return { jobUid: p.jobUid, seconds: p.seconds };
}
let lastDay = { day: '', ms: NaN };

/** `YYYY-MM-DD_hh.mm.ss` of a stamp in seconds; the last one is kept (a job's runs come together). */
let lastStamp = { sec: NaN, text: '' };
function stampText(sec: number): string {
  if (sec === lastStamp.sec) return lastStamp.text;
  const text = runStamp(new Date(sec * 1000));
  lastStamp = { sec, text };
  return text;
}


function sameTags(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  let n = 0;
  for (const k in b) {
    if (a[k] !== b[k] || !Object.hasOwn(a, k)) return false;
    n++;
  }
  return n === Object.keys(a).length;
}
