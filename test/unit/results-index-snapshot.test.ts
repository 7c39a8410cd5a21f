// The columnar results index and its snapshot (issue 23): every query answers what the plain
// index.jsonl load (MemoryIndex, the store before) answers, from the JSON lines alone, from a
// snapshot plus the lines after it, and after writes; a snapshot that cannot be trusted is
// never used; a crash while one is written leaves a usable store.
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { appendFile, mkdtemp, open as openFile, readdir, readFile, rm, stat, truncate, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isCanonicalResultId, parseResultId } from '../../src/core/ids.js';
import type { ResultRecord } from '../../src/core/model.js';
import { parseResultQuery, type ResultQuery } from '../../src/core/query.js';
import { FileResultRepository, type FileResultRepositoryOptions } from '../../src/storage/results/index.js';
import { MemoryIndex } from '../../src/storage/results/memory-index.js';
import { checkRecord, recordLine, tombstoneLine } from '../../src/storage/results/record.js';
import { STRING_COLUMNS } from '../../src/storage/results/columnar-index.js';
import { decodeSnapshot, encodeSnapshot } from '../../src/storage/results/snapshot.js';
import { capturingLogger, type CapturingLogger } from '../helpers/logger.js';

const CHILD = fileURLToPath(new URL('../fixtures/snapshotCrashChild.ts', import.meta.url));

/** A small deterministic PRNG (mulberry32): the same history every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NODE = 'node-a';
const TESTS = ['tests/a.py::test_a', 'tests/a.py::test_b', 'tests/menu.py::test_open_menu', 'tests/x*y.py::test_star', 'tests/Ünï.py::test_ü'];
const CATEGORIES = ['default', 'nightly', 'soak'];
const REASONS = ['AssertionError: menu not shown', 'InfrastructureError: capture_lost: ffmpeg died', 'Timeout waiting for MENU', 'InfrastructureError: bogus_kind: x'];
const TAGS: Array<Record<string, string>> = [{}, { b: '2', a: '1' }, { '10': 'x', '2': 'y' }, { 'jenkins/BUILD_ID': '7' }];
const stampOf = (ms: number): string => new Date(ms).toISOString().slice(0, 19).replace('T', '_').replaceAll(':', '.');

/**
 * index.jsonl lines of a generated history: records of many jobs, some replaced, some
 * tombstoned (a few re-added after), some out of date order, some whose start second is not
 * their id's, ties on start time, legacy records without infrastructure_error, null fields,
 * non-canonical times, a line with a field records do not have.
 */
