/**
 * The result page (`/app/results/<result_id>`, the v1/v2 `triage_url`): the
 * recorded video with the run log beside it (a log line seeks the video, the
 * line under the playhead is highlighted: both on the clock of `video.json`),
 * the failure, the end screenshot, failed matches (template beside frame),
 * the artifacts as a tree, tags, "run again" and the other runs of the test
 * case. Of a run in progress: a page that reloads until the result is
 * recorded. Links go to the v1 reads, which a browser follows without a token
 * (unless `auth.v1_requires_token`, which covers this page too).
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { VNode } from 'preact';
import type { ArtifactListing, ResultRecord } from '../../core/model.js';
import { parseTimeZone } from '../../core/query.js';
import { signedIn } from '../../http/auth.js';
import { type Services } from '../../http/context.js';
import { seconds } from '../../http/formats/csv.js';
import { instant, ZoneFormatter } from '../../http/formats/zone.js';
import { resultFromParams, runInProgress } from '../../http/resultRoutes.js';
import { ArtifactTree, Check, Checks, MatchFailures, RunLog, RunStrip } from '../components/result-parts.js';
import { sendPage } from '../layout.js';
import {
  artifactTree,
  encodePath,
  history,
  inlineTexts,
  LOG_TAIL_LINES,
  logLines,
  logVtt,
  matchFailures,
  pngSize,
  readChecks,
  readTail,
  videoStart,
  type History,
  type LogLine,
  type MatchFailure,
  type ArtifactNode,
  type CheckView,
} from '../result-data.js';
import { mount } from '../../http/endpoints/mount.js';

/**
 * Where the page reads a finished result from: the node's own store, or the portal's storage of the
 * results its nodes uploaded (src/farm/portal/web.ts, for a node that is offline).
 */
export interface ResultPageSource {
  artifacts(resultId: string): Promise<ArtifactListing>;
  openArtifact(resultId: string, relPath: string): Promise<{ path: string; size: number } | undefined>;
  /** The other runs of the record's test case. */
  history(record: ResultRecord): History | Promise<History>;
}

/** What the page shows of a finished result, read through `src`. */
export async function resultPageData(
  src: ResultPageSource,
  record: ResultRecord,
  o: { tz: string; nodeId: string; remote: string | null; signedIn: boolean; offline?: string },
): Promise<ResultPageProps> {
  const listing = await src.artifacts(record.result_id);
  const log = await src.openArtifact(record.result_id, 'farmhand.log');
  const { lines, truncated } = log ? logLines(await readTail(log.path, log.size), o.tz) : { lines: [], truncated: false };
  const tree = artifactTree(listing);
  await inlineTexts(tree, src, record.result_id);
  const failures = matchFailures(lines, listing);
  const frameSizes = await Promise.all(failures.map((f) => (f.frame ? pngSize(src, record.result_id, f.frame) : Promise.resolve(undefined))));
  const video = ['video.mp4', 'video.webm'].find((n) => listing[n]);
  const checks = await readChecks(src, record.result_id, listing);
  return {
    checks,
    record,
    tz: o.tz,
    hasLog: log !== undefined,
    lines,
    truncated,
    tree,
    failures: failures.map((f, i) => ({ ...f, size: frameSizes[i] })),
    video,
    videoStart: video ? ((await videoStart(src, record.result_id)) ?? undefined) : undefined,
    screenshot: listing['screenshot.png'] !== undefined,
    history: await src.history(record),
    nodeId: o.nodeId,
    remote: o.remote,
    signedIn: o.signedIn,
    ...(o.offline !== undefined && { offline: o.offline }),
  };
}

/** Answer `ctx` with the result page of `data`. */
export function sendResultPage(ctx: Context, data: ResultPageProps, o: { farm?: boolean } = {}): void {
  const r = data.record;
  sendPage(ctx, <ResultPage {...data} />, { title: `${r.result}: ${r.test_case}`, section: 'results', scripts: ['result.js'], ...o });
}

