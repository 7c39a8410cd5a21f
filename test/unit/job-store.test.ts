// FileJobRepository owns its writes: saves of a job land in order, and flush/close/shutdown wait for them.
import { expect } from 'chai';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { JobService, type JobServiceDeps } from '../../src/core/jobs.js';
import type { JobRecord } from '../../src/core/model.js';
import { silentLogger } from '../../src/logger.js';
import { capturingLogger } from '../helpers/logger.js';
import { writeFileAtomic } from '../../src/storage/atomic.js';
import { FileJobRepository, KEY_LOOKBACK } from '../../src/storage/jobStore.js';
import { StateStore } from '../../src/storage/state.js';
import { jobRecord } from '../fixtures/records.js';

const NODE = 'farmhand-test';

/** A write that waits for its own gate; `waiting` resolves once it is called. */
interface Gate {
  open(): void;
  called: Promise<void>;
}

/** Writes that hold, one gate per call in call order, until the test opens them (in any order). */
function gatedWriter() {
  const gates: Gate[] = [];
  const pending: Array<{ opened: Promise<void>; called: () => void }> = [];
  const make = () => {
    let open!: () => void;
    let called!: () => void;
    const opened = new Promise<void>((r) => (open = r));
    const calledP = new Promise<void>((r) => (called = r));
    gates.push({ open, called: calledP });
    pending.push({ opened, called });
  };
  for (let i = 0; i < 8; i++) make();
  let calls = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  const write = async (file: string, text: string) => {
    const g = pending[calls++]!;
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    g.called();
    try {
      await g.opened;
      await writeFileAtomic(file, text);
    } finally {
      inFlight--;
    }
  };
  return { gates, write, calls: () => calls, maxInFlight: () => maxInFlight };
}

