/**
 * The farm's queue pages on the portal (docs/video-wall.md, "The queue page"; docs/queue.md):
 *
 * - `/app/queue`: every label set with waiting jobs (a job's set is its labels, `QueuedJob.selector`), how many
 *   wait, the highest priority, the oldest, the nodes of the set and why its first job waits.
 * - `/app/queue?labels=device=roku`: that set's waiting jobs in the order they will start (priority, then oldest),
 *   who queued each, since when, its position and why it waits (`PgJobQueue.explain`), then the last ended ones.
 *
 * Readable without JavaScript. The data comes through functions the portal passes in (src/farm/portal/web.ts),
 * so this module knows nothing of PostgreSQL.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { VNode } from 'preact';
import type { Availability } from '../../core/availability.js';
import { mount } from '../../http/endpoints/mount.js';
import { sendPage } from '../layout.js';
import { LabelFilterForm, withLabels, type LabelFilter } from './farm.js';
import { jobPageUrl, When } from './front.js';

/** A queued job as the page shows it (the portal passes its QueuedJob, src/farm/queue/store.ts). */
export interface QueuedJob {
  queue_id: number;
  state: string;
  priority: number;
  username: string;
  queued_at: string;
  request: { test_cases?: readonly string[] | null | undefined };
  attempts: number;
  last_error: string | null;
  node_id: string | null;
  job_uid: string | null;
  ended_at: string | null;
  end_reason: string | null;
  ended_by: string | null;
  waiting?: { kind: string; message: string } | null | undefined;
}

/** One label set with waiting jobs, for the overview. */
export interface QueueSetSummary {
  selector: string;
  waiting: number;
  topPriority: number;
  oldest: string;
  /** Why its first job waits (the explain of the first in order). */
  why: string;
  /** The nodes with all of its labels, and how many of them are free. */
  matching: number;
  free: number;
}

export interface QueueSetNode {
  node_id: string;
  availability: Availability;
}

export type QueuePageData =
  | { kind: 'overview'; filter?: LabelFilter; sets: QueueSetSummary[] }
  | {
      kind: 'set';
      filter: LabelFilter;
      selector: string;
      /** Waiting jobs in queue order, explained. */
      waiting: QueuedJob[];
      /** The newest ended jobs of the set. */
      ended: QueuedJob[];
      nodes: QueueSetNode[];
      /** Who may cancel: the signed-in person and whether she is an admin; absent for a reader or without the API. */
      canceller?: { login: string; admin: boolean };
    };

export type LoadQueuePage = (ctx: Context) => Promise<QueuePageData>;

const queueUrl = (selector: string): string => withLabels('/app/queue', selector);

