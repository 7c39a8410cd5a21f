/**
 * JobService.recover and the node stream (docs/farm.md, "The node stream"): a run recorded before a crash whose
 * job file still names it (killed between the run's record and the job's save, so before its run.finished, which
 * is published after that save) has its run.finished published at recovery, before the job's job.exited: the
 * portal, which learns of runs only from the stream, gets it.
 */
import { expect } from 'chai';
import { JobService, type JobServiceDeps } from '../../src/core/jobs.js';
import type { JobRecord } from '../../src/core/model.js';
import { silentLogger } from '../../src/logger.js';
import { jobRecord, resultRecord } from '../fixtures/records.js';

describe('JobService.recover publishes the run.finished a crash cut off', () => {
  it('a run recorded whose job file still names it: run.finished (once), then job.exited', async () => {
    const rec = resultRecord({ result: 'fail' });
    const job: JobRecord = {
      ...jobRecord({ job_uid: rec.job_uid, status: 'running', end_time: null }),
      current_run: { result_id: rec.result_id, test_case: rec.test_case, start_time: rec.start_time, pid: null },
    };
    const published: { type: string; data: { result_id?: string } }[] = [];
    const service = new JobService({
      nodeId: 'node-1',
      installationHex: '4f2a',
      jobs: { running: () => [job], save: () => Promise.resolve() },
      results: { tidy: () => Promise.resolve(), get: (id: string) => (id === rec.result_id ? rec : undefined) },
      events: { publish: (type: string, data: { result_id?: string }) => published.push({ type, data }) },
      logger: silentLogger,
    } as unknown as JobServiceDeps);
    await service.recover();
    expect(published.map((e) => [e.type, e.data.result_id ?? null])).to.deep.equal([
      ['run.finished', rec.result_id],
      ['job.exited', null],
    ]);
    expect(job.status).to.equal('exited');
  });
});
