// Files a test script could have replaced: FIFOs, symlinks and oversize files
// are refused at once, never waited on (a blocking open of a FIFO would tie up
// a libuv thread, or the main thread for the synchronous reads at start-up).
import { expect } from 'chai';
import { execFileSync } from 'node:child_process';
import { closeSync, writeSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { writeFileAtomic } from '../../src/storage/atomic.js';
import { rebuildJob } from '../../src/storage/recover.js';
import { scanFolders } from '../../src/storage/results/scan.js';
import { openForWriteSync, readRegular, readRegularSync, restoreName } from '../../src/storage/safeFile.js';

const mkfifo = (p: string) => execFileSync('mkfifo', [p]);
const codeOf = async (p: Promise<unknown>) => p.then(() => 'ok', (e: NodeJS.ErrnoException) => e.code);
const codeOfSync = (f: () => unknown) => {
  try {
    f();
    return 'ok';
  } catch (e) {
    return (e as NodeJS.ErrnoException).code;
  }
};

describe('storage: safe opens of files a test could have replaced', () => {
  let dir: string;
  beforeEach(async () => (dir = await mkdtemp(path.join(tmpdir(), 'farmhand-safe-'))));
  afterEach(() => rm(dir, { recursive: true, force: true }));

  it('readRegular / readRegularSync: the text of a regular file; ENOTREG for a FIFO, ELOOP for a symlink, EFBIG past the cap', async () => {
    const file = path.join(dir, 'f');
    await writeFile(file, 'hello');
    expect(await readRegular(file, 100)).to.equal('hello');
    expect(readRegularSync(file, 100)).to.equal('hello');
    mkfifo(path.join(dir, 'fifo'));
    expect(await codeOf(readRegular(path.join(dir, 'fifo'), 100))).to.equal('ENOTREG');
    expect(codeOfSync(() => readRegularSync(path.join(dir, 'fifo'), 100))).to.equal('ENOTREG');
    await symlink(file, path.join(dir, 'link'));
    expect(await codeOf(readRegular(path.join(dir, 'link'), 100))).to.equal('ELOOP');
    expect(codeOfSync(() => readRegularSync(path.join(dir, 'link'), 100))).to.equal('ELOOP');
    expect(await codeOf(readRegular(file, 4))).to.equal('EFBIG');
    expect(codeOfSync(() => readRegularSync(file, 4))).to.equal('EFBIG');
  });

  it('writeFileAtomic replaces a FIFO or a symlink under the name without opening it', async () => {
    mkfifo(path.join(dir, 'duration'));
    await writeFileAtomic(path.join(dir, 'duration'), '1.000\n');
    expect(await readFile(path.join(dir, 'duration'), 'utf8')).to.equal('1.000\n');
    await writeFile(path.join(dir, 'target'), 'untouched');
    await symlink(path.join(dir, 'target'), path.join(dir, 'exit-status'));
    await writeFileAtomic(path.join(dir, 'exit-status'), '0\n');
    expect(await readFile(path.join(dir, 'exit-status'), 'utf8')).to.equal('0\n');
    expect(await readFile(path.join(dir, 'target'), 'utf8')).to.equal('untouched');
  });

  it('openForWriteSync refuses a FIFO (opened without a wait, then ENOTREG) and a symlink; restoreName puts a replaced file back', async () => {
    mkfifo(path.join(dir, 'stdout.log'));
    expect(codeOfSync(() => openForWriteSync(path.join(dir, 'stdout.log')))).to.equal('ENOTREG');
    await symlink('/etc/hostname', path.join(dir, 'stderr.log'));
    expect(codeOfSync(() => openForWriteSync(path.join(dir, 'stderr.log')))).to.equal('ELOOP');
    const log = path.join(dir, 'farmhand.log');
    const fd = openForWriteSync(log);
    writeSync(fd, 'what farmhand wrote\n');
    expect(await restoreName(fd, log)).to.equal(false); // still ours
    await unlink(log);
    mkfifo(log);
    expect(await restoreName(fd, log)).to.equal(true);
    closeSync(fd);
    expect(await readFile(log, 'utf8')).to.equal('what farmhand wrote\n');
  });

  it('start-up recovery and the index rebuild read no FIFO: a run folder with FIFOs is the run in flight, or not a result', async () => {
    const jobDir = path.join(dir, 'results', 'ab12', '3');
    const runDir = path.join(jobDir, '2026-11-23_09.19.15');
    await mkdir(runDir, { recursive: true });
    mkfifo(path.join(runDir, 'result.json'));
    mkfifo(path.join(runDir, 'test-name'));
    const rebuilt = rebuildJob(dir, 'node', 'ab12', 3);
    expect(rebuilt.inFlight).to.equal('2026-11-23_09.19.15');
    expect(rebuilt.job.status).to.equal('running');
    const seen: unknown[] = [];
    const report = await scanFolders(path.join(dir, 'results'), (r) => void seen.push(r));
    expect(seen).to.deep.equal([]);
    expect(report.bad.map((b) => b.dir)).to.deep.equal(['ab12/3/2026-11-23_09.19.15']);
  });
});
