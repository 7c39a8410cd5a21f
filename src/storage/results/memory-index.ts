/**
 * The results index as it lives in memory: every live record, frozen, in one
 * array in date order (start_time, then result_id), plus a Map by id and a
 * running duration sum per test case. Queries scan the array once; a date
 * sort walks it from the right end and stops at the limit, other sorts keep
 * only the best `limit` matches in a heap. Repeated strings (test case, job,
 * sha, category, failure reason, traceback, tags) are interned so 100,000
 * runs of 50 test cases cost little more than their ids and times.
 */
import { compareByDate as byDate, compareFor, type ResultQuery } from '../../core/query.js';
import type { ResultRecord } from '../../core/model.js';
import { kindOfRecord } from '../../core/infrastructure.js';

export class MemoryIndex {
  private sorted: ResultRecord[] = [];
  private readonly byId = new Map<string, ResultRecord>();
  private readonly stats = new Map<string, { sum: number; count: number }>();
  private strings = new Map<string, string>();
  private tagSets = new Map<string, Readonly<Record<string, string>>>();
  private lastTags: Readonly<Record<string, string>> | undefined;

  get size(): number {
    return this.sorted.length;
  }

  get(id: string): ResultRecord | undefined {
    return this.byId.get(id);
  }

  /** The live records in date order (do not modify). */
  all(): readonly ResultRecord[] {
    return this.sorted;
  }

  /** The `n` oldest records. */
  oldest(n: number): ResultRecord[] {
    return this.sorted.slice(0, Math.max(0, n));
  }

  /**
   * Loading (at open): `loadSet`/`loadDelete` as the index file's lines come,
   * then `loadEnd` sorts once. Records are interned as they arrive, so the
   * parsed copies die young and only one copy of each record is ever kept.
   */
  loadSet(r: ResultRecord): boolean {
    const old = this.byId.get(r.result_id);
    if (old) this.count(old, -1);
    const rec = this.intern(r);
    this.byId.set(rec.result_id, rec);
    this.count(rec, 1);
    return old !== undefined;
  }

  /**
   * `loadSet` of a record parsed for the index alone (nobody else holds it):
   * its strings are interned in place and it is frozen and kept as it is, so
   * loading makes no second copy of each record. Returns whether it replaced one.
   */
  loadOwned(r: ResultRecord): boolean {
    const old = this.byId.get(r.result_id);
    if (old) this.count(old, -1);
    // A line with fields the record does not have (a newer version's, a hand edit) is copied without them, as put() does.
    const rec = onlyRecordKeys(r) ? this.internInPlace(r) : this.intern(r);
    this.byId.set(rec.result_id, rec);
    this.count(rec, 1);
    return old !== undefined;
  }

  /** Loading: drop a record (its tombstone came); true when it was there. */
  loadDelete(id: string): boolean {
    const old = this.byId.get(id);
    if (!old) return false;
    this.byId.delete(id);
    this.count(old, -1);
    return true;
  }

  loadEnd(): void {
    this.sorted = [...this.byId.values()];
    if (!isSorted(this.sorted)) this.sorted.sort(byDate);
  }

  /** Add or replace one record; returns the stored (frozen) record. */
  put(r: ResultRecord): ResultRecord {
    const rec = this.intern(r);
    const old = this.byId.get(rec.result_id);
    if (old) {
      this.sorted.splice(this.position(old), 1);
      this.count(old, -1);
    }
    const last = this.sorted[this.sorted.length - 1];
    // Runs finish in start order on one node, so this is nearly always a push.
    if (!last || byDate(last, rec) < 0) this.sorted.push(rec);
    else this.sorted.splice(this.position(rec), 0, rec);
    this.byId.set(rec.result_id, rec);
    this.count(rec, 1);
    return rec;
  }

  /** Remove the `n` oldest records (retention); returns them. */
  removeOldest(n: number): ResultRecord[] {
    const gone = this.sorted.splice(0, Math.max(0, n));
    for (const r of gone) {
      this.byId.delete(r.result_id);
      this.count(r, -1);
    }
    return gone;
  }

  meanDuration(testCase: string): number | undefined {
    const s = this.stats.get(testCase);
    return s && s.count > 0 ? s.sum / s.count : undefined;
  }

  /** Filter, sort and cap. */
  query(q: ResultQuery): ResultRecord[] {
    const limit = Math.max(0, q.limit);
    if (limit === 0) return [];
    if (q.sort.field === 'date') return this.walkByDate(q.predicate, q.sort.dir, limit);
    const matches: ResultRecord[] = [];
    for (const r of this.sorted) if (q.predicate(r)) matches.push(r);
    // Feed the heap in the sort's direction: keys that grow with time (job numbers) then
    // mostly lose against the heap's top at once instead of all replacing it.
    if (q.sort.dir === 'desc') matches.reverse();
    return smallest(matches, compareFor(q.sort), limit);
  }

  /** Drop interned strings no live record uses any more (after many deletions). */
  repool(): void {
    this.strings = new Map();
    this.tagSets = new Map();
    this.lastTags = undefined;
    for (const r of this.sorted) this.intern(r);
  }

  private walkByDate(pred: (r: ResultRecord) => boolean, dir: 'asc' | 'desc', limit: number): ResultRecord[] {
    const out: ResultRecord[] = [];
    const a = this.sorted;
    if (dir === 'desc') {
      for (let i = a.length - 1; i >= 0 && out.length < limit; i--) if (pred(a[i]!)) out.push(a[i]!);
    } else {
      for (let i = 0; i < a.length && out.length < limit; i++) if (pred(a[i]!)) out.push(a[i]!);
    }
    return out;
  }

