// Artifact listing and opening of a result folder: md5, sizes, symlinks, paths that try to leave the folder.
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, readFile, realpath, rm, stat, symlink, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { FarmError } from '../../src/core/errors.js';
import type { ResultRecord } from '../../src/core/model.js';
import { FileResultRepository } from '../../src/storage/results/index.js';

const JOB = '/farmhand-0123456789ab/ab12/3';

function record(stamp: string): ResultRecord {
  const start = `${stamp.slice(0, 10)}T${stamp.slice(11).replaceAll('.', ':')}.000Z`;
  return {
    result_id: `${JOB}/${stamp}`, job_uid: JOB, test_case: 'tests/menu.py::test_open_menu', test_pack_sha: 'a'.repeat(40),
    test_pack_branch: null, category: 'default', username: 'ci', tags: {}, start_time: start, end_time: start,
    duration: 0, result: 'pass', failure_reason: null, traceback: null,
  };
}

const md5 = (b: Buffer | string) => createHash('md5').update(b).digest('hex');

describe('FileResultRepository artifacts', () => {
  let root: string;
  let store: FileResultRepository;
  let id: string;
  let folder: string;
  let otherFolder: string;
  const files: Record<string, Buffer> = {};

  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'farmhand-artifacts-'));
    store = new FileResultRepository({ dir: join(root, 'results'), retention: { max_results: 10, min_free_mb: 0 } });
    await store.open();
    id = record('2026-11-20_10.00.00').result_id;
    const other = record('2026-11-20_10.05.00');
    folder = await store.createRunDir(id);
    otherFolder = await store.createRunDir(other.result_id);
    files['stdout.log'] = Buffer.from('line one\nline two\n');
    files['screenshot.png'] = randomBytes(70_000);
    files['empty.txt'] = Buffer.alloc(0);
    files['sub/dir/nested.txt'] = Buffer.from('deep');
    files['video.mp4'] = randomBytes(3 * 1024 * 1024 + 17); // larger than one read, so hashing streams
    for (const [rel, data] of Object.entries(files)) {
      await mkdir(join(folder, rel, '..'), { recursive: true });
      await writeFile(join(folder, rel), data);
    }
    await writeFile(join(otherFolder, 'secret.txt'), 'belongs to another run');
    await symlink('stdout.log', join(folder, 'link-to-log'));
    await symlink('/etc/passwd', join(folder, 'passwd'));
    await symlink('sub', join(folder, 'subdir-link'));
    await symlink(join(otherFolder, 'secret.txt'), join(folder, 'other-run'));
    await symlink('../..', join(folder, 'sub', 'up'));
    await symlink('missing-target', join(folder, 'dangling'));
    execFileSync('mkfifo', [join(folder, 'fifo')]);
    await store.add(record('2026-11-20_10.00.00'));
    await store.add(other);
  });

  after(async () => {
    await store.close();
    await rm(root, { recursive: true, force: true });
  });

  it('COMPAT: lists every regular file recursively as {size: <integer bytes>, md5: <hex>}; directories are not listed', async () => {
    const listing = await store.artifacts(id);
    expect(Object.keys(listing)).to.deep.equal(['empty.txt', 'link-to-log', 'screenshot.png', 'stdout.log', 'sub/dir/nested.txt', 'video.mp4']);
    for (const [rel, data] of Object.entries(files)) {
      expect(listing[rel], rel).to.deep.equal({ size: data.length, md5: md5(data) });
      expect(Number.isInteger(listing[rel]!.size)).to.equal(true);
    }
    // The symlink is listed with its target's size and content.
    expect(listing['link-to-log']).to.deep.equal({ size: files['stdout.log']!.length, md5: md5(files['stdout.log']!) });
  });

  it('never lists result.json, symlinks leaving the folder, symlinked folders, dangling links or fifos', async () => {
    const keys = Object.keys(await store.artifacts(id));
    for (const hidden of ['result.json', 'passwd', 'other-run', 'subdir-link', 'sub/up', 'dangling', 'fifo']) {
      expect(keys, hidden).to.not.include(hidden);
    }
    expect(keys.some((k) => k.startsWith('subdir-link/') || k.startsWith('sub/up/'))).to.equal(false);
  });

  it('md5 comes from the cache while size and mtime are unchanged, and is recomputed when they change', async () => {
    const path = join(folder, 'stdout.log');
    const t = 1_790_000_000; // whole seconds, so setting it again gives the very same mtimeMs
    await utimes(path, t, t);
    const first = (await store.artifacts(id))['stdout.log']!.md5;
    // Same size, same mtime, different bytes: only a cached digest stays the same.
    await writeFile(path, 'LINE ONE\nLINE TWO\n');
    await utimes(path, t, t);
    expect((await stat(path)).mtimeMs).to.equal(t * 1000);
    expect((await store.artifacts(id))['stdout.log']!.md5).to.equal(first);
    await utimes(path, t, t + 5);
    expect((await store.artifacts(id))['stdout.log']!.md5).to.equal(md5('LINE ONE\nLINE TWO\n'));
    await writeFile(path, files['stdout.log']!);
  });

  it('openArtifact serves a nested file and a symlink to a file inside the folder', async () => {
    const nested = await store.openArtifact(id, 'sub/dir/nested.txt');
    expect(nested?.path).to.equal(join(await realpath(folder), 'sub/dir/nested.txt'));
    expect(nested?.size).to.equal(4);
    expect(nested?.mtime).to.be.instanceOf(Date);
    expect(await readFile(nested!.path, 'utf8')).to.equal('deep');
    const link = await store.openArtifact(id, 'link-to-log');
    expect(link?.path).to.equal(join(await realpath(folder), 'stdout.log'));
    // Not listed (listing never enters linked folders), but what it reaches is inside the folder.
    expect((await store.openArtifact(id, 'subdir-link/dir/nested.txt'))?.size).to.equal(4);
  });

  it('openArtifact refuses ../, absolute paths, backslashes, NUL, links leaving the folder, folders and result.json', async () => {
    const refused = [
      '../../../../../../etc/passwd', '../2026-11-20_10.05.00/secret.txt', 'sub/../stdout.log', './stdout.log',
      '/etc/passwd', join(folder, 'stdout.log'), '..\\..\\etc\\passwd', 'sub\\dir\\nested.txt', 'stdout.log\0.png',
      'passwd', 'other-run', 'sub/up/2026-11-20_10.05.00/secret.txt', 'dangling', 'fifo',
      'sub', 'sub/', 'sub//dir/nested.txt', '', 'result.json', 'missing.txt',
    ];
    for (const rel of refused) expect(await store.openArtifact(id, rel), JSON.stringify(rel)).to.equal(undefined);
  });

  it('an unknown result has no artifacts: not_found', async () => {
    try {
      await store.artifacts(`${JOB}/2026-11-20_11.00.00`);
      expect.fail('expected not_found');
    } catch (e) {
      expect((e as FarmError).code).to.equal('not_found');
    }
    expect(await store.openArtifact(`${JOB}/2026-11-20_11.00.00`, 'stdout.log')).to.equal(undefined);
  });
});
