/**
 * HeldRunDir (src/storage/runDir.ts): a result folder the test replaced is put
 * back before farmhand writes into it by name, and nothing outside the store
 * is written, followed or deleted, whatever took its name or a name above it.
 */
import { expect } from 'chai';
import { link, mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { HeldRunDir } from '../../src/storage/runDir.js';
import { FileResultRepository } from '../../src/storage/results/index.js';

describe('HeldRunDir: a replaced result folder is put back', () => {
  let tmp: string;
  let store: string;
  let outside: string;
  let dir: string;

  beforeEach(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'farmhand-rundir-'));
    store = path.join(tmp, 'results');
    outside = path.join(tmp, 'outside');
    dir = path.join(store, 'abcd', '1', '2026-11-26_01.02.03');
    await mkdir(dir, { recursive: true });
    await mkdir(outside);
    await writeFile(path.join(outside, 'keep.txt'), 'outside');
    await writeFile(path.join(dir, 'mine.txt'), 'mine');
  });
  afterEach(async () => {
    await rm(tmp, { recursive: true, force: true });
  });

  const outsideUntouched = async () => {
    expect(await readdir(outside)).to.deep.equal(['keep.txt']);
    expect(await readFile(path.join(outside, 'keep.txt'), 'utf8')).to.equal('outside');
  };

  it('left alone: nothing to put right', async () => {
    const held = await HeldRunDir.hold(dir);
    expect(await held.reclaim()).to.equal(undefined);
  });

  it('the folder renamed away and a symlink to outside in its place: the link goes, the folder comes back', async () => {
    const held = await HeldRunDir.hold(dir);
    await rename(dir, `${dir}.moved`);
    await symlink(outside, dir);
    expect(await held.reclaim()).to.match(/was a symlink/);
    expect(await readFile(path.join(dir, 'mine.txt'), 'utf8')).to.equal('mine');
    expect(await readdir(path.dirname(dir))).to.deep.equal([path.basename(dir)]);
    await outsideUntouched();
  });

  it('the job folder above swapped for a symlink to a look-alike outside: a real one again, the run folder back in it', async () => {
    const held = await HeldRunDir.hold(dir);
    const job = path.dirname(dir);
    await rename(job, path.join(store, 'abcd', 'away'));
    await mkdir(path.join(outside, 'fake', path.basename(dir)), { recursive: true });
    await symlink(path.join(outside, 'fake'), job);
    expect(await held.reclaim()).to.match(/abcd\/1 was a symlink/);
    expect(await readFile(path.join(dir, 'mine.txt'), 'utf8')).to.equal('mine');
    expect(await readdir(path.join(outside, 'fake', path.basename(dir)))).to.deep.equal([]);
    await rm(path.join(outside, 'fake'), { recursive: true });
    await outsideUntouched();
  });

  it('another folder in its place, holding the original: the original comes back, the other folder goes', async () => {
    const held = await HeldRunDir.hold(dir);
    await rename(dir, `${dir}.x`);
    await mkdir(dir);
    await writeFile(path.join(dir, 'planted.txt'), 'x');
    await rename(`${dir}.x`, path.join(dir, 'inner'));
    expect(await held.reclaim()).to.match(/was another folder/);
    expect(await readdir(dir)).to.deep.equal(['mine.txt']);
  });

  it('the folder deleted: a new empty one', async () => {
    const held = await HeldRunDir.hold(dir);
    await rm(dir, { recursive: true });
    expect(await held.reclaim()).to.match(/was missing; the folder itself was deleted/);
    expect(await readdir(dir)).to.deep.equal([]);
  });

  it('the store`s root replaced: refuses, touching nothing', async () => {
    const held = await HeldRunDir.hold(dir);
    await rename(store, `${store}.away`);
    await symlink(outside, store);
    let err: Error | undefined;
    await held.reclaim().catch((e: Error) => (err = e));
    expect(err?.message).to.match(/no longer resolves/);
    await outsideUntouched();
  });
});

describe('the results store never writes or deletes through a folder a test swapped for a symlink', () => {
  let tmp: string;
  let outside: string;
  let store: FileResultRepository;
  const id = '/farmhand-test/ab12/1/2026-11-20_10.00.00';
  const folder = (root: string) => path.join(root, 'ab12', '1', '2026-11-20_10.00.00');

  beforeEach(async () => {
    tmp = await mkdtemp(path.join(os.tmpdir(), 'farmhand-store-'));
    outside = path.join(tmp, 'outside');
    await mkdir(path.join(outside, '1', '2026-11-20_10.00.00'), { recursive: true });
    await writeFile(path.join(outside, '1', '2026-11-20_10.00.00', 'keep.txt'), 'outside');
    store = new FileResultRepository({ dir: path.join(tmp, 'results'), retention: { max_results: 0, min_free_mb: 0 } });
    await store.open();
  });
  afterEach(async () => {
    await store.close();
    await rm(tmp, { recursive: true, force: true });
  });

  const outsideUntouched = async () => {
    expect(await readdir(path.join(outside, '1', '2026-11-20_10.00.00'))).to.deep.equal(['keep.txt']);
  };

  it('sealing a run a crash cut short, whose job folder the test had made a symlink to outside', async () => {
    await store.createRunDir(id);
    const job = path.dirname(folder(path.join(tmp, 'results')));
    await rm(job, { recursive: true });
    await symlink(path.join(outside, '1'), job); // hex/1 -> outside/1, which has a look-alike run folder
    const written = await store.sealInterrupted(id, { test_case: 'tests/t.py::test_a', test_pack_sha: 'a'.repeat(40), duration: 1, failure_reason: 'DaemonRestarted: x' });
    expect(written).to.include('farmhand.log');
    await outsideUntouched();
    expect(await readdir(folder(path.join(tmp, 'results')))).to.include('farmhand.log');
  });

  it('a hard-linked log of an interrupted run is not appended to', async () => {
    await store.createRunDir(id);
    const canary = path.join(outside, 'canary.log');
    await writeFile(canary, 'outside\n');
    await link(canary, path.join(folder(path.join(tmp, 'results')), 'farmhand.log'));
    await store.sealInterrupted(id, { test_case: 'tests/t.py::test_a', test_pack_sha: 'a'.repeat(40), duration: 1, failure_reason: 'DaemonRestarted: x' });
    expect(await readFile(canary, 'utf8')).to.equal('outside\n');
  });

  it('retention deleting a result whose job folder is a symlink to outside deletes nothing there', async () => {
    await store.createRunDir(id);
    await store.add({
      result_id: id, job_uid: '/farmhand-test/ab12/1', test_case: 't', test_pack_sha: 'a'.repeat(40), test_pack_branch: null, category: 'default', username: 'ci', tags: {},
      start_time: '2026-11-20T10:00:00.000Z', end_time: '2026-11-20T10:00:01.000Z', duration: 1, result: 'pass', failure_reason: null, traceback: null,
    });
    const job = path.dirname(folder(path.join(tmp, 'results')));
    await rm(job, { recursive: true });
    await symlink(path.join(outside, '1'), job);
    expect(await store.enforceRetention()).to.deep.equal([id]);
    await outsideUntouched();
  });
});
