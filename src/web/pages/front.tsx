/**
 * The front door, `GET /` (docs/portal.md, "The front door"): the node (name,
 * online or not and why), its reservation, the running job with its progress,
 * the latest results, and links to every other page. Everything is readable
 * without JavaScript; `/static/front.js` keeps it current from the event
 * stream and drives the reservation forms through the v2 API.
 *
 * The page is the v2 node status (`presentNode`) as the signed-in person (or
 * nobody) sees it, rendered on the server.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { JobRecord, ResultRecord } from '../../core/model.js';
import type { InterruptionNotice } from '../../core/reservations.js';
import { baseUrl, callerOf, userOf, type Services } from '../../http/context.js';
import { presentNode, type NodeStatus, type Reservation } from '../../http/presenters.js';
import { ReserveFields } from '../components/reserve-fields.js';
import { sendPage } from '../layout.js';
import { mount } from '../../http/endpoints/mount.js';

/** How many results the front door lists. */
export const FRONT_RESULTS = 5;

/** `/app/jobs/<node>/<hex>/<num>` for a job_uid `/<node>/<hex>/<num>`. */
export const jobPageUrl = (jobUid: string): string => `/app/jobs${jobUid}`;
export const resultPageUrl = (resultId: string): string => `/app/results${resultId}`;

interface FrontProps {
  node: NodeStatus;
  login?: string;
  running?: JobRecord['current_run'];
  results: ResultRecord[];
  notices: InterruptionNotice[];
}