describe('FileJobRepository: the store owns its writes', () => {
  let dataDir: string;
  let state: StateStore;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'farmhand-jobstore-'));
    state = await StateStore.open(dataDir);
  });
  afterEach(async () => {
    await state.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const job = (status: JobRecord['status'], pid: number | null): JobRecord =>
    jobRecord({
      job_uid: `/${NODE}/${state.data.installation_hex}/1`,
      number: 1,
      status,
      end_time: status === 'exited' ? '2030-06-15T11:05:00.000Z' : null,
      current_run: status === 'running' ? { result_id: `/${NODE}/x/1/2030-06-15_11.00.00`, test_case: 'tests/a.py::test_a', start_time: '2030-06-15T11:00:00.000Z', pid } : null,
    });
  const onDisk = async () => JSON.parse(await readFile(join(dataDir, 'jobs', '1.json'), 'utf8')) as JobRecord;

  it('two saves whose writes finish out of order never leave the older state on disk', async () => {
    const w = gatedWriter();
    const repo = new FileJobRepository(dataDir, state, NODE, { write: w.write });
    const first = repo.save(job('running', 1234));
    await w.gates[0]!.called;
    const second = repo.save(job('exited', null));
    // Were both writes under way at once, either rename could land last: they must run one after the other.
    w.gates[1]!.open();
    w.gates[0]!.open();
    await Promise.all([first, second]);
    expect(w.maxInFlight(), 'writes of one job file at the same time').to.equal(1);
    expect((await onDisk()).status).to.equal('exited');
    expect(repo.latest()?.status).to.equal('exited');
  });

  it('saves queued behind a write collapse into one write of the newest state', async () => {
    const w = gatedWriter();
    const repo = new FileJobRepository(dataDir, state, NODE, { write: w.write });
    const saves = [repo.save(job('running', null))];
    await w.gates[0]!.called;
    for (let pid = 1; pid <= 5; pid++) saves.push(repo.save(job('running', pid)));
    saves.push(repo.save(job('exited', null)));
    for (const g of w.gates) g.open();
    await Promise.all(saves);
    expect(w.calls()).to.equal(2);
    expect((await onDisk()).status).to.equal('exited');
  });

  it('flush and close resolve only once the save has landed; a save after close is refused', async () => {
    const w = gatedWriter();
    const repo = new FileJobRepository(dataDir, state, NODE, { write: w.write });
    void repo.save(job('exited', null));
    await w.gates[0]!.called;
    let closed = false;
    const closing = repo.close().then(() => (closed = true));
    await new Promise((r) => setImmediate(r));
    expect(closed, 'close resolved before the save landed').to.equal(false);
    w.gates[0]!.open();
    await closing;
    expect((await onDisk()).status).to.equal('exited');
    let refused: unknown;
    await repo.save(job('running', 1)).catch((e: unknown) => (refused = e));
    expect(refused).to.be.instanceOf(Error);
    expect((await onDisk()).status).to.equal('exited');
  });

  it('JobService.shutdown does not resolve before the last save of an ended job has landed', async () => {
    const w = gatedWriter();
    const repo = new FileJobRepository(dataDir, state, NODE, { write: w.write });
    const service = new JobService({ nodeId: NODE, installationHex: state.data.installation_hex, jobs: repo, logger: silentLogger } as unknown as JobServiceDeps);
    // The job ended (HTTP already answers exited from memory) while its save is still on its way to disk.
    void repo.save(job('exited', null));
    await w.gates[0]!.called;
    let done = false;
    const shutdown = service.shutdown().then(() => (done = true));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(done, 'shutdown resolved before the save landed').to.equal(false);
    w.gates[0]!.open();
    await shutdown;
    expect((await onDisk()).status).to.equal('exited');
  });

  it('JobService.shutdown with a bound: a job whose run never ends does not hold the stop; the error names where it is stuck', async () => {
    const repo = new FileJobRepository(dataDir, state, NODE);
    const log = capturingLogger();
    let runStarted!: () => void;
    const started = new Promise<void>((r) => (runStarted = r));
    const sha = 'a'.repeat(40);
    const service = new JobService({
      nodeId: NODE,
      installationHex: state.data.installation_hex,
      jobs: repo,
      logger: log,
      settings: { defaultTimeoutSecs: 60, stopResponseSecs: 1 },
      testPack: {
        resolve: () => Promise.resolve({ sha, branch: 'main' }),
        testCaseNames: () => Promise.resolve(['tests/a.py::test_a']),
        config: () => Promise.resolve({}),
        remoteControls: () => Promise.resolve([]),
        checkout: () => Promise.resolve(dataDir),
      },
      results: { meanDuration: () => undefined, createRunDir: () => Promise.resolve(dataDir) },
      frames: {},
      // A run that ignores the stop and never ends (a test process the kernel does not let go of, say).
      runner: {
        run: () => {
          runStarted();
          return new Promise(() => undefined);
        },
      },
    } as unknown as JobServiceDeps);
    await service.runTests({ test_pack_revision: 'main', test_cases: ['tests/a.py::test_a'], category: 'default', soak: 'run once', shuffle: false, remote_control: null, tags: {} }, 'alice');
    await started;
    expect(await service.shutdown(50)).to.equal(false);
    const line = log.entries.find((l) => l.msg.startsWith('the job did not end after the stop'));
    expect(line, log.text()).to.not.equal(undefined);
    expect(line!.level).to.equal('error');
    expect(line!.obj).to.include({ stuck_at: 'running the test' });
  });
});

describe('FileJobRepository: Idempotency-Key lookup (findByKey)', () => {
  let dataDir: string;
  let state: StateStore;

  beforeEach(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'farmhand-jobkeys-'));
    state = await StateStore.open(dataDir);
  });
  afterEach(async () => {
    await state.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const save = async (repo: FileJobRepository, username: string, key?: string): Promise<JobRecord> => {
    const number = await repo.nextNumber();
    const job = jobRecord({ job_uid: `/${NODE}/${state.data.installation_hex}/${number}`, number, username, ...(key !== undefined && { idempotency_key: key }) });
    await repo.save(job);
    return job;
  };

  it('finds the job a user started with a key, after a restart too; another user\'s key, or none, is not found', async () => {
    const repo = new FileJobRepository(dataDir, state, NODE);
    expect(repo.findByKey('alice', 'k1'), 'nothing saved yet').to.equal(undefined);
    const first = await save(repo, 'alice', 'k1');
    await save(repo, 'bob', 'k2');
    await save(repo, 'alice');
    expect(repo.findByKey('alice', 'k1')?.job_uid).to.equal(first.job_uid);
    expect(repo.findByKey('bob', 'k1'), 'keys are per user').to.equal(undefined);
    // Saved after the index was built: found too.
    const later = await save(repo, 'alice', 'k3');
    expect(repo.findByKey('alice', 'k3')?.job_uid).to.equal(later.job_uid);
    const again = new FileJobRepository(dataDir, state, NODE);
    expect(again.findByKey('alice', 'k1')?.job_uid, 'read back from the job files').to.equal(first.job_uid);
    expect(again.findByKey('bob', 'k2')?.username).to.equal('bob');
  });

  it(`looks only among the last ${KEY_LOOKBACK} jobs`, async () => {
    const repo = new FileJobRepository(dataDir, state, NODE);
    const old = await save(repo, 'alice', 'old');
    expect(repo.findByKey('alice', 'old')?.job_uid).to.equal(old.job_uid);
    await state.update((s) => {
      s.last_job_number = KEY_LOOKBACK;
    });
    // Opened again on a state file that has counted KEY_LOOKBACK jobs.
    const later = new FileJobRepository(dataDir, state, NODE);
    expect(later.findByKey('alice', 'old')?.job_uid, `job 1 is still one of the last ${KEY_LOOKBACK}`).to.equal(old.job_uid);
    await save(later, 'alice');
    expect(later.findByKey('alice', 'old'), 'one job later it is past the lookback').to.equal(undefined);
    expect(new FileJobRepository(dataDir, state, NODE).findByKey('alice', 'old'), 'and after a restart').to.equal(undefined);
  });
});

