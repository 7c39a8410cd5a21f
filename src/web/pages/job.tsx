/**
 * The job page (`/app/jobs/<job_uid>`, docs/portal.md "Job page"): the job's
 * state and counts (as the v2 Job object gives them), the test case running
 * now with the tail of its log, its results, and Stop. The page is complete
 * when rendered; its client script (job.js) keeps it current from the event
 * stream and follows the running log with Range requests.
 *
 * The portal renders the same page for a job whose node is offline, from its
 * jobs table and the farm's index (src/farm/portal/web.ts): `sendJobPage`
 * with `offline` set, and no script (nothing of the job changes any more).
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import path from 'node:path';
import type { VNode } from 'preact';
import { isFarmError } from '../../core/errors.js';
import type { JobRecord, ResultRecord } from '../../core/model.js';
import { parseResultQuery, parseTimeZone } from '../../core/query.js';
import { signedIn } from '../../http/auth.js';
import type { Services } from '../../http/context.js';
import { jobFromParams } from '../../http/params.js';
import { presentJob } from '../../http/presenters.js';
import { sendPage, wantsPage } from '../layout.js';
import { formatTime, ResultRow } from './results.js';
import { mount } from '../../http/endpoints/mount.js';

/** How much of the running log the page shows when it is rendered (the script then follows the rest). */
export const LOG_TAIL_BYTES = 16 * 1024;

/**
 * The last bytes of the running log. The test writes in that folder and could
 * have put anything under the log's name: opened without following links or
 * blocking, and read only when it is a regular file (as resultRoutes' live log).
 */
async function liveLogTail(file: string): Promise<{ text: string; size: number }> {
  const fh = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(() => undefined);
  if (!fh) return { text: '', size: 0 };
  try {
    const st = await fh.stat();
    if (!st.isFile() || st.size === 0) return { text: '', size: 0 };
    const len = Math.min(st.size, LOG_TAIL_BYTES);
    const buf = Buffer.alloc(len);
    const { bytesRead } = await fh.read(buf, 0, len, st.size - len);
    let out = buf.subarray(0, bytesRead);
    // Drop a partial first line when the read starts mid-file.
    if (st.size > len) out = out.subarray(out.indexOf(0x0a) + 1);
    return { text: out.toString('utf8'), size: st.size - len + bytesRead };
  } finally {
    await fh.close();
  }
}

/** The fields of the job's request and state the page shows besides its Job object (a JobRecord has them all). */
export type JobPageRecord = Pick<JobRecord, 'number' | 'username' | 'category' | 'test_pack_sha' | 'test_pack_branch' | 'soak'> & {
  current_run: { result_id: string; test_case: string; start_time: string } | null;
};

export interface JobPageProps {
  /** The v2 Job object. */
  job: ReturnType<typeof presentJob>;
  record: JobPageRecord;
  /** Its finished runs, newest first. */
  results: ResultRecord[];
  log: { text: string; size: number } | undefined;
  tz: string;
  signedIn: boolean;
  /**
   * Set when the page is the portal's, rendered from its jobs table and index because the job's node is
   * offline: the node, why it is offline, and why the portal ended the job (null: the node ended it).
   * No live tail, no Stop: they need the node.
   */
  offline?: { nodeId: string; reason: string; endReason: string | null };
}

function Count({ id, label, n, cls }: { id: string; label: string; n: number; cls?: string }): VNode {
  return (
    <div class={`count ${cls ?? ''}`}>
      <dt>{label}</dt>
      <dd id={`count-${id}`}>{n}</dd>
    </div>
  );
}

/** Stop, while the job runs: the button, a link to sign in, or (the portal's copy) why it cannot be done here. */
function Actions({ running, signedIn, offline }: Pick<JobPageProps, 'signedIn' | 'offline'> & { running: boolean }): VNode | null {
  if (offline) {
    return running ? (
      <p class="job-actions node-offline">
        Stopping this job needs node <code>{offline.nodeId}</code>, which is offline.
      </p>
    ) : null;
  }
  return (
    <div class="job-actions" id="job-actions" hidden={!running}>
      {signedIn ? (
        <button type="button" id="stop-job">
          Stop
        </button>
      ) : (
        <a href="/app/sign-in" id="sign-in-to-stop">
          Sign in to stop
        </a>
      )}
      <span id="stop-status" role="status" />
    </div>
  );
}

