/**
 * The farm's front door, `GET /` on the portal (docs/farm.md, "Web pages on
 * the portal"): every node of the farm as `GET /api/v2/nodes` has it (friendly
 * name, online or offline and why, the reservation, the running job with its
 * counts and the test case running now), each linking to its pages (live view
 * and remote, job page, its results), and to the farm-wide results list.
 * Readable without JavaScript; `/static/farm.js` re-renders the table from the
 * event stream. Each node's labels (docs/queue.md) are shown in its row, each a
 * link to the nodes with that label; `?labels=k=v,...` shows only the nodes with
 * all of them (docs/video-wall.md, "Labels on the pages"). The data comes through
 * a function the portal passes in, so this module knows nothing of PostgreSQL or the hub.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { VNode } from 'preact';
import type { Availability } from '../../core/availability.js';
import type { Labels } from '../../core/queue.js';
import type { NodeStatus } from '../../http/presenters.js';
import { ReserveFields } from '../components/reserve-fields.js';
import { sendPage } from '../layout.js';
import { jobPageUrl, When } from './front.js';
import { liveBaseOf } from './live.js';
import { mount } from '../../http/endpoints/mount.js';

/**
 * A v2 Node object on the portal: the node's own, with the portal's `farm` object; and, for this page only (not
 * in the API), its availability as a kind and a detail, which the page reads instead of the reason's text.
 */
export type FarmNode = NodeStatus & {
  farm?: { connected: boolean; offline_reason: string | null; version: string | null; last_seen: string | null };
  availability?: Availability;
  /** For this page only: who the node's tests run as, as the node said (src/farm/protocol.ts NodeTestUser); absent from an older node. */
  test_user?: { run_as: string | null; can_read_credential: boolean };
  /** The node's labels, set by the farm's administrator (docs/queue.md). */
  labels?: Labels;
};

/** A page's label filter (`?labels=device=roku,room=lab2`): the text as given, and what was wrong with it. */
export interface LabelFilter {
  text: string;
  error?: string;
}

/** The run in flight of a running job (the portal's jobs table). */
export interface RunningTest {
  test_case: string;
  start_time: string;
}

export interface FarmFrontData {
  nodes: FarmNode[];
  /** job_uid -> the test case running now. */
  running: Map<string, RunningTest>;
  /** The signed-in person (the reservation forms are theirs); undefined for a reader. */
  login?: string;
  /** The label filter; `nodes` are already the matching ones. */
  filter?: LabelFilter;
  /** Registered nodes before the filter. */
  total?: number;
}

/** What the page reads: the nodes as the signed-in person (or nobody) sees them. */
export type LoadFarmFront = (ctx: Context) => Promise<FarmFrontData>;

/** The farm-wide results list filtered to one node: free text on the result ids' first segment. */
export const nodeResultsUrl = (nodeId: string): string => `/app/results?filter=${encodeURIComponent(`/${nodeId}/`)}`;

/** After the word Offline, an offline node's reason is its detail: "Offline: <why>", not "Offline: offline: <why>". */
const stateReason = (n: FarmNode): string => {
  if (n.availability?.kind === 'offline') return n.availability.detail ?? 'unknown reason';
  return n.not_available_reason ?? 'unknown reason';
};

/**
 * A row's own reservation forms (the node's front door's, per row): extend and end for the holder,
 * interrupt for anyone else signed in. farm.js sends them to the portal's v2 API.
 */
function RowReservationControls({ n, login }: { n: FarmNode; login?: string }): VNode | null {
  const r = n.reservation;
  if (!login || !r) return null;
  const id = n.node_id;
  return (
    <div class="row-res needs-js" hidden data-reservation-id={String(r.reservation_id)}>
      {r.reserved_by_you ? (
        <>
          <form class="res-form" data-action="extend">
            <label for={`res-extend-${id}`}>Extend by minutes</label>{' '}
            <input id={`res-extend-${id}`} name="minutes" type="number" min="1" step="1" value="30" required size={5} aria-describedby={`res-error-${id}`} />{' '}
            <button type="submit">Extend</button>
          </form>
          <form class="res-form" data-action="end">
            <button type="submit">End this reservation</button>
          </form>
        </>
      ) : (
        <form class="res-form" data-action="interrupt">
          <label for={`res-interrupt-${id}`}>Interrupt with a message to {r.username}</label>{' '}
          <input id={`res-interrupt-${id}`} name="message" required maxLength={10000} aria-describedby={`res-error-${id}`} />{' '}
          <button type="submit">Interrupt</button>
        </form>
      )}
      <p id={`res-error-${id}`} class="form-error" role="alert"></p>
    </div>
  );
}