/** The run log as a WebVTT track on the video's clock: the video shows the log line as a caption. */
export async function sendLogVtt(ctx: Context, src: ResultPageSource, record: ResultRecord): Promise<void> {
  const log = await src.openArtifact(record.result_id, 'farmhand.log');
  const { lines } = log ? logLines(await readTail(log.path, log.size), 'UTC') : { lines: [] };
  const clock = (await videoStart(src, record.result_id)) ?? record.start_time;
  ctx.type = 'text/vtt; charset=utf-8';
  ctx.set('Cache-Control', 'no-store');
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.body = logVtt(lines, clock);
}

export function resultRouter(s: Services): Router {
  const r = new Router();
  const src: ResultPageSource = {
    artifacts: (id) => s.results.artifacts(id),
    openArtifact: (id, rel) => s.results.openArtifact(id, rel),
    history: (record) => history(s.results, record),
  };
  mount(r, 'GET /app/results/:node/:hex/:num/:stamp', async (ctx) => {
    const tz = parseTimeZone(ctx.query.tz);
    const live = runInProgress(ctx, s);
    if (live) return sendRunning(ctx, live, tz);
    const record = resultFromParams(ctx, s);
    const job = s.jobs.get(record.job_uid);
    sendResultPage(ctx, await resultPageData(src, record, { tz, nodeId: s.nodeId, remote: job?.remote_control ?? null, signedIn: signedIn(ctx) }));
  });
  mount(r, 'GET /app/results/:node/:hex/:num/:stamp/log.vtt', (ctx) => sendLogVtt(ctx, src, resultFromParams(ctx, s)));
  return r;
}

/** The v1 read of a result, which the page links to. */
export const resultApi = (resultId: string): string => `/api/v1/result${encodePath(resultId)}`;
/** The page of a result. */
export const resultPage = (resultId: string): string => `/app/results${encodePath(resultId)}`;

function sendRunning(ctx: Context, run: { result_id: string; test_case: string; start_time: string }, tz: string): void {
  const zone = new ZoneFormatter(tz);
  sendPage(
    ctx,
    <>
      <h1>
        <span class="badge running">running</span> <span class="test-case">{run.test_case}</span>
      </h1>
      <p>
        Started {zone.iso(instant(run.start_time), { ms: false, offset: true })} ({zone.tz}). This page reloads every 5 seconds until the run is
        recorded.
      </p>
      <p>
        <a href={`${resultApi(run.result_id)}/farmhand.log`}>the log so far</a>
      </p>
    </>,
    { title: `running: ${run.test_case}`, section: 'results' },
  );
  // The Refresh header reloads without a script (the CSP allows none inline).
  ctx.set('Refresh', '5');
}

export interface ResultPageProps {
  record: ResultRecord;
  tz: string;
  hasLog: boolean;
  lines: LogLine[];
  truncated: boolean;
  tree: ArtifactNode[];
  failures: Array<MatchFailure & { size?: { width: number; height: number } }>;
  /** The stbt checks the run recorded (checks.jsonl), in time order. */
  checks: CheckView[];
  video?: string;
  /** ISO wall-clock time of the video's first frame (video.json). */
  videoStart?: string;
  screenshot: boolean;
  history: History;
  nodeId: string;
  remote: string | null;
  signedIn: boolean;
  /**
   * Set when the page is the portal's, rendered from its storage because the node is offline: why the
   * node is offline. What needs the node (run again) says so instead.
   */
  offline?: string;
}