export function When(p: { iso: string | null; none?: string }) {
  if (!p.iso) return <span>{p.none ?? 'never'}</span>;
  return <time datetime={p.iso}>{p.iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z').replace(/Z$/, ' UTC')}</time>;
}

function NodeState({ node }: { node: NodeStatus }) {
  return (
    <section id="node-state" aria-labelledby="node-title" class="front-node">
      <h1 id="node-title">{node.friendly_name ?? node.node_id}</h1>
      <p class="node-id">
        Node id <code>{node.node_id}</code>
        {node.device_type ? (
          <>
            {' '}
            · device <code>{node.device_type}</code>
          </>
        ) : null}
      </p>
      <p class={`node-online ${node.online ? 'online' : 'offline'}`}>
        <strong>{node.online ? 'Online' : 'Offline'}</strong>
        {node.available ? ', available for tests.' : `, not available: ${node.not_available_reason ?? 'unknown reason'}.`}
      </p>
      {node.test_pack_problem ? <p class="node-problem">Test pack: {node.test_pack_problem}</p> : null}
      {node.video_problem ? <p class="node-problem">Video: {node.video_problem}</p> : null}
      <p class="node-last-use">
        Last used by {node.last_used_by ?? 'nobody yet'}
        {node.last_used_time ? (
          <>
            {' '}
            at <When iso={node.last_used_time} />
          </>
        ) : null}
        .
      </p>
    </section>
  );
}

function ReservationState({ r }: { r: Reservation | null }) {
  return (
    <div id="reservation-state" data-reservation-id={r ? String(r.reservation_id) : ''}>
      {r ? (
        <>
          <p class="reserved">
            Reserved by <strong class="holder">{r.username}</strong>
            {r.reserved_by_you ? ' (you)' : ''} since <When iso={r.start_time} />, {r.expires ? (
              <span class="expires">
                until <When iso={r.expires} />
              </span>
            ) : (
              'with no expiry'
            )}
            .
          </p>
          <blockquote class="reservation-message">{r.message}</blockquote>
        </>
      ) : (
        <p class="unreserved">Not reserved: anyone may run tests and press keys.</p>
      )}
    </div>
  );
}

/** The forms that fit who is reading: reserve, extend/end (the holder), interrupt (anyone else signed in). */
function ReservationControls({ r, login }: { r: Reservation | null; login?: string }) {
  const mode = !login ? 'signed-out' : !r ? 'reserve' : r.reserved_by_you ? 'holder' : 'other';
  return (
    <div id="reservation-controls" data-mode={mode} data-reservation-id={r ? String(r.reservation_id) : ''}>
      {mode === 'signed-out' ? (
        <p>
          <a href="/app/sign-in?next=%2F">Sign in to reserve</a> this node.
        </p>
      ) : (
        <div class="needs-js" hidden>
          {mode === 'reserve' ? (
            <form class="res-form" data-action="reserve">
              <ReserveFields prefix="res-" />
              <button type="submit">Reserve</button>
              <p id="res-error" class="form-error" role="alert"></p>
            </form>
          ) : null}
          {mode === 'holder' ? (
            <>
              <form class="res-form" data-action="extend">
                <div class="field">
                  <label for="res-extend">Extend by minutes</label>
                  <input id="res-extend" name="minutes" type="number" min="1" step="1" value="30" required aria-describedby="res-error" />
                </div>
                <button type="submit">Extend</button>
              </form>
              <form class="res-form" data-action="end">
                <button type="submit">End my reservation</button>
              </form>
              <p id="res-error" class="form-error" role="alert"></p>
            </>
          ) : null}
          {mode === 'other' ? (
            <form class="res-form" data-action="interrupt">
              <div class="field">
                <label for="res-interrupt">Interrupt with a message to {r!.username}</label>
                <input id="res-interrupt" name="message" required maxLength={10000} aria-describedby="res-error" />
              </div>
              <button type="submit">Interrupt reservation</button>
              <p id="res-error" class="form-error" role="alert"></p>
            </form>
          ) : null}
        </div>
      )}
      {mode !== 'signed-out' ? <noscript>Reserving from the page needs JavaScript; the v2 API works without it.</noscript> : null}
    </div>
  );
}

function JobState({ node, running }: { node: NodeStatus; running?: JobRecord['current_run'] }) {
  const job = node.job;
  const c = job?.result_counts;
  return (
    <section id="job" aria-labelledby="job-title" class="front-job">
      <h2 id="job-title">{job?.status === 'running' ? 'Running job' : 'Last job'}</h2>
      {job ? (
        <>
          <p>
            <a href={jobPageUrl(job.job_uid)} class="job-link">
              Job {job.job_uid}
            </a>{' '}
            <span class={`job-status ${job.status}`}>{job.status}</span>, started <When iso={job.start_time} />
            {job.end_time ? (
              <>
                , ended <When iso={job.end_time} />
              </>
            ) : null}
            .
          </p>
          {c ? (
            <p class="job-counts">
              <span class="count pass">{c.pass} passed</span>, <span class="count fail">{c.fail} failed</span>,{' '}
              <span class="count error">{c.error} errors</span> ({c.total} {c.total === 1 ? 'run' : 'runs'})
            </p>
          ) : null}
          {job.status === 'running' ? (
            <p class="job-current">
              {running ? (
                <>
                  Now running <code class="current-test">{running.test_case}</code> since <When iso={running.start_time} />.
                </>
              ) : (
                'Preparing the next test case.'
              )}
            </p>
          ) : null}
        </>
      ) : (
        <p>No job has run on this node yet.</p>
      )}
    </section>
  );
}

function LatestResults({ results }: { results: ResultRecord[] }) {
  return (
    <section id="latest" aria-labelledby="latest-title" class="front-results">
      <h2 id="latest-title">Latest results</h2>
      {results.length ? (
        <ul>
          {results.map((r) => (
            <li>
              <span class={`outcome ${r.result}`}>{r.result}</span> <a href={resultPageUrl(r.result_id)}>{r.test_case}</a> <When iso={r.end_time} />
              {r.failure_reason ? <span class="reason"> {r.failure_reason}</span> : null}
            </li>
          ))}
        </ul>
      ) : (
        <p>No results yet.</p>
      )}
      <p>
        <a href="/app/results">All results</a>
      </p>
    </section>
  );
}

function Front(p: FrontProps) {
  return (
    <div id="front" data-node-id={p.node.node_id}>
      <div id="front-notices" role="status">
        {p.notices.map((n) => (
          <p class="notice">
            Your reservation {n.reservation_id} was interrupted by <strong>{n.interrupted_by}</strong> at <When iso={n.time} />: {n.message}
          </p>
        ))}
      </div>
      <NodeState node={p.node} />
      <section id="reservation" aria-labelledby="reservation-title" class="front-reservation">
        <h2 id="reservation-title">Reservation</h2>
        <ReservationState r={p.node.reservation} />
        <ReservationControls r={p.node.reservation} login={p.login} />
      </section>
      <JobState node={p.node} running={p.running} />
      <LatestResults results={p.results} />
      <nav aria-label="More" class="front-links">
        <h2>More</h2>
        <ul>
          <li>
            <a href="/app/live">Live view and web remote</a>
          </li>
          <li>
            <a href="/app/results">Results</a>
          </li>
          <li>
            <a href="/app/api">HTTP API reference</a>
          </li>
        </ul>
      </nav>
      <p class="live-status" id="live-status" aria-live="polite"></p>
    </div>
  );
}

export async function renderFront(ctx: Context, s: Services): Promise<void> {
  const status = await s.policy.status(callerOf(ctx, 'v2'));
  const node = presentNode(status.value, userOf(ctx), baseUrl(ctx, s));
  const current = s.jobs.current();
  const running = current?.status === 'running' ? current.current_run : null;
  const results = s.results.query({ predicate: () => true, sort: { field: 'date', dir: 'desc' }, tz: 'UTC', limit: FRONT_RESULTS });
  sendPage(ctx, <Front node={node} login={userOf(ctx)} running={running} results={results} notices={status.notices} />, {
    title: node.friendly_name ?? node.node_id,
    section: 'node',
    scripts: ['front.js'],
  });
}

export function frontRouter(s: Services): Router {
  const r = new Router();
  mount(r, 'GET /', (ctx) => renderFront(ctx, s));
  return r;
}