/** The test case running now and the tail of its log (job.js follows both). */
function RunningNow({ run, running, log, tz }: Pick<JobPageProps, 'log' | 'tz'> & { run: JobPageRecord['current_run']; running: boolean }): VNode {
  return (
    <>
      <h2>Running now</h2>
      <p id="running-now">
        {run ? (
          <>
            <a href={`/app/results${run.result_id}`} id="running-test">
              {run.test_case}
            </a>{' '}
            since <time dateTime={run.start_time}>{formatTime(run.start_time, tz)}</time>
          </>
        ) : running ? (
          'Between test cases.'
        ) : (
          'Nothing: the job has ended.'
        )}
      </p>
      <pre id="log-tail" class="log-tail" aria-label="Log of the running test case" aria-live="off" tabIndex={0} hidden={!run}>
        {log?.text ?? ''}
      </pre>
    </>
  );
}

function JobPage({ job, record, results, log, tz, signedIn, offline }: JobPageProps): VNode {
  const run = offline ? null : record.current_run;
  const c = job.result_counts;
  const running = job.status === 'running';
  return (
    <section id="job" class="job-page" data-job-uid={job.job_uid} data-status={job.status} data-result-id={run?.result_id ?? ''} data-log-offset={log?.size ?? 0} data-tz={tz} data-soak={record.soak}>
      <h1>
        Job {record.number} <span class="job-uid">{job.job_uid}</span>
      </h1>
      {offline ? (
        <p class="notice offline-copy">
          Node <code>{offline.nodeId}</code> is offline ({offline.reason}): this page is the portal's copy of the job, from its record of the job
          and the results the node uploaded.
        </p>
      ) : null}
      <div class="panel job-summary">
        <p>
          State:{' '}
          <strong id="job-status" class={`job-state ${job.status}`}>
            {running ? 'running' : 'exited'}
          </strong>
          {' · '}started <time dateTime={job.start_time}>{formatTime(job.start_time, tz)}</time>
          <span id="job-end">
            {job.end_time ? (
              <>
                {' · '}ended <time dateTime={job.end_time}>{formatTime(job.end_time, tz)}</time>
              </>
            ) : null}
          </span>
          {' · '}by {record.username} · category {record.category} · test pack <code>{record.test_pack_sha.slice(0, 10)}</code>
          {record.test_pack_branch ? ` (${record.test_pack_branch})` : ''} · {record.soak}
        </p>
        <dl class="counts" aria-label="Result counts">
          <Count id="pass" label="Passed" n={c.pass} cls="pass" />
          <Count id="fail" label="Failed" n={c.fail} cls="fail" />
          <Count id="error" label="Errors" n={c.error} cls="error" />
          <Count id="total" label="Total" n={c.total} />
        </dl>
        {offline?.endReason ? <p class="end-reason">The portal ended this job: its node went offline ({offline.endReason}).</p> : null}
        <Actions running={running} signedIn={signedIn} offline={offline} />
      </div>

      {offline ? null : <RunningNow run={run} running={running} log={log} tz={tz} />}

      <h2>Results</h2>
      <table class="results" id="job-results" data-filter={`job:${job.job_uid}`} data-tz={tz}>
        <thead>
          <tr>
            {['Result', 'Test case', 'Job', 'Category', 'Time', 'Duration', 'Failure reason', 'Screenshot'].map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {results.map((r) => (
            <ResultRow r={r} tz={tz} />
          ))}
        </tbody>
      </table>
      {results.length === 0 ? (
        <p id="no-results" class="no-results">
          No finished runs yet.
        </p>
      ) : null}
    </section>
  );
}

/** Answer `ctx` with the job page (`o.farm`: the farm's navigation, for the portal's own copy). */
export function sendJobPage(ctx: Context, p: JobPageProps, o: { farm?: boolean } = {}): void {
  sendPage(ctx, <JobPage {...p} />, { title: `Job ${p.record.number}`, section: 'results', scripts: p.offline ? [] : ['job.js'], ...o });
}

export function jobRouter(s: Services): Router {
  const r = new Router();
  mount(r, 'GET /app/jobs/:node/:hex/:num', async (ctx) => {
    const tz = parseTimeZone(ctx.query.tz);
    let record: JobRecord;
    try {
      record = jobFromParams(ctx, s);
    } catch (e) {
      if (!isFarmError(e) || e.code !== 'not_found' || !wantsPage(ctx)) throw e;
      const body = (
        <>
          <h1>No such job</h1>
          <p class="problem">{e.message}. Jobs are listed with their results: see the results list.</p>
          <p>
            <a href="/app/results">Results</a>
          </p>
        </>
      );
      sendPage(ctx, body, { title: 'No such job', section: 'results' }, 404);
      return;
    }
    const job = presentJob(record, '', 'v2');
    const results = s.results.query(parseResultQuery({ filter: `job:${record.job_uid}`, sort: 'date:desc' }));
    const run = record.current_run;
    const log = run ? await liveLogTail(path.join(s.results.dirOf(run.result_id), 'farmhand.log')) : undefined;
    sendJobPage(ctx, { job, record, results, log, tz, signedIn: signedIn(ctx) });
  });
  return r;
}