/** A node whose tests run as its daemon's own user: any test can read its credential (docs/security.md). */
function TestUserWarning({ n }: { n: FarmNode }): VNode | null {
  if (!n.test_user?.can_read_credential) return null;
  return (
    <p class="notice node-test-user" id={`test-user-${n.node_id}`}>
      <strong>Warning:</strong> tests on this node run as its own user, so any test can read the node&rsquo;s credential and act as the node on
      this portal. Run them as a dedicated user: <code>runner.run_tests_as</code> in the node&rsquo;s config.
    </p>
  );
}

/** The page's own URL filtered to one label set. */
export const withLabels = (path: string, labels: string): string => `${path}?labels=${encodeURIComponent(labels)}`;

/** A node's labels, each a link to `path` filtered by it. */
export function LabelChips({ labels, path }: { labels: Labels | undefined; path: string }): VNode | null {
  const pairs = Object.entries(labels ?? {});
  if (pairs.length === 0) return null;
  return (
    <ul class="labels" aria-label="Labels">
      {pairs.map(([k, v]) => (
        <li>
          <a class="label" href={withLabels(path, `${k}=${v}`)}>
            {k}={v}
          </a>
        </li>
      ))}
    </ul>
  );
}

/** The label filter's form (a GET of the same page), its error beside the box. */
export function LabelFilterForm({ filter, action, id }: { filter?: LabelFilter; action: string; id: string }): VNode {
  const err = filter?.error;
  return (
    <form class="label-filter" method="get" action={action} role="search">
      <label for={id}>Filter by labels</label>{' '}
      <input id={id} name="labels" value={filter?.text ?? ''} placeholder="device=roku,room=lab2" size={32} aria-invalid={err ? 'true' : undefined} aria-describedby={`${id}-error`} />{' '}
      <button type="submit">Filter</button>
      {filter?.text ? (
        <>
          {' '}
          <a href={action}>All nodes</a>
        </>
      ) : null}
      <p id={`${id}-error`} class="form-error" role="alert">
        {err ?? ''}
      </p>
    </form>
  );
}

function NodeRow({ n, running, login }: { n: FarmNode; running: Map<string, RunningTest>; login?: string }): VNode {
  const job = n.job;
  const c = job?.result_counts;
  const now = job?.status === 'running' ? running.get(job.job_uid) : undefined;
  const r = n.reservation;
  return (
    <tr id={`node-${n.node_id}`} data-node-id={n.node_id} data-online={n.online ? 'yes' : 'no'}>
      {login ? (
        // Hidden until farm.js shows it (with the reserve form): without JavaScript there is nothing to tick for.
        <td class="node-select needs-js" hidden>
          <input type="checkbox" id={`select-${n.node_id}`} name="node_ids" value={n.node_id} form="farm-reserve" aria-label={`Select ${n.friendly_name ?? n.node_id}`} />
        </td>
      ) : null}
      <th scope="row" class="farm-node">
        <span class="node-name">{n.friendly_name ?? n.node_id}</span>
        <br />
        <code class="node-id">{n.node_id}</code>
        {n.device_type ? (
          <>
            {' '}
            · <code>{n.device_type}</code>
          </>
        ) : null}
        <LabelChips labels={n.labels} path="/" />
      </th>
      <td class="node-state">
        <span class={`node-online ${n.online ? 'online' : 'offline'}`}>
          <strong>{n.online ? 'Online' : 'Offline'}</strong>
        </span>
        {n.available ? ', available.' : <span class="reason">: {stateReason(n)}.</span>}
        {n.farm?.last_seen && !n.farm.connected ? (
          <>
            {' '}
            Last seen <When iso={n.farm.last_seen} />.
          </>
        ) : null}
        <TestUserWarning n={n} />
      </td>
      <td class="node-reservation">
        {r ? (
          <>
            <strong class="holder">{r.username}</strong>
            {r.reserved_by_you ? ' (you)' : ''}
            {r.expires ? (
              <>
                , until <When iso={r.expires} />
              </>
            ) : null}
            <blockquote class="reservation-message">{r.message}</blockquote>
          </>
        ) : (
          'not reserved'
        )}
        <RowReservationControls n={n} login={login} />
      </td>
      <td class="node-job">
        {job ? (
          <>
            <a href={jobPageUrl(job.job_uid)} class="job-link">
              {job.status === 'running' ? 'Running' : 'Last'} job {job.job_uid.slice(job.job_uid.lastIndexOf('/') + 1)}
            </a>{' '}
            <span class={`job-status ${job.status}`}>{job.status}</span>
            {c ? (
              <span class="job-counts">
                : <span class="count pass">{c.pass} passed</span>, <span class="count fail">{c.fail} failed</span>,{' '}
                <span class="count error">{c.error} errors</span>
              </span>
            ) : null}
            {job.status === 'running' ? (
              <span class="job-current">
                {' '}
                {now ? (
                  <>
                    Now <code class="current-test">{now.test_case}</code> since <When iso={now.start_time} />.
                  </>
                ) : (
                  'Preparing the next test case.'
                )}
              </span>
            ) : null}
          </>
        ) : (
          'no job yet'
        )}
      </td>
      <td class="node-links">
        <a href={liveBaseOf(n.node_id)}>Live view and remote</a>
        <br />
        <a href={nodeResultsUrl(n.node_id)}>Its results</a>
      </td>
    </tr>
  );
}