describe('FileJobRepository: the job counter', () => {
  let dataDir: string;
  afterEach(() => rm(dataDir, { recursive: true, force: true }));

  it('a job file the state file did not count yet (its write on its way when the daemon stopped) is the latest job after a restart, and its number is not given again', async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'farmhand-jobcount-'));
    const state = await StateStore.open(dataDir);
    const repo = new FileJobRepository(dataDir, state, NODE);
    const hex = state.data.installation_hex;
    const saveJob = async (r: FileJobRepository) => {
      const number = await r.nextNumber();
      await r.save(jobRecord({ job_uid: `/${NODE}/${hex}/${number}`, number }));
      return number;
    };
    expect(await saveJob(repo)).to.equal(1);
    expect(await saveJob(repo)).to.equal(2);
    await state.close();
    expect(JSON.parse(await readFile(join(dataDir, 'state.json'), 'utf8')).last_job_number, 'the state file counts both once its writes land').to.equal(2);
    // The daemon stopped after job 3's file landed and before the state file's write of 3 did.
    await writeFileAtomic(join(dataDir, 'jobs', '3.json'), JSON.stringify(jobRecord({ job_uid: `/${NODE}/${hex}/3`, number: 3, status: 'running' })));
    const reopened = await StateStore.open(dataDir);
    expect(reopened.data.last_job_number).to.equal(2);
    const again = new FileJobRepository(dataDir, reopened, NODE);
    expect(again.latest()?.number, 'job 3 is the latest (the one a restart finds running)').to.equal(3);
    expect(await saveJob(again), 'job 3 is not written over').to.equal(4);
    expect(JSON.parse(await readFile(join(dataDir, 'jobs', '3.json'), 'utf8')).status).to.equal('running');
    await reopened.close();
    expect(JSON.parse(await readFile(join(dataDir, 'state.json'), 'utf8')).last_job_number).to.equal(4);
  });

  it('a job whose first save fails for want of space is refused as storage_full and is not the latest job', async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'farmhand-jobfull-'));
    const state = await StateStore.open(dataDir);
    let full = false;
    const write = async (file: string, text: string) => {
      if (full) throw Object.assign(new Error('ENOSPC: no space left on device'), { code: 'ENOSPC' });
      await writeFileAtomic(file, text);
    };
    const repo = new FileJobRepository(dataDir, state, NODE, { write });
    const hex = state.data.installation_hex;
    const first = jobRecord({ job_uid: `/${NODE}/${hex}/${await repo.nextNumber()}`, number: 1 });
    await repo.save(first);
    full = true;
    const number = await repo.nextNumber();
    const err = await repo.save(jobRecord({ job_uid: `/${NODE}/${hex}/${number}`, number, status: 'running' })).then(() => undefined, (e: unknown) => e);
    expect((err as { code?: string } | undefined)?.code).to.equal('storage_full');
    expect(repo.latest()?.job_uid).to.equal(first.job_uid);
    expect(repo.running()).to.deep.equal([]);
    await state.close();
  });
});