function history(n: number, seed: number): { lines: string[]; ids: string[] } {
  const r = rng(seed);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(r() * xs.length)]!;
  const base = Date.UTC(2026, 10, 20, 9, 0, 0);
  const lines: string[] = [];
  const ids: string[] = [];
  const made: ResultRecord[] = [];
  let t = base;
  for (let i = 0; i < n; i++) {
    t += 1000 * (1 + Math.floor(r() * 120));
    const job = `/${NODE}/ab12/${1 + Math.floor(i / 7)}`;
    const stampMs = r() < 0.05 ? t - 60_000 * 5 : t; // an id whose stamp is not its start
    const startMs = r() < 0.05 && made.length ? Date.parse(made[made.length - 1]!.start_time) : t + Math.floor(r() * 1000);
    const outcome = pick(['pass', 'pass', 'fail', 'error'] as const);
    const dur = pick([0, 1, 2.5, 3, 3, 10, 61.25]);
    const rec: ResultRecord = {
      result_id: `${job}/${stampOf(stampMs)}`,
      job_uid: job,
      test_case: pick(TESTS),
      test_pack_sha: pick(['a'.repeat(40), 'b'.repeat(40)]),
      test_pack_branch: r() < 0.2 ? null : 'main',
      category: pick(CATEGORIES),
      username: pick(['ci', 'alice']),
      tags: pick(TAGS),
      start_time: r() < 0.1 ? new Date(startMs).toISOString().replace(/\.\d{3}Z$/, '+00:00') : new Date(startMs).toISOString(),
      end_time: new Date(startMs + dur * 1000).toISOString(),
      duration: dur,
      result: outcome,
      failure_reason: outcome === 'pass' ? null : pick(REASONS),
      traceback: outcome === 'pass' || r() < 0.3 ? null : `Traceback\n  line ${i % 4}`,
    };
    const infra = r();
    if (infra < 0.3) rec.infrastructure_error = null;
    else if (infra < 0.35) rec.infrastructure_error = 'disk_full';
    if (ids.includes(rec.result_id)) continue;
    made.push(rec);
    ids.push(rec.result_id);
    lines.push(i === 5 ? JSON.stringify({ ...JSON.parse(recordLine(rec)), extra_field: 1 }) : recordLine(rec));
    const roll = r();
    if (roll < 0.08 && made.length > 3) {
      // A later line for an earlier id replaces it.
      const old = pick(made);
      lines.push(recordLine({ ...old, result: 'error', duration: pick([0, 3, 99]), failure_reason: 'InfrastructureError: runner_timeout: late', infrastructure_error: 'runner_timeout' }));
    } else if (roll < 0.14 && made.length > 3) {
      lines.push(tombstoneLine(pick(made).result_id));
    } else if (roll < 0.16 && made.length > 3) {
      lines.push(recordLine(pick(made))); // re-added, perhaps after its tombstone
    }
  }
  // A run recorded late (a crash's folder indexed again): out of date order.
  const late = made[3]!;
  const lateRec = { ...late, result_id: `/${NODE}/ab12/999/${stampOf(base + 1000)}`, job_uid: `/${NODE}/ab12/999`, start_time: new Date(base + 1000).toISOString(), end_time: new Date(base + 2000).toISOString(), duration: 1 };
  lines.push(recordLine(lateRec));
  ids.push(lateRec.result_id);
  return { lines, ids };
}

/** The store before issue 23: MemoryIndex loaded from the lines as open() loaded them. */
function referenceIndex(lines: string[]): MemoryIndex {
  const m = new MemoryIndex();
  for (const line of lines) {
    const raw = JSON.parse(line) as { deleted?: string };
    if (typeof raw.deleted === 'string') {
      const p = parseResultId(raw.deleted)!;
      m.loadDelete(`${p.jobUid}/${p.stamp}`);
      continue;
    }
    const rec = checkRecord(raw);
    if (typeof rec === 'string' || !isCanonicalResultId(rec.result_id)) throw new Error(`bad generated line ${line}`);
    m.loadOwned(rec);
  }
  m.loadEnd();
  return m;
}

const KEYS = ['result_id', 'job_uid', 'test_case', 'test_pack_sha', 'test_pack_branch', 'category', 'username', 'tags',
  'start_time', 'end_time', 'duration', 'result', 'failure_reason', 'traceback', 'infrastructure_error'] as const;
/** A record's JSON with its fields in one order (answers present fields by name, not by order). */
const norm = (rs: readonly ResultRecord[]): string =>
  JSON.stringify(rs.map((r) => {
    const keys = KEYS.filter((k) => k in r);
    if (keys.length !== Object.keys(r).length) throw new Error(`a record with other fields: ${Object.keys(r).join(',')}`);
    return keys.map((k) => [k, r[k]]);
  }));