function FarmFront({ data }: { data: FarmFrontData }): VNode {
  const online = data.nodes.filter((n) => n.online).length;
  return (
    <div id="farm-front">
      <h1>Farm</h1>
      <p id="farm-summary">
        {data.nodes.length} {data.nodes.length === 1 ? 'node' : 'nodes'}
        {data.filter?.text && !data.filter.error ? ` with ${data.filter.text} (of ${data.total ?? data.nodes.length})` : ''}, {online} online.{' '}
        <a href="/app/results">Results of every node</a> · <a href="/app/queue">The queue</a> ·{' '}
        <a href={data.filter?.text && !data.filter.error ? withLabels('/app/wall', data.filter.text) : '/app/wall'}>The video wall</a>
      </p>
      <LabelFilterForm filter={data.filter} action="/" id="farm-filter" />
      <div id="farm-nodes">
        {data.nodes.length ? (
          <table class="farm-nodes">
            <caption class="visually-hidden">The nodes of the farm</caption>
            <thead>
              <tr>
                {data.login ? (
                  <th scope="col" class="node-select needs-js" hidden>
                    <span class="visually-hidden">Select</span>
                  </th>
                ) : null}
                <th scope="col">Node</th>
                <th scope="col">State</th>
                <th scope="col">Reservation</th>
                <th scope="col">Job</th>
                <th scope="col">Pages</th>
              </tr>
            </thead>
            <tbody>
              {data.nodes.map((n) => (
                <NodeRow n={n} running={data.running} login={data.login} />
              ))}
            </tbody>
          </table>
        ) : data.filter?.text ? (
          <p class="no-match">No node has the labels {data.filter.text}.</p>
        ) : (
          <p>
            No node is registered yet: <code>farmhand farm node add &lt;node_id&gt;</code> makes one.
          </p>
        )}
      </div>
      <ReserveForm data={data} />
      <p class="live-status" id="live-status" aria-live="polite"></p>
    </div>
  );
}

/**
 * Reserve the nodes ticked in the table together (all or nothing: the portal's one transaction), for
 * so many minutes or until ended, with a message. Outside the table, which farm.js swaps on events.
 */
function ReserveForm({ data }: { data: FarmFrontData }): VNode | null {
  if (data.nodes.length === 0) return null;
  if (!data.login) {
    return (
      <p id="farm-reserve-signin">
        <a href="/app/sign-in?next=%2F">Sign in to reserve</a> nodes.
      </p>
    );
  }
  return (
    <section aria-labelledby="farm-reserve-h" class="farm-reserve">
      <h2 id="farm-reserve-h">Reserve nodes</h2>
      <div class="needs-js" hidden>
        <form id="farm-reserve" class="res-form" data-action="reserve">
          <p>Tick the nodes in the table: they are reserved together, or none is.</p>
          <ReserveFields prefix="farm-res-" />
          <button type="submit">Reserve the selected nodes</button>
          <p id="farm-res-error" class="form-error" role="alert"></p>
        </form>
      </div>
      <noscript>Reserving from the page needs JavaScript; the v2 API works without it.</noscript>
    </section>
  );
}

export function farmFrontRouter(load: LoadFarmFront): Router {
  const r = new Router();
  mount(r, 'GET /', async (ctx) => {
    const data = await load(ctx);
    sendPage(ctx, <FarmFront data={data} />, { title: 'Farm', section: 'node', scripts: ['farm.js'], farm: true }, data.filter?.error ? 400 : 200);
  });
  // The node's pages link their navigation's "Live & remote" here: on a farm, each node has its own (`/app/nodes/<id>/live`).
  mount(r, 'GET /app/live', (ctx) => {
    ctx.status = 303;
    ctx.redirect('/');
  });
  return r;
}