export function ResultPage(p: ResultPageProps): VNode {
  const r = p.record;
  const api = resultApi(r.result_id);
  const zone = new ZoneFormatter(p.tz);
  const time = (iso: string) => {
    const ts = instant(iso);
    return Number.isNaN(ts) ? iso : zone.iso(ts, { ms: true, offset: true });
  };
  const tzq = p.tz === 'UTC' ? '' : `?tz=${encodeURIComponent(p.tz)}`;
  // Without video.json (a result recorded before it existed) the run's start stands in: off by up to a second.
  const clock = p.videoStart ?? r.start_time;
  // A run that did not pass: its last failed check (else its last check) goes first on the page.
  const why = r.result === 'pass' ? undefined : ([...p.checks].reverse().find((c) => c.passed === false) ?? p.checks.at(-1));
  return (
    <div class="result-page">
      <h1>
        <span class={`badge ${r.result}`}>{r.result}</span> <span class="test-case">{r.test_case}</span>
      </h1>
      {p.offline !== undefined ? (
        <p class="notice offline-copy">
          Node <code>{p.nodeId}</code> is offline ({p.offline}): this page is the portal's copy of the result, from the files the node uploaded.
        </p>
      ) : null}
      {why ? (
        <section class="why-failed" aria-labelledby="why-h">
          <h2 id="why-h">Why it failed</h2>
          <p>The run's last {why.passed === false ? 'failed ' : ''}check:</p>
          <ol class="checks">
            <Check c={why} api={api} clock={p.video ? clock : undefined} zone={zone} />
          </ol>
        </section>
      ) : null}
      {r.failure_reason !== null || r.traceback !== null ? (
        <section class="failure" aria-labelledby="failure-h">
          <h2 id="failure-h">Failure</h2>
          {r.failure_reason !== null ? <p class="reason">{r.failure_reason}</p> : null}
          {r.traceback !== null ? <pre class="traceback">{r.traceback}</pre> : null}
        </section>
      ) : null}
      <section class="history" aria-labelledby="history-h">
        <h2 id="history-h">Runs of this test case</h2>
        <RunStrip history={p.history} zone={zone} />
      </section>
      <section class="playback" aria-labelledby="log-h">
        <div class="screen">
          {p.video ? (
            <figure>
              <video id="run-video" controls preload="metadata" src={`${api}/artifacts/${encodePath(p.video)}`} data-video-start={clock} data-clock={p.videoStart ? 'recorded' : 'approximate'}>
                <track kind="subtitles" label="Run log" srcLang="en" src={`${resultPage(r.result_id)}/log.vtt`} />
                <a href={`${api}/artifacts/${encodePath(p.video)}`}>{p.video}</a>
              </video>
              <figcaption>
                The run's video. {p.videoStart ? 'Its first frame was shown at ' : 'No recorded clock: taken as starting at the run\'s start, '}
                <time dateTime={clock}>{time(clock)}</time>. <a href={`${api}/artifacts/${encodePath(p.video)}`}>Download</a>
              </figcaption>
            </figure>
          ) : (
            <p class="none">This run has no video.</p>
          )}
          {p.screenshot ? (
            <figure>
              <a href={`${api}/screenshot.png`}>
                <img class="end-screenshot" src={`${api}/screenshot.png`} alt="Screenshot at the end of the run" />
              </a>
              <figcaption>Screenshot at the end of the run</figcaption>
            </figure>
          ) : null}
        </div>
        <div class="log-pane">
          <h2 id="log-h">Log</h2>
          {p.hasLog ? (
            <>
              <p>
                {p.truncated ? `The last ${LOG_TAIL_LINES} lines; ` : ''}
                <a class="full-log" href={`${api}/farmhand.log${tzq}`}>
                  full log
                </a>
                {p.video ? '. Choose a line\'s time to see that moment in the video.' : ''}
              </p>
              <RunLog lines={p.lines} clock={p.video ? clock : undefined} />
            </>
          ) : (
            <p class="none">This run has no log.</p>
          )}
        </div>
      </section>
      {p.failures.length > 0 ? (
        <section class="matches" aria-labelledby="matches-h">
          <h2 id="matches-h">Failed matches</h2>
          <MatchFailures failures={p.failures} api={api} zone={zone} />
        </section>
      ) : null}
      {p.checks.length > 0 ? (
        <section class="checks-section" aria-labelledby="checks-h">
          <h2 id="checks-h">Checks</h2>
          <p>
            The checks the test made (passing ones sampled: docs/test-scripts.md); <a href={`${api}/artifacts/checks.jsonl`}>all as JSON lines</a>
            {p.video ? '. Choose a check\'s time to see that moment in the video.' : ''}
          </p>
          <Checks checks={p.checks} api={api} clock={p.video ? clock : undefined} zone={zone} />
        </section>
      ) : null}
      <section aria-labelledby="run-h">
        <h2 id="run-h">Run</h2>
        <table class="fields">
          <tbody>
            <Field name="Result">{r.result}</Field>
            <Field name="Test case">
              <code>{r.test_case}</code>
            </Field>
            <Field name="Result id">
              <a href={api}>{r.result_id}</a>
            </Field>
            <Field name="Job">
              <a href={`/api/v1/jobs${encodePath(r.job_uid)}`}>{r.job_uid}</a>
            </Field>
            <Field name="Start">{time(r.start_time)}</Field>
            <Field name="End">{time(r.end_time)}</Field>
            <Field name="Duration">{`${seconds(r.duration)} s`}</Field>
            <Field name="Category">{r.category}</Field>
            <Field name="Test pack">
              <code>{r.test_pack_sha}</code>
              {r.test_pack_branch === null ? '' : ` (${r.test_pack_branch})`}
            </Field>
            <Field name="User">{r.username}</Field>
            <Field name="Tags">
              {Object.keys(r.tags).length === 0 ? (
                <span class="none">none</span>
              ) : (
                <ul class="tags">
                  {Object.entries(r.tags).map(([k, v]) => (
                    <li>
                      <code>{k}</code> = {v}
                    </li>
                  ))}
                </ul>
              )}
            </Field>
          </tbody>
        </table>
        <Rerun {...p} />
      </section>
      <section class="artifacts" aria-labelledby="artifacts-h">
        <h2 id="artifacts-h">Artifacts</h2>
        {p.tree.length === 0 ? (
          <p class="none">No files.</p>
        ) : (
          <>
            <p>
              <a href={`${api}/artifacts/`}>listing as JSON</a>
            </p>
            <ArtifactTree nodes={p.tree} api={api} />
          </>
        )}
      </section>
    </div>
  );
}