const FILTERS = [
  '', 'result:fail', '-result:pass', 'category:nightly', '-category:soak', 'category:nope',
  `job:${NODE}/ab12/3`, `-job:/${NODE}/ab12/3`, 'job:nobody/ab12/1',
  'testcase:tests/a.py::test_a', 'testcase:*::test_a*', 'testcase:tests/x*', '-testcase:*menu*', 'testcase:tests/x*y.py::test_star',
  'date:2026-11-20', 'date:>=2026-11-21T03:00', 'date:<2026-11-20T12:30:15', 'date:2026-11-20..2026-11-21', 'date:>2026-11-22',
  'menu', 'MENU', 'ab12/3', '2026-11-20_1', 'capture_lost', '-nightly', 'ü',
  'result:error category:default', 'testcase:*a* -result:pass date:>=2026-11-20T15:00', 'a b c',
];
const SORTS = ['date:desc', 'date:asc', 'duration:desc', 'duration:asc', 'job:asc', 'job:desc', 'testcase:asc', 'testcase:desc', 'category:asc', 'category:desc', 'result:asc', 'result:desc'];
const LIMITS = [1, 7, 2000];
const ZONES = ['UTC', 'Europe/London', 'America/New_York'];
const NOW = new Date(Date.UTC(2026, 10, 23, 12, 0, 0));

/** Every query kind against the reference; returns how many were compared. */
function expectSameAnswers(store: FileResultRepository, ref: MemoryIndex, deletedIds: readonly string[] = []): number {
  let n = 0;
  for (const [f, filter] of FILTERS.entries()) {
    for (const sort of SORTS) {
      for (const limit of LIMITS) {
        const q = parseResultQuery({ filter, sort, tz: ZONES[f % ZONES.length] }, { now: NOW, limit });
        const want = norm(ref.query(q));
        const got = norm(store.query(q));
        if (got !== want) expect(got, `filter "${filter}" sort ${sort} limit ${limit}`).to.equal(want);
        n++;
        if (limit === 7) {
          // The same query with its predicate only (internal callers): the records' path.
          const bare: ResultQuery = { predicate: q.predicate, sort: q.sort, tz: q.tz, limit: q.limit };
          const got2 = norm(store.query(bare));
          if (got2 !== want) expect(got2, `predicate of "${filter}" sort ${sort} limit ${limit}`).to.equal(want);
          n++;
        }
      }
    }
  }
  expect(store.size).to.equal(ref.size);
  for (const r of ref.all()) {
    const got = store.get(r.result_id);
    if (got === undefined || got === 'deleted' || norm([got]) !== norm([r])) expect(got, r.result_id).to.deep.equal(r);
  }
  for (const tc of TESTS) {
    const m = ref.meanDuration(tc);
    if (m === undefined) expect(store.meanDuration(tc)).to.equal(undefined);
    else expect(store.meanDuration(tc)).to.be.closeTo(m, 1e-9 * Math.max(1, Math.abs(m)));
  }
  for (const id of deletedIds) if (!ref.get(id)) expect(store.get(id)).to.equal('deleted');
  return n;
}

/** The "results index loaded" entry of the last open. */
function loadedEntry(log: CapturingLogger): { from_snapshot: boolean; lines_read: number } {
  const e = log.entries.filter((x) => x.msg === 'results index loaded').pop();
  expect(e, 'a "results index loaded" log entry').to.not.equal(undefined);
  return e!.obj as { from_snapshot: boolean; lines_read: number };
}

const rejected = (log: CapturingLogger): string[] =>
  log.entries.filter((e) => e.msg.startsWith('results index snapshot not used')).map((e) => String(e.obj.why));

