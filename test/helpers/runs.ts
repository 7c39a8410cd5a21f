/** Waiting on what a test run does, instead of sleeping until it has probably started. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import type { TestDaemon } from './daemon.js';
import { waitFor } from './wait.js';

/**
 * Resolve with the result id of the run of job `jobUid` once its stdout holds `needle` (the runner runs
 * Python unbuffered, so a `print` is there as soon as the test has reached it).
 */
export async function waitForRunOutput(d: TestDaemon, jobUid: string, needle: string, timeoutMs = 30_000): Promise<string> {
  return waitFor(
    async () => {
      const job = d.daemon.services.jobs.current();
      const run = job?.job_uid === jobUid ? job.current_run : undefined;
      if (!run) return undefined;
      const out = await readFile(path.join(d.daemon.services.results.dirOf(run.result_id), 'stdout.log'), 'utf8');
      return out.includes(needle) ? run.result_id : undefined;
    },
    { what: `the running test of ${jobUid} to print ${JSON.stringify(needle)}`, timeoutMs },
  );
}