function Field(p: { name: string; children: preact.ComponentChildren }): VNode {
  return (
    <tr>
      <th scope="row">{p.name}</th>
      <td>{p.children}</td>
    </tr>
  );
}

/** "Run this test case again" at the run's revision and remote, through POST /api/v2/run_tests (result.js). */
function Rerun(p: ResultPageProps): VNode {
  const r = p.record;
  if (p.offline !== undefined) {
    return (
      <p class="rerun node-offline">
        Running this test case again needs node <code>{p.nodeId}</code>, which is offline: {p.offline}.
      </p>
    );
  }
  if (!p.signedIn) {
    return (
      <p class="rerun">
        <a href="/app/sign-in">Sign in to run this test case again</a> (at revision <code>{r.test_pack_sha.slice(0, 12)}</code>).
      </p>
    );
  }
  return (
    <div class="rerun">
      <button
        type="button"
        id="rerun"
        data-node={p.nodeId}
        data-test-case={r.test_case}
        data-revision={r.test_pack_sha}
        data-remote={p.remote ?? undefined}
      >
        Run this test case again
      </button>{' '}
      at revision <code>{r.test_pack_sha.slice(0, 12)}</code>
      {p.remote ? (
        <>
          {' '}
          with remote <code>{p.remote}</code>
        </>
      ) : null}
      <p id="rerun-status" role="status" aria-live="polite"></p>
    </div>
  );
}
