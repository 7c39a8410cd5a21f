// FileResultRepository against a real temporary folder: index, restart, rebuild, torn lines, retention.
import { expect } from 'chai';
import { appendFile, mkdir, mkdtemp, readdir, readFile, rm, stat, unlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FarmError } from '../../src/core/errors.js';
import type { ResultRecord } from '../../src/core/model.js';
import { compareFor, parseResultQuery } from '../../src/core/query.js';
import { FileResultRepository, type FileResultRepositoryOptions } from '../../src/storage/results/index.js';

const NODE = 'farmhand-0123456789ab';
const TESTS = ['tests/menu.py::test_open_menu', 'tests/epg.py::test_guide', 'tests/vod.py::test_play'];

/** Run `i` of a made-up history: one run a minute from 2026-11-20 10:00 UTC, jobs of 4 runs each. */
function makeRecord(i: number, over: Partial<ResultRecord> = {}): ResultRecord {
  const start = new Date(Date.UTC(2026, 10, 20, 10, 0, 0) + i * 60_000 + 123);
  const job = `/${NODE}/ab12/${Math.floor(i / 4) + 1}`;
  const iso = start.toISOString();
  const outcome = i % 5 === 0 ? 'fail' : i % 7 === 0 ? 'error' : 'pass';
  return {
    result_id: `${job}/${iso.slice(0, 10)}_${iso.slice(11, 19).replaceAll(':', '.')}`,
    job_uid: job,
    test_case: TESTS[i % TESTS.length]!,
    test_pack_sha: 'a'.repeat(40),
    test_pack_branch: 'main',
    category: i % 2 ? 'nightly' : 'default',
    username: 'ci',
    tags: { 'jenkins/BUILD_ID': String(Math.floor(i / 4)) },
    start_time: iso,
    end_time: new Date(start.getTime() + (i % 9) * 1000 + 500).toISOString(),
    duration: (i % 9) + 0.5,
    result: outcome,
    failure_reason: outcome === 'pass' ? null : `AssertionError: step ${i % 3} failed`,
    traceback: outcome === 'pass' ? null : `Traceback (most recent call last):\n  File "x.py", line ${i % 3}\nAssertionError`,
    ...over,
  };
}