  /** Index of `r`'s place in date order (binary search). */
  private position(r: ResultRecord): number {
    let lo = 0;
    let hi = this.sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (byDate(this.sorted[mid]!, r) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private count(r: ResultRecord, sign: 1 | -1): void {
    let s = this.stats.get(r.test_case);
    if (!s) this.stats.set(r.test_case, (s = { sum: 0, count: 0 }));
    s.sum += sign * r.duration;
    s.count += sign;
    if (s.count === 0) this.stats.delete(r.test_case);
  }

  private str<T extends string | null>(s: T): T {
    if (s === null) return s;
    const known = this.strings.get(s);
    if (known !== undefined) return known as T;
    this.strings.set(s, s);
    return s;
  }

  /** The interned, frozen copy of a tag set. The last one is checked first: a job's runs share theirs and come together. */
  private tagSet(t: Readonly<Record<string, string>>): Readonly<Record<string, string>> {
    const last = this.lastTags;
    if (last && sameTags(last, t)) return last;
    const tagKey = JSON.stringify(t);
    let tags = this.tagSets.get(tagKey);
    if (!tags) this.tagSets.set(tagKey, (tags = Object.freeze({ ...t })));
    this.lastTags = tags;
    return tags;
  }

  private internInPlace(r: ResultRecord): ResultRecord {
    r.job_uid = this.str(r.job_uid);
    r.test_case = this.str(r.test_case);
    r.test_pack_sha = this.str(r.test_pack_sha);
    r.test_pack_branch = this.str(r.test_pack_branch);
    r.category = this.str(r.category);
    r.username = this.str(r.username);
    r.tags = this.tagSet(r.tags);
    r.failure_reason = this.str(r.failure_reason);
    r.traceback = this.str(r.traceback);
    const kind = kindOfRecord(r);
    if (kind !== null || r.infrastructure_error !== undefined) r.infrastructure_error = kind;
    return Object.freeze(r);
  }

  private intern(r: ResultRecord): ResultRecord {
    const tags = this.tagSet(r.tags);
    return Object.freeze({
      result_id: r.result_id,
      job_uid: this.str(r.job_uid),
      test_case: this.str(r.test_case),
      test_pack_sha: this.str(r.test_pack_sha),
      test_pack_branch: this.str(r.test_pack_branch),
      category: this.str(r.category),
      username: this.str(r.username),
      tags: tags,
      start_time: r.start_time,
      end_time: r.end_time,
      duration: r.duration,
      result: r.result,
      failure_reason: this.str(r.failure_reason),
      traceback: this.str(r.traceback),
      // Records stored before the field existed get it from their reason's prefix when it names a kind.
      ...infrastructureField(r),
    });
  }
}

function infrastructureField(r: ResultRecord): Pick<ResultRecord, 'infrastructure_error'> {
  const kind = kindOfRecord(r);
  return kind === null && r.infrastructure_error === undefined ? {} : { infrastructure_error: kind };
}


const RECORD_KEYS = new Set<string>([
  'result_id', 'job_uid', 'test_case', 'test_pack_sha', 'test_pack_branch', 'category', 'username', 'tags',
  'start_time', 'end_time', 'duration', 'result', 'failure_reason', 'traceback', 'infrastructure_error',
] satisfies Array<keyof ResultRecord>);

function onlyRecordKeys(r: object): boolean {
  for (const k in r) if (!RECORD_KEYS.has(k)) return false;
  return true;
}

function sameTags(a: Readonly<Record<string, string>>, b: Readonly<Record<string, string>>): boolean {
  let n = 0;
  for (const k in b) {
    if (a[k] !== b[k] || !Object.hasOwn(a, k)) return false;
    n++;
  }
  return n === Object.keys(a).length;
}

function isSorted(a: ResultRecord[]): boolean {
  for (let i = 1; i < a.length; i++) if (byDate(a[i - 1]!, a[i]!) > 0) return false;
  return true;
}

/**
 * The `k` smallest of `items` under `cmp`, sorted. Keeps a max-heap of the
 * best `k` so far: O(n log k) at worst, and most items lose against the
 * heap's top in one comparison.
 */
export function smallest<T>(items: T[], cmp: (a: T, b: T) => number, k: number): T[] {
  if (items.length <= k) return items.sort(cmp);
  const heap: T[] = [];
  const down = (i: number): void => {
    for (;;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let top = i;
      if (l < heap.length && cmp(heap[l]!, heap[top]!) > 0) top = l;
      if (r < heap.length && cmp(heap[r]!, heap[top]!) > 0) top = r;
      if (top === i) return;
      [heap[i], heap[top]] = [heap[top]!, heap[i]!];
      i = top;
    }
  };
  for (const x of items) {
    if (heap.length < k) {
      heap.push(x);
      for (let i = heap.length - 1; i > 0; ) {
        const p = (i - 1) >>> 1;
        if (cmp(heap[i]!, heap[p]!) <= 0) break;
        [heap[i], heap[p]] = [heap[p]!, heap[i]!];
        i = p;
      }
    } else if (cmp(x, heap[0]!) < 0) {
      heap[0] = x;
      down(0);
    }
  }
  return heap.sort(cmp);
}
