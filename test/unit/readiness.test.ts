/** The readiness checks behind /readyz, each made to fail through a real cause where one can be made. */
import { expect } from 'chai';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { describeReadiness, ReadinessChecks, type ReadinessOptions } from '../../src/service/readiness.js';

describe('readiness checks', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-ready-'));
  });
  afterEach(() => rm(dir, { recursive: true, force: true }));

  const checks = (o: Partial<ReadinessOptions> = {}) =>
    new ReadinessChecks({ capture: () => ({ online: true, reason: null }), testPackProblem: () => undefined, dataDir: dir, minFreeMb: 0, ...o });

  it('is ready when every check passes, and leaves no probe file behind', async () => {
    const r = await checks().check();
    expect(r).to.deep.include({ ready: true, failed: [] });
    expect(Object.keys(r.checks)).to.deep.equal(['capture', 'test_pack', 'data_dir', 'disk']);
    expect(await readdir(dir)).to.deep.equal([]);
    expect(describeReadiness(r)).to.equal('ready');
  });

  it('fails capture with its reason while there are no frames; passes with no capture configured', async () => {
    const r = await checks({ capture: () => ({ online: false, reason: 'stalled: no frames for 2.4 s' }) }).check();
    expect(r.failed).to.deep.equal(['capture']);
    expect(r.checks.capture.detail).to.equal('no frames: stalled: no frames for 2.4 s');
    expect((await checks({ capture: undefined }).check()).ready).to.equal(true);
  });

  it('fails test_pack without repeating git (whose message may name the URL)', async () => {
    const r = await checks({ testPackProblem: () => 'test pack unreachable, retrying: git fetch failed: https://user:secret@git.example/pack' }).check();
    expect(r.failed).to.deep.equal(['test_pack']);
    expect(JSON.stringify(r)).to.not.include('secret');
  });

  it('fails data_dir when the directory cannot be written (here: it does not exist)', async () => {
    const r = await checks({ dataDir: path.join(dir, 'gone'), diskFree: async () => 2 ** 40 }).check();
    expect(r.failed).to.deep.equal(['data_dir']);
    expect(r.checks.data_dir.detail).to.equal('not writable: ENOENT');
  });

  it('fails disk below retention.min_free_mb, with both numbers', async () => {
    const r = await checks({ minFreeMb: 1024, diskFree: async () => 512 * 2 ** 20 }).check();
    expect(r.failed).to.deep.equal(['disk']);
    expect(r.checks.disk.detail).to.equal('512 MiB free, floor 1024 MiB (retention.min_free_mb)');
    expect(describeReadiness(r)).to.equal('not ready: disk: 512 MiB free, floor 1024 MiB (retention.min_free_mb)');
  });

  it('reads the real free space by default (statfs)', async () => {
    expect((await checks({ minFreeMb: 1 }).check()).checks.disk.ok).to.equal(true);
    expect((await checks({ minFreeMb: 1e9 }).check()).failed).to.deep.equal(['disk']);
  });
});