describe('results index: columns and snapshot (issue 23)', function () {
  this.timeout(60_000);
  let dir: string;
  const opened: FileResultRepository[] = [];
  const { lines } = history(700, 23);
  const tombstoned = lines.map((l) => (JSON.parse(l) as { deleted?: string }).deleted).filter((x): x is string => typeof x === 'string');

  async function store(log = capturingLogger(), opts: Partial<FileResultRepositoryOptions> = {}): Promise<FileResultRepository> {
    const s = new FileResultRepository({ dir, retention: { max_results: 100_000, min_free_mb: 0 }, compactAfter: 1e9, logger: log, ...opts });
    await s.open();
    opened.push(s);
    return s;
  }
  const close = async (s: FileResultRepository): Promise<void> => {
    opened.splice(opened.indexOf(s), 1);
    await s.close();
  };
  const jsonl = () => join(dir, 'index.jsonl');
  const snap = () => join(dir, 'index.snapshot');
  const writeLines = (ls: string[]) => writeFile(jsonl(), ls.map((l) => l + '\n').join(''));

  /** index.jsonl with the first `k` lines, and a snapshot of them (written at a clean close). */
  async function snapshotOf(k: number): Promise<void> {
    await writeLines(lines.slice(0, k));
    const s = await store();
    await close(s);
    await stat(snap()); // there is one
  }

  beforeEach(async () => {
    dir = await mkdtemp(join(tmpdir(), 'farmhand-snapshot-'));
  });
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('loaded from index.jsonl alone, every filter, sort, zone and limit answers what the plain load answers', async () => {
    await writeLines(lines);
    const log = capturingLogger();
    const s = await store(log);
    expect(loadedEntry(log).from_snapshot).to.equal(false);
    expect(expectSameAnswers(s, referenceIndex(lines), tombstoned)).to.be.greaterThan(1000);
  });

  it('from a snapshot plus the lines after it (replacements and tombstones of snapshot rows among them): the same answers; then adds, a replacement and retention keep them the same, and after a clean stop the snapshot alone does', async () => {
    const k = Math.floor(lines.length * 0.6);
    await snapshotOf(k);
    await appendFile(jsonl(), lines.slice(k).map((l) => l + '\n').join(''));
    const log = capturingLogger();
    const ref = referenceIndex(lines);
    // Retention keeps 25 fewer than there will be after the 3 writes below (2 new runs, 1 replaced).
    const s = await store(log, { retention: { max_results: ref.size + 2 - 25, min_free_mb: 0 } });
    expect(loadedEntry(log)).to.deep.include({ from_snapshot: true, lines_read: lines.length - k });
    expectSameAnswers(s, ref, tombstoned);

    // Writes on a loaded snapshot: a new run, a run recorded again (replaced), an older run recorded late.
    const last = ref.all()[ref.size - 1]!;
    const fresh: ResultRecord = { ...last, result_id: `/${NODE}/ab12/500/2026-12-01_10.00.00`, job_uid: `/${NODE}/ab12/500`, start_time: '2026-12-01T10:00:00.250Z', end_time: '2026-12-01T10:00:03.250Z', duration: 3 };
    const again: ResultRecord = { ...ref.all()[10]!, result: 'fail', failure_reason: 'AssertionError: again', duration: 42 };
    const older: ResultRecord = { ...last, result_id: `/${NODE}/ab12/501/2026-11-20_09.00.30`, job_uid: `/${NODE}/ab12/501`, start_time: '2026-11-20T09:00:30.000Z', end_time: '2026-11-20T09:00:31.000Z', duration: 1 };
    for (const r of [fresh, again, older]) {
      await s.add(r);
      ref.put(r);
    }
    expectSameAnswers(s, ref, tombstoned);
    const deleted = await s.enforceRetention();
    expect(deleted).to.have.length(25);
    ref.removeOldest(25);
    expectSameAnswers(s, ref, [...tombstoned, ...deleted]);
    await close(s);

    const log2 = capturingLogger();
    const s2 = await store(log2);
    expect(loadedEntry(log2)).to.deep.include({ from_snapshot: true, lines_read: 0 });
    // The deleted ids are in no line read and in no deleted.jsonl (no compaction): they come from the snapshot.
    expectSameAnswers(s2, ref, [...tombstoned, ...deleted]);
  });

  it('deletion after a snapshot, then a crash (no clean stop): the snapshot and the tombstones after it give the answers without the deleted runs', async () => {
    await snapshotOf(lines.length);
    const s = await store(capturingLogger(), { retention: { max_results: 300, min_free_mb: 0 } });
    const deleted = await s.enforceRetention();
    expect(deleted.length).to.be.greaterThan(0);
    // No close: as after a kill, the snapshot on disk is the one from before the deletion (afterEach closes it).
    const log = capturingLogger();
    const s2 = await store(log);
    expect(loadedEntry(log)).to.deep.include({ from_snapshot: true, lines_read: deleted.length });
    const ref = referenceIndex([...lines, ...deleted.map(tombstoneLine)]);
    expect(ref.size).to.equal(300);
    expectSameAnswers(s2, ref, [...tombstoned, ...deleted]);
  });

  it('a compaction after a snapshot (retention past the dead-line limit) replaces it; a restart answers from the compacted index', async () => {
    await snapshotOf(lines.length);
    // Every later snapshot write fails: what is on disk after the compaction is what a crash right after it leaves.
    const failing = () => {
      throw new Error('no snapshot this time');
    };
    const s = await store(capturingLogger(), { retention: { max_results: 100, min_free_mb: 0 }, compactAfter: 10, snapshotChunkHook: failing });
    const deleted = await s.enforceRetention();
    expect((await readFile(jsonl(), 'utf8')).trim().split('\n')).to.have.length(100); // compacted
    await close(s);
    // The snapshot of the file before the compaction was deleted before the file was replaced.
    expect(await stat(snap()).catch((e: NodeJS.ErrnoException) => e.code)).to.equal('ENOENT');
    const log = capturingLogger();
    const s2 = await store(log);
    expect(loadedEntry(log)).to.deep.include({ from_snapshot: false, lines_read: 100 });
    const ref = referenceIndex([...lines, ...deleted.map(tombstoneLine)]);
    expectSameAnswers(s2, ref, [...tombstoned, ...deleted]);
  });

  describe('a snapshot that cannot be trusted is not used: the whole index.jsonl is read, and a new snapshot written', () => {
    const k = 400;

    /** Open, expect the snapshot refused for `why` and the plain answers of `want`; then a clean stop writes a good one that the next start uses. */
    async function expectFallback(want: string[], why: RegExp): Promise<void> {
      const log = capturingLogger();
      const s = await store(log);
      expect(loadedEntry(log)).to.deep.include({ from_snapshot: false, lines_read: want.length });
      expect(rejected(log).join('; ')).to.match(why);
      expectSameAnswers(s, referenceIndex(want));
      await close(s);
      const log2 = capturingLogger();
      const s2 = await store(log2);
      expect(loadedEntry(log2)).to.deep.include({ from_snapshot: true, lines_read: 0 });
      expectSameAnswers(s2, referenceIndex(want));
    }

    it('truncated (a torn write)', async () => {
      await snapshotOf(k);
      const size = (await stat(snap())).size;
      await truncate(snap(), Math.floor(size / 2));
      await expectFallback(lines.slice(0, k), /checksum/);
    });

    it('truncated inside its fixed header', async () => {
      await snapshotOf(k);
      await truncate(snap(), 20);
      await expectFallback(lines.slice(0, k), /no magic/);
    });

    it('a damaged byte in the columns (a duration)', async () => {
      await snapshotOf(k);
      const buf = await readFile(snap());
      buf[buf.length - 1200]! ^= 0x40;
      await writeFile(snap(), buf);
      await expectFallback(lines.slice(0, k), /checksum/);
    });

    it('a valid checksum over values this code cannot answer with (a start time that is not a number: a hand-made file)', async () => {
      await snapshotOf(k);
      const buf = await readFile(snap());
      const headerLen = buf.readUInt32LE(12);
      const startAt = 48 + headerLen + ((8 - (headerLen % 8)) % 8);
      buf.writeDoubleLE(NaN, startAt); // row 0's start
      createHash('sha256').update(buf.subarray(48)).digest().copy(buf, 16);
      await writeFile(snap(), buf);
      await expectFallback(lines.slice(0, k), /row 0 is not a valid record/);
    });

    it('a valid checksum over a tag set that is not JSON (a hand-made file)', async () => {
      await snapshotOf(k);
      const { columns, header } = decodeSnapshot(await readFile(snap()));
      const tagIdx = columns.cols[STRING_COLUMNS.indexOf('tags')]![0]!;
      columns.strs[tagIdx] = '{not json';
      await writeFile(snap(), Buffer.concat(encodeSnapshot(columns, { jsonl: header.jsonl, deadLines: header.deadLines, deleted: header.deleted })));
      await expectFallback(lines.slice(0, k), /row 0: its tags are not an object of strings/);
    });

    it('another format version', async () => {
      await snapshotOf(k);
      const buf = await readFile(snap());
      buf.writeUInt32LE(99, 8);
      await writeFile(snap(), buf);
      await expectFallback(lines.slice(0, k), /version 99/);
    });

    it('index.jsonl cut below what the snapshot covers (an older copy restored)', async () => {
      await snapshotOf(k);
      await writeLines(lines.slice(0, k - 50)); // same inode, shorter
      await expectFallback(lines.slice(0, k - 50), /no longer holds/);
    });

    it('index.jsonl replaced by another file (a compaction or rebuild after the snapshot)', async () => {
      await snapshotOf(k);
      const other = [...lines.slice(100, k), ...lines.slice(k, k + 100)];
      await writeFile(jsonl() + '.new', other.map((l) => l + '\n').join(''));
      await rm(jsonl());
      const { rename } = await import('node:fs/promises');
      await rename(jsonl() + '.new', jsonl());
      await expectFallback(other, /no longer holds/);
    });

    it('index.jsonl rewritten in place, as long or longer (same inode: the first and last bytes it covered differ)', async () => {
      await snapshotOf(k);
      const other = [...lines.slice(0, k - 1).reverse(), ...lines.slice(k - 1, k + 40)];
      const fh = await openFile(jsonl(), 'r+');
      await fh.write(other.map((l) => l + '\n').join(''), 0);
      await fh.close();
      await expectFallback(other, /no longer holds/);
    });
  });

  it('a snapshot older than index.jsonl (the lines after it not yet in one) is used and the tail replayed', async () => {
    await snapshotOf(200);
    await appendFile(jsonl(), lines.slice(200).map((l) => l + '\n').join(''));
    const log = capturingLogger();
    const s = await store(log);
    expect(loadedEntry(log)).to.deep.include({ from_snapshot: true, lines_read: lines.length - 200 });
    expect(rejected(log)).to.deep.equal([]);
    expectSameAnswers(s, referenceIndex(lines), tombstoned);
  });

  it('a crash (SIGKILL) in the middle of writing a snapshot leaves the previous one and index.jsonl: the next start answers everything, and removes the half-written file', async () => {
    const k = 300;
    await snapshotOf(k);
    const before = await readFile(snap());
    await appendFile(jsonl(), lines.slice(k).map((l) => l + '\n').join(''));
    // The child opens the store (snapshot + tail), then closes it, which writes a new snapshot: killed at its 3rd chunk.
    const child = spawn(process.execPath, ['--import', 'tsx', CHILD, dir, '3'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exit = await new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((res) => child.on('exit', (code, signal) => res({ code, signal })));
    expect(exit, err).to.deep.equal({ code: null, signal: 'SIGKILL' });
    const temps = (await readdir(dir)).filter((n) => n.startsWith('.index.snapshot.') && n.endsWith('.tmp'));
    expect(temps, 'the half-written snapshot').to.have.length(1);
    expect((await readFile(snap())).equals(before), 'the previous snapshot is untouched').to.equal(true);
    const log = capturingLogger();
    const s = await store(log);
    expect(loadedEntry(log)).to.deep.include({ from_snapshot: true, lines_read: lines.length - k });
    expectSameAnswers(s, referenceIndex(lines), tombstoned);
    expect((await readdir(dir)).filter((n) => n.endsWith('.tmp'))).to.deep.equal([]);
  });
});
