/**
 * The farm's front door, `GET /` on the portal (docs/farm.md, "Web pages on
 * the portal"): every node of the farm as `GET /api/v2/nodes` has it (friendly
 * name, online or offline and why, the reservation, the running job with its
 * counts and the test case running now), each linking to its pages (live view
 * and remote, job page, its results), and to the farm-wide results list.
 * Readable without JavaScript; `/static/farm.js` re-renders the table from the
 * event stream. The data comes through a function the portal passes in, so
 * this module knows nothing of PostgreSQL or the hub.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import type { VNode } from 'preact';
import type { NodeStatus } from '../../http/presenters.js';
import { sendPage } from '../layout.js';
import { jobPageUrl, When } from './front.js';
import { liveBaseOf } from './live.js';

/** A v2 Node object on the portal: the node's own, with the portal's `farm` object. */
export type FarmNode = NodeStatus & { farm?: { connected: boolean; offline_reason: string | null; version: string | null; last_seen: string | null } };

/** The run in flight of a running job (the portal's jobs table). */
export interface RunningTest {
  test_case: string;
  start_time: string;
}

export interface FarmFrontData {
  nodes: FarmNode[];
  /** job_uid -> the test case running now. */
  running: Map<string, RunningTest>;
}

/** What the page reads: the nodes as the signed-in person (or nobody) sees them. */
export type LoadFarmFront = (ctx: Context) => Promise<FarmFrontData>;

/** The farm-wide results list filtered to one node: free text on the result ids' first segment. */
export const nodeResultsUrl = (nodeId: string): string => `/app/results?filter=${encodeURIComponent(`/${nodeId}/`)}`;

function NodeRow({ n, running }: { n: FarmNode; running: Map<string, RunningTest> }): VNode {
  const job = n.job;
  const c = job?.result_counts;
  const now = job?.status === 'running' ? running.get(job.job_uid) : undefined;
  const r = n.reservation;
  return (
    <tr id={`node-${n.node_id}`} data-node-id={n.node_id} data-online={n.online ? 'yes' : 'no'}>
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
      </th>
      <td class="node-state">
        <span class={`node-online ${n.online ? 'online' : 'offline'}`}>
          <strong>{n.online ? 'Online' : 'Offline'}</strong>
        </span>
        {n.available ? ', available.' : <span class="reason">: {n.not_available_reason ?? 'unknown reason'}.</span>}
        {n.farm?.last_seen && !n.farm.connected ? (
          <>
            {' '}
            Last seen <When iso={n.farm.last_seen} />.
          </>
        ) : null}
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
        {data.nodes.length} {data.nodes.length === 1 ? 'node' : 'nodes'}, {online} online. <a href="/app/results">Results of every node</a>
      </p>
      <div id="farm-nodes">
        {data.nodes.length ? (
          <table class="farm-nodes">
            <caption class="visually-hidden">The nodes of the farm</caption>
            <thead>
              <tr>
                <th scope="col">Node</th>
                <th scope="col">State</th>
                <th scope="col">Reservation</th>
                <th scope="col">Job</th>
                <th scope="col">Pages</th>
              </tr>
            </thead>
            <tbody>
              {data.nodes.map((n) => (
                <NodeRow n={n} running={data.running} />
              ))}
            </tbody>
          </table>
        ) : (
          <p>
            No node is registered yet: <code>farmhand farm node add &lt;node_id&gt;</code> makes one.
          </p>
        )}
      </div>
      <p class="live-status" id="live-status" aria-live="polite"></p>
    </div>
  );
}

export function farmFrontRouter(load: LoadFarmFront): Router {
  const r = new Router();
  r.get('/', async (ctx) => {
    const data = await load(ctx);
    sendPage(ctx, <FarmFront data={data} />, { title: 'Farm', section: 'node', scripts: ['farm.js'], farm: true });
  });
  // The node's pages link their navigation's "Live & remote" here: on a farm, each node has its own (`/app/nodes/<id>/live`).
  r.get('/app/live', (ctx) => {
    ctx.status = 303;
    ctx.redirect('/');
  });
  return r;
}