function Overview({ data }: { data: Extract<QueuePageData, { kind: 'overview' }> }): VNode {
  return (
    <div id="queue-page">
      <h1>Queue</h1>
      <p>
        Jobs queued with <code>POST /api/v2/jobs</code> wait here for a free node with all of their labels, highest priority first, then oldest.
      </p>
      <LabelFilterForm filter={data.filter} action="/app/queue" id="queue-filter" />
      <div id="queue-sets">
        {data.sets.length === 0 ? (
          <p class="queue-empty">No job is waiting.</p>
        ) : (
          <table class="queue-sets">
            <caption class="visually-hidden">Label sets with waiting jobs</caption>
            <thead>
              <tr>
                <th scope="col">Labels</th>
                <th scope="col">Waiting</th>
                <th scope="col">Highest priority</th>
                <th scope="col">Oldest since</th>
                <th scope="col">Nodes (free)</th>
                <th scope="col">Why the first waits</th>
              </tr>
            </thead>
            <tbody>
              {data.sets.map((s) => (
                <tr data-selector={s.selector}>
                  <th scope="row">
                    <a href={queueUrl(s.selector)}>
                      <code>{s.selector}</code>
                    </a>
                  </th>
                  <td class="queue-count">{s.waiting}</td>
                  <td>{s.topPriority}</td>
                  <td>
                    <When iso={s.oldest} />
                  </td>
                  <td>
                    {s.matching} ({s.free} free)
                  </td>
                  <td class="why">{s.why}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </div>
  );
}

function CancelButton({ j, data }: { j: QueuedJob; data: Extract<QueuePageData, { kind: 'set' }> }): VNode | null {
  const c = data.canceller;
  if (!c || (!c.admin && c.login !== j.username)) return null;
  return (
    <form class="queue-cancel needs-js" hidden data-queue-id={String(j.queue_id)}>
      <button type="submit">Cancel</button>
      <span class="form-error" role="alert"></span>
    </form>
  );
}

function WaitingTable({ data }: { data: Extract<QueuePageData, { kind: 'set' }> }): VNode {
  if (data.waiting.length === 0) return <p class="queue-empty">No job with these labels is waiting.</p>;
  return (
    <table class="queue-jobs">
      <caption class="visually-hidden">Waiting jobs, in the order they will start</caption>
      <thead>
        <tr>
          <th scope="col">#</th>
          <th scope="col">Queued job</th>
          <th scope="col">Priority</th>
          <th scope="col">Queued by</th>
          <th scope="col">Since</th>
          <th scope="col">Why it waits</th>
          {data.canceller ? <th scope="col" class="needs-js" hidden><span class="visually-hidden">Cancel</span></th> : null}
        </tr>
      </thead>
      <tbody>
        {data.waiting.map((j, i) => (
          <tr data-queue-id={String(j.queue_id)} data-wait-kind={j.waiting?.kind ?? ''}>
            <td class="queue-order">{i + 1}</td>
            <th scope="row">
              {j.queue_id}
              <br />
              <span class="queue-tests">{(j.request.test_cases ?? []).join(', ') || 'every test case'}</span>
            </th>
            <td class="queue-priority">{j.priority}</td>
            <td class="queue-user">{j.username}</td>
            <td>
              <When iso={j.queued_at} />
              {j.attempts > 0 ? <span class="queue-attempts"> ({j.attempts} tries; last: {j.last_error})</span> : null}
            </td>
            <td class="why">{j.waiting?.message ?? ''}</td>
            {data.canceller ? (
              <td class="needs-js" hidden>
                <CancelButton j={j} data={data} />
              </td>
            ) : null}
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function EndedTable({ ended }: { ended: QueuedJob[] }): VNode | null {
  if (ended.length === 0) return null;
  return (
    <section aria-labelledby="queue-ended-h">
      <h2 id="queue-ended-h">Last ended</h2>
      <table class="queue-ended">
        <thead>
          <tr>
            <th scope="col">Queued job</th>
            <th scope="col">State</th>
            <th scope="col">Queued by</th>
            <th scope="col">Ended</th>
            <th scope="col">Where</th>
          </tr>
        </thead>
        <tbody>
          {ended.map((j) => (
            <tr data-queue-id={String(j.queue_id)}>
              <th scope="row">{j.queue_id}</th>
              <td class="queue-state">
                {j.state}
                {j.end_reason && j.end_reason !== j.state && j.end_reason !== 'started' ? `: ${j.end_reason}` : ''}
                {j.ended_by && j.state === 'cancelled' ? ` by ${j.ended_by}` : ''}
              </td>
              <td>{j.username}</td>
              <td>
                <When iso={j.ended_at} />
              </td>
              <td>
                {j.job_uid ? (
                  <a href={jobPageUrl(j.job_uid)}>
                    job {j.job_uid.slice(j.job_uid.lastIndexOf('/') + 1)} on {j.node_id}
                  </a>
                ) : (
                  '—'
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}

function SetPage({ data }: { data: Extract<QueuePageData, { kind: 'set' }> }): VNode {
  const free = data.nodes.filter((n) => n.availability.kind === 'available').length;
  return (
    <div id="queue-page" data-selector={data.selector}>
      <h1>
        Queue for <code>{data.selector}</code>
      </h1>
      <p>
        <a href="/app/queue">Every label set</a> · <a href={withLabels('/', data.selector)}>These nodes</a> ·{' '}
        <a href={withLabels('/app/wall', data.selector)}>Their video wall</a>
      </p>
      <LabelFilterForm filter={data.filter} action="/app/queue" id="queue-filter" />
      <p id="queue-nodes">
        {data.nodes.length} {data.nodes.length === 1 ? 'node has' : 'nodes have'} these labels, {free} free
        {data.nodes.length ? ': ' : '.'}
        {data.nodes.map((n, i) => (
          <>
            {i ? ', ' : ''}
            <code>{n.node_id}</code> ({n.availability.kind})
          </>
        ))}
      </p>
      <section aria-labelledby="queue-waiting-h" id="queue-waiting">
        <h2 id="queue-waiting-h">Waiting ({data.waiting.length})</h2>
        <WaitingTable data={data} />
      </section>
      <EndedTable ended={data.ended} />
    </div>
  );
}

export function queuePageRouter(load: LoadQueuePage): Router {
  const r = new Router();
  mount(r, 'GET /app/queue', async (ctx) => {
    const data = await load(ctx);
    const title = data.kind === 'set' ? `Queue ${data.selector}` : 'Queue';
    const body = data.kind === 'set' ? <SetPage data={data} /> : <Overview data={data} />;
    sendPage(ctx, body, { title, scripts: data.kind === 'set' && data.canceller ? ['queue.js'] : [], farm: true }, data.filter?.error ? 400 : 200);
  });
  return r;
}