describe('FileResultRepository', () => {
  let root: string;
  let dir: string;
  const open: FileResultRepository[] = [];

  async function store(opts: Partial<FileResultRepositoryOptions> = {}): Promise<FileResultRepository> {
    const s = new FileResultRepository({ dir, retention: { max_results: 1000, min_free_mb: 0 }, ...opts });
    await s.open();
    open.push(s);
    return s;
  }

  async function filled(n: number, opts: Partial<FileResultRepositoryOptions> = {}): Promise<FileResultRepository> {
    const s = await store(opts);
    for (let i = 0; i < n; i++) {
      await s.createRunDir(makeRecord(i).result_id);
      await s.add(makeRecord(i));
    }
    return s;
  }

  const all = (s: FileResultRepository, filter = '', sort = 'date:asc') => s.query(parseResultQuery({ filter, sort })).map((r) => r.result_id);

  beforeEach(async () => {
    root = await mkdtemp(join(tmpdir(), 'farmhand-results-'));
    dir = join(root, 'results');
  });

  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
    await rm(root, { recursive: true, force: true });
  });

  it('maps /<node>/<hex>/<n>/<stamp> to <dir>/<hex>/<n>/<stamp> (node dropped)', async () => {
    const s = await store();
    const id = makeRecord(0).result_id;
    expect(s.dirOf(id)).to.equal(join(dir, 'ab12', '1', '2026-11-20_10.00.00'));
    expect(s.dirOf(id.slice(1))).to.equal(s.dirOf(id));
    expect(await s.createRunDir(id)).to.equal(s.dirOf(id));
    expect((await stat(s.dirOf(id))).isDirectory()).to.equal(true);
  });

  it('add writes result.json and indexes the run; get and query answer from the index', async () => {
    const s = await filled(10);
    const r3 = makeRecord(3);
    expect(s.get(r3.result_id)).to.deep.equal(r3);
    expect(s.get(r3.result_id.slice(1))).to.deep.equal(r3);
    expect(JSON.parse(await readFile(join(s.dirOf(r3.result_id), 'result.json'), 'utf8'))).to.deep.equal(r3);
    expect(s.get(`/${NODE}/ab12/99/2026-11-20_10.00.00`)).to.equal(undefined);
    expect(all(s)).to.deep.equal([...Array(10).keys()].map((i) => makeRecord(i).result_id));
    expect(all(s, '', 'date:desc')[0]).to.equal(makeRecord(9).result_id);
    expect(all(s, 'result:fail')).to.deep.equal([0, 5].map((i) => makeRecord(i).result_id));
  });

  it('spec: "A run that is still in progress is not part of any results list"', async () => {
    const s = await filled(3);
    const running = makeRecord(3).result_id;
    await s.createRunDir(running);
    expect(all(s)).to.not.include(running);
    expect(s.get(running)).to.equal(undefined);
  });

  it('sorts and caps: every field and direction gives the order of compareFor, cut at the limit', async () => {
    const s = await filled(40);
    // Two jobs with the same number in another installation, to exercise ties across keys.
    await s.add(makeRecord(40, { job_uid: `/${NODE}/cd34/2`, result_id: `/${NODE}/cd34/2/2026-11-20_10.40.00` }));
    const everything = s.query(parseResultQuery({}, { limit: 1000 }));
    expect(everything).to.have.length(41);
    for (const field of ['category', 'date', 'duration', 'job', 'testcase', 'result'] as const) {
      for (const dir of ['asc', 'desc'] as const) {
        const expected = [...everything].sort(compareFor({ field, dir })).map((r) => r.result_id);
        const sort = `${field}:${dir}`;
        expect(s.query(parseResultQuery({ sort }, { limit: 1000 })).map((r) => r.result_id), sort).to.deep.equal(expected);
        expect(s.query(parseResultQuery({ sort }, { limit: 7 })).map((r) => r.result_id), sort).to.deep.equal(expected.slice(0, 7));
        const filtered = s.query(parseResultQuery({ sort, filter: 'result:pass' }, { limit: 5 })).map((r) => r.result_id);
        expect(filtered, sort).to.deep.equal(expected.filter((id) => (s.get(id) as ResultRecord).result === 'pass').slice(0, 5));
      }
    }
  });

  it('meanDuration averages past runs of a test case', async () => {
    const s = await filled(9);
    const runs = [0, 3, 6].map((i) => makeRecord(i).duration);
    expect(s.meanDuration(TESTS[0]!)).to.be.closeTo(runs.reduce((a, b) => a + b) / 3, 1e-9);
    expect(s.meanDuration('tests/none.py::test_x')).to.equal(undefined);
  });

  it('a restart (new instance on the same folder) keeps every result', async () => {
    const first = await filled(12);
    const before = all(first, '', 'duration:desc');
    await first.close();
    const second = await store();
    expect(second.size).to.equal(12);
    expect(all(second, '', 'duration:desc')).to.deep.equal(before);
    expect(second.get(makeRecord(5).result_id)).to.deep.equal(makeRecord(5));
    expect(second.meanDuration(TESTS[1]!)).to.equal(first.meanDuration(TESTS[1]!));
  });

  it('re-adding a result replaces it, also after a restart', async () => {
    const s = await filled(3);
    const changed = makeRecord(1, { result: 'error', failure_reason: 'RuntimeError: retried' });
    await s.add(changed);
    expect(s.size).to.equal(3);
    expect(s.get(changed.result_id)).to.deep.equal(changed);
    await s.close();
    expect((await store()).get(changed.result_id)).to.deep.equal(changed);
  });

  it('index.jsonl deleted: open() rebuilds it from the result folders with the same answers', async () => {
    const first = await filled(15);
    await first.createRunDir(makeRecord(15).result_id); // unfinished: no result.json
    const before = { asc: all(first), fails: all(first, 'result:fail testcase:tests/menu.py::test_open_menu') };
    await first.close();
    await unlink(join(dir, 'index.jsonl'));
    const rebuilt = await store();
    expect({ asc: all(rebuilt), fails: all(rebuilt, 'result:fail testcase:tests/menu.py::test_open_menu') }).to.deep.equal(before);
    expect(rebuilt.get(makeRecord(7).result_id)).to.deep.equal(makeRecord(7));
    // ... and wrote a new index, so the next start does not scan again.
    expect((await readFile(join(dir, 'index.jsonl'), 'utf8')).trim().split('\n')).to.have.length(15);
  });

  it('a torn last line (crash mid-append) is skipped, the run recovered from its folder, and later appends stay intact', async () => {
    const first = await filled(5);
    await first.close();
    const lost = makeRecord(5);
    await mkdir(first.dirOf(lost.result_id), { recursive: true });
    await writeFile(join(first.dirOf(lost.result_id), 'result.json'), JSON.stringify(lost));
    const line = JSON.stringify(lost);
    await appendFile(join(dir, 'index.jsonl'), line.slice(0, line.length - 40));
    const warnings: string[] = [];
    const logger = { debug() {}, info() {}, error() {}, warn: (_o: object | string, m?: string) => void warnings.push(m ?? ''), child: () => logger };
    const second = await store({ logger });
    expect(warnings.join('\n')).to.match(/torn/);
    expect(second.get(lost.result_id)).to.deep.equal(lost);
    await second.add(makeRecord(6));
    await second.close();
    const third = await store();
    expect(all(third)).to.deep.equal([...Array(7).keys()].map((i) => makeRecord(i).result_id));
    for (const l of (await readFile(join(dir, 'index.jsonl'), 'utf8')).trim().split('\n')) expect(() => JSON.parse(l)).to.not.throw();
  });

  it('a torn line that names no run is dropped and open() still succeeds', async () => {
    const first = await filled(2);
    await first.close();
    await appendFile(join(dir, 'index.jsonl'), '{"resu');
    const second = await store();
    expect(second.size).to.equal(2);
  });

  it('retention by count deletes the oldest; spec: their ids answer 410 (get says deleted), also after a restart', async () => {
    const s = await filled(8, { retention: { max_results: 5, min_free_mb: 0 } });
    const oldest = [0, 1, 2].map((i) => makeRecord(i).result_id);
    expect(await s.enforceRetention()).to.deep.equal(oldest);
    expect(s.size).to.equal(5);
    for (const id of oldest) {
      expect(s.get(id)).to.equal('deleted');
      await expectFarmError(() => s.artifacts(id), 'gone');
      expect(await s.openArtifact(id, 'stdout.log')).to.equal(undefined);
      await expectMissing(s.dirOf(id));
    }
    expect(await s.enforceRetention()).to.deep.equal([]);
    await s.close();
    const again = await store({ retention: { max_results: 5, min_free_mb: 0 } });
    for (const id of oldest) expect(again.get(id)).to.equal('deleted');
    expect(again.get(makeRecord(3).result_id)).to.deep.equal(makeRecord(3));
    expect(all(again)).to.deep.equal([3, 4, 5, 6, 7].map((i) => makeRecord(i).result_id));
  });

  it('deleted ids survive compaction of the index and a restart after it', async () => {
    const s = await filled(30, { retention: { max_results: 4, min_free_mb: 0 }, compactAfter: 5 });
    expect(await s.enforceRetention()).to.have.length(26);
    const indexLines = (await readFile(join(dir, 'index.jsonl'), 'utf8')).trim().split('\n');
    expect(indexLines).to.have.length(4); // compacted: live records only
    const spans = (await readFile(join(dir, 'deleted.jsonl'), 'utf8')).trim().split('\n').map((l) => JSON.parse(l));
    expect(spans[0]).to.deep.equal({ job: `/${NODE}/ab12/1`, from: '2026-11-20_10.00.00', to: '2026-11-20_10.03.00' });
    expect(spans).to.have.length(7); // jobs 1-7 (runs 0-25; run 25 opens job 7)
    await s.close();
    const again = await store({ compactAfter: 5 });
    for (let i = 0; i < 26; i++) expect(again.get(makeRecord(i).result_id), `run ${i}`).to.equal('deleted');
    expect(again.get(`/${NODE}/ab12/1/2026-11-20_09.59.00`)).to.equal(undefined);
    expect(again.size).to.equal(4);
  });

  it('a rebuild keeps compacted deletions deleted and removes a folder a crash left behind', async () => {
    const s = await filled(6, { retention: { max_results: 3, min_free_mb: 0 }, compactAfter: 1 });
    await s.enforceRetention();
    await s.close();
    const orphan = makeRecord(1);
    await mkdir(s.dirOf(orphan.result_id), { recursive: true });
    await writeFile(join(s.dirOf(orphan.result_id), 'result.json'), JSON.stringify(orphan));
    await unlink(join(dir, 'index.jsonl'));
    const rebuilt = await store();
    expect(rebuilt.get(orphan.result_id)).to.equal('deleted');
    expect(all(rebuilt)).to.deep.equal([3, 4, 5].map((i) => makeRecord(i).result_id));
    await expectMissing(rebuilt.dirOf(orphan.result_id));
  });

  it('retention frees disk space: deletes the oldest results while free space is under min_free_mb', async () => {
    const MiB = 2 ** 20;
    // Free space follows the count: each deleted result gives back 1 MiB, from 100 MiB free.
    const s: FileResultRepository = await filled(10, {
      retention: { max_results: 1000, min_free_mb: 103 },
      diskFree: async () => (100 + 10 - s.size) * MiB,
    });
    expect(await s.enforceRetention()).to.deep.equal([0, 1, 2].map((i) => makeRecord(i).result_id));
    expect(s.size).to.equal(7);
    expect(s.get(makeRecord(2).result_id)).to.equal('deleted');
    expect(await s.enforceRetention()).to.deep.equal([]);
  });

  it('retention stops when no results are left, even if space never recovers', async () => {
    const s = await filled(6, { retention: { max_results: 1000, min_free_mb: 1 }, diskFree: async () => 0 });
    expect(await s.enforceRetention()).to.have.length(6);
    expect(s.size).to.equal(0);
  });

  it('ids with bad segments are refused before anything touches the disk', async () => {
    // dir is a plain file here: any fs call on a path under it would fail with ENOTDIR, not a FarmError.
    await writeFile(dir, 'not a folder');
    const s = new FileResultRepository({ dir, retention: { max_results: 10, min_free_mb: 0 } });
    const bad = [
      '', '/', '../../etc/passwd', `/${NODE}/ab12/1/..`, `/${NODE}/ab12/../2026-11-20_10.00.00`,
      `/${NODE}/../1/2026-11-20_10.00.00`, `/../ab12/1/2026-11-20_10.00.00`, `/${NODE}/AB12/1/2026-11-20_10.00.00`,
      `/${NODE}/ab12/01/2026-11-20_10.00.00`, `/${NODE}/ab12/1/2026-13-01_10.00.00`, `/${NODE}/ab12/1/2026-02-30_10.00.00`,
      `/${NODE}/ab12/1/2026-11-20_10.00.00/x`, `/${NODE}/ab12/1/2026-11-20_10.00.00\0`, `/${NODE}\\..\\ab12/1/2026-11-20_10.00.00`,
      `//ab12/1/2026-11-20_10.00.00`, `/.${NODE}/ab12/1/2026-11-20_10.00.00`, `/${NODE}/ab12/1/2026-11-20 10.00.00`,
    ];
    for (const id of bad) {
      expect(s.get(id), JSON.stringify(id)).to.equal(undefined);
      expect(await s.openArtifact(id, 'stdout.log')).to.equal(undefined);
      expect(() => s.dirOf(id), JSON.stringify(id)).to.throw(FarmError).with.property('code', 'not_found');
      await expectFarmError(() => s.artifacts(id), 'not_found');
      await expectFarmError(() => s.createRunDir(id), 'invalid_request');
      await expectFarmError(() => s.add(makeRecord(0, { result_id: id })), 'invalid_request');
    }
  });

  it('add refuses a record whose result_id and job_uid disagree, or that is malformed', async () => {
    const s = await store();
    await expectFarmError(() => s.add(makeRecord(0, { job_uid: `/${NODE}/ab12/2` })), 'invalid_request');
    await expectFarmError(() => s.add(makeRecord(0, { result: 'flaky' as 'pass' })), 'invalid_request');
    await expectFarmError(() => s.add(makeRecord(0, { start_time: 'yesterday' })), 'invalid_request');
    expect(s.size).to.equal(0);
  });

  it('open() keeps a record as add() would: fields a record does not have are dropped, strings shared, the record frozen', async () => {
    await mkdir(dir, { recursive: true });
    const extra = { ...makeRecord(0), from_the_future: 'x' };
    await writeFile(join(dir, 'index.jsonl'), [JSON.stringify(extra), JSON.stringify(makeRecord(1)), JSON.stringify(makeRecord(2))].join('\n') + '\n');
    const s = await store();
    const got = s.get(makeRecord(0).result_id) as ResultRecord;
    expect(got).to.deep.equal(makeRecord(0));
    expect(s.get(makeRecord(1).result_id)).to.deep.equal(makeRecord(1));
    expect(Object.isFrozen(s.get(makeRecord(2).result_id))).to.equal(true);
  });

  it('concurrent adds are written one at a time and all survive a restart', async () => {
    const s = await store();
    await Promise.all([...Array(25).keys()].map((i) => s.add(makeRecord(i))));
    await s.close();
    expect((await store()).size).to.equal(25);
  });

  describe('what a crash leaves half-done', () => {
    const folder = (i: number) => join(dir, 'ab12', String(Math.floor(i / 4) + 1), makeRecord(i).result_id.split('/').pop()!);

    const anHourAgo = () => new Date(Date.now() - 3600_000);

    it('temporary files (hidden, ending .tmp) are never listed nor served; the sweep after start deletes the old ones from listed results', async () => {
      const s = await filled(1);
      const id = makeRecord(0).result_id;
      await writeFile(join(folder(0), 'shot.png'), 'png');
      for (const t of ['.video.mp4.a1b2c3.tmp', '.result.json.123.abcd0123.tmp']) {
        await writeFile(join(folder(0), t), 'half');
        await utimes(join(folder(0), t), anHourAgo(), anHourAgo());
      }
      expect(Object.keys(await s.artifacts(id))).to.deep.equal(['shot.png']);
      expect(await s.openArtifact(id, '.video.mp4.a1b2c3.tmp')).to.equal(undefined);
      await s.close();
      const t = await store();
      const before = Date.now() - 60_000;
      // One written since `before` (the daemon's start) is in use: it stays.
      await writeFile(join(folder(0), '.thumbnail.jpg.99.0123abcd.tmp'), 'being written');
      const report = await t.sweep({ nodeId: NODE, before });
      expect(report.temps).to.equal(2);
      await expectMissing(join(folder(0), '.video.mp4.a1b2c3.tmp'));
      expect(await readdir(folder(0))).to.include('.thumbnail.jpg.99.0123abcd.tmp').and.include('shot.png');
    });

    it('tidy (before runs start) indexes only the in-flight runs; the sweep after start does the rest: a tombstoned folder and a never-recorded folder go, the run in flight stays, a result.json without its index line is listed again', async () => {
      const s = await filled(3);
      await s.close();
      // Retention tombstoned run 0 but was killed before removing its folder.
      await appendFile(join(dir, 'index.jsonl'), JSON.stringify({ deleted: makeRecord(0).result_id }) + '\n');
      // Runs 3 and 6: killed between result.json and its index line (6 still named in flight by its job).
      // Run 4: killed at folder creation. Run 5: in flight.
      for (const i of [3, 6]) {
        await mkdir(folder(i), { recursive: true });
        await writeFile(join(folder(i), 'result.json'), JSON.stringify(makeRecord(i)));
      }
      await mkdir(folder(4), { recursive: true });
      await mkdir(folder(5), { recursive: true });
      const t = await store();
      const keep = [makeRecord(5).result_id, makeRecord(6).result_id];
      expect(await t.tidy({ nodeId: NODE, keep })).to.deep.equal({ orphans: 0, unrecorded: 0, reindexed: 1, temps: 0 });
      // Start-up reads only the in-flight folders: the rest is still there for the sweep.
      expect(all(t)).to.deep.equal([1, 2, 6].map((i) => makeRecord(i).result_id));
      for (const i of [0, 3, 4]) expect((await stat(folder(i))).isDirectory()).to.equal(true);
      // A run this process starts meanwhile (its folder made, not yet recorded) is not a crash's leftover.
      await t.createRunDir(makeRecord(7).result_id);
      const report = await t.sweep({ nodeId: NODE, keep, before: Date.now() });
      expect(report).to.deep.equal({ orphans: 1, unrecorded: 1, reindexed: 1, temps: 0 });
      await expectMissing(folder(0));
      await expectMissing(folder(4));
      for (const i of [5, 7]) expect((await stat(folder(i))).isDirectory()).to.equal(true);
      expect(all(t)).to.deep.equal([1, 2, 3, 6].map((i) => makeRecord(i).result_id));
      await t.close();
      expect(all(await store())).to.deep.equal([1, 2, 3, 6].map((i) => makeRecord(i).result_id));
    });

    it('retention moves a folder into results/.trash before deleting it; a trash left by a crash is emptied at open', async () => {
      const s = await filled(3, { retention: { max_results: 2, min_free_mb: 0 } });
      expect(await s.enforceRetention()).to.deep.equal([makeRecord(0).result_id]);
      await expectMissing(folder(0));
      expect(await readdir(join(dir, '.trash'))).to.deep.equal([]);
      await s.close();
      // A kill while a doomed folder was being deleted: it is in the trash, half-empty.
      await mkdir(join(dir, '.trash', 'ab12-1-2026-11-20_10.00.00-0badf00d', 'many'), { recursive: true });
      await writeFile(join(dir, '.trash', 'ab12-1-2026-11-20_10.00.00-0badf00d', 'many', 'x.txt'), 'x');
      const t = await store();
      await t.close(); // waits for the background emptying
      expect(await readdir(join(dir, '.trash'))).to.deep.equal([]);
    });

    it('sealInterrupted writes the metadata files and logs a run lacks, keeping what is there', async () => {
      const s = await store();
      const id = makeRecord(0).result_id;
      await s.createRunDir(id);
      await writeFile(join(folder(0), 'stdout.log'), 'the test printed this\n');
      const written = await s.sealInterrupted(id, { test_case: 'tests/t.py::test_a', test_pack_sha: 'a'.repeat(40), duration: 2.5, failure_reason: 'DaemonRestarted: x' });
      expect(written).to.not.include('stdout.log');
      expect(written).to.include.members(['test-name', 'test-args', 'git-commit', 'duration', 'exit-status', 'failure-reason', 'stderr.log', 'combined.log', 'farmhand.log']);
      expect(await readFile(join(folder(0), 'stdout.log'), 'utf8')).to.equal('the test printed this\n');
      expect(await readFile(join(folder(0), 'duration'), 'utf8')).to.equal('2.500\n');
    });
  });
});

async function expectFarmError(fn: () => Promise<unknown>, code: string): Promise<void> {
  try {
    await fn();
  } catch (e) {
    expect(e).to.be.instanceOf(FarmError);
    expect((e as FarmError).code).to.equal(code);
    return;
  }
  throw new Error(`expected FarmError ${code}`);
}

async function expectMissing(path: string): Promise<void> {
  try {
    await stat(path);
  } catch (e) {
    expect((e as NodeJS.ErrnoException).code).to.equal('ENOENT');
    return;
  }
  throw new Error(`${path} still exists`);
}
