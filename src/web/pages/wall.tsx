/**
 * The farm's video wall, `/app/wall` on the portal (docs/video-wall.md): a tile per node with its live
 * thumbnail (about one picture a second), its state, its job and its labels; `?labels=k=v,...` shows only the
 * nodes with all of them; a tile opens the node's live view and remote. The tiles' text is rendered here (and
 * swapped by `/static/wall.js` on the portal's events); the pictures come over one event stream
 * (`/app/wall/frames?nodes=...`, src/farm/portal/wallFrames.ts) for the tiles on screen only, so a wall in a
 * background tab or scrolled out of view costs the nodes nothing.
 */
import Router from '@koa/router';
import type { VNode } from 'preact';
import { mount } from '../../http/endpoints/mount.js';
import { sendPage } from '../layout.js';
import { LabelChips, LabelFilterForm, withLabels, type FarmFrontData, type FarmNode, type LoadFarmFront, type RunningTest } from './farm.js';
import { jobPageUrl } from './front.js';
import { liveBaseOf } from './live.js';

/** What a tile says of the node's state: a word for its availability, and the detail. */
function stateOf(n: FarmNode): { kind: string; text: string } {
  const a = n.availability;
  if (a) {
    const words: Record<string, string> = {
      available: 'Available',
      offline: 'Offline',
      running: 'Running a job',
      reserved: 'Reserved',
      maintenance: 'In maintenance',
      unhealthy: 'Unhealthy',
      licence_expired: 'Licence expired',
    };
    const detail = a.kind === 'running' || a.kind === 'available' ? '' : a.kind === 'reserved' ? ` by ${n.reservation?.username ?? a.detail ?? ''}` : a.detail ? `: ${a.detail}` : '';
    return { kind: a.kind, text: `${words[a.kind] ?? a.kind}${detail}` };
  }
  return n.online ? { kind: n.available ? 'available' : 'busy', text: n.available ? 'Available' : (n.not_available_reason ?? 'Busy') } : { kind: 'offline', text: 'Offline' };
}

function TileInfo({ n, running }: { n: FarmNode; running: Map<string, RunningTest> }): VNode {
  const s = stateOf(n);
  const job = n.job;
  const now = job?.status === 'running' ? running.get(job.job_uid) : undefined;
  return (
    <div class="wall-info" id={`tile-info-${n.node_id}`} data-state={s.kind}>
      <span class={`wall-state ${s.kind}`}>{s.text}</span>
      {job && job.status === 'running' ? (
        <span class="wall-job">
          {' '}
          · <a href={jobPageUrl(job.job_uid)}>job {job.job_uid.slice(job.job_uid.lastIndexOf('/') + 1)}</a>
          {now ? (
            <>
              {' '}
              <code class="current-test">{now.test_case.slice(now.test_case.lastIndexOf('::') + 2 || 0)}</code>
            </>
          ) : null}
        </span>
      ) : null}
      <LabelChips labels={n.labels} path="/app/wall" />
    </div>
  );
}

function Tile({ n, running }: { n: FarmNode; running: Map<string, RunningTest> }): VNode {
  const name = n.friendly_name ?? n.node_id;
  return (
    <li class="wall-tile" data-node-id={n.node_id}>
      <a class="wall-open" href={liveBaseOf(n.node_id)} aria-label={`${name}: open its live view and remote`}>
        <span class="wall-frame">
          <img class="wall-picture" alt={`Live picture of ${name}`} width={320} height={180} hidden />
          <span class="wall-nopicture">{n.online ? 'Waiting for a picture' : 'No picture: offline'}</span>
        </span>
        <span class="wall-name">{name}</span>
      </a>
      <TileInfo n={n} running={running} />
    </li>
  );
}

function Wall({ data }: { data: FarmFrontData }): VNode {
  const f = data.filter?.text && !data.filter.error ? data.filter.text : '';
  return (
    <div id="wall">
      <h1>Video wall</h1>
      <p id="wall-summary">
        {data.nodes.length} {data.nodes.length === 1 ? 'node' : 'nodes'}
        {f ? ` with ${f} (of ${data.total ?? data.nodes.length})` : ''}, {data.nodes.filter((n) => n.online).length} online. A picture about every second for
        the tiles on screen; a tile opens the node. <a href={f ? withLabels('/', f) : '/'}>As a table</a>
        {f ? (
          <>
            {' '}
            · <a href={withLabels('/app/queue', f)}>Their queue</a>
          </>
        ) : null}
      </p>
      <LabelFilterForm filter={data.filter} action="/app/wall" id="wall-filter" />
      <noscript>The pictures need JavaScript; the states and jobs are above each tile&rsquo;s name.</noscript>
      {data.nodes.length ? (
        <ul class="wall-tiles" id="wall-tiles">
          {data.nodes.map((n) => (
            <Tile n={n} running={data.running} />
          ))}
        </ul>
      ) : (
        <p class="no-match">{f ? `No node has the labels ${f}.` : 'No node is registered yet.'}</p>
      )}
      <p class="live-status" id="live-status" aria-live="polite"></p>
    </div>
  );
}

export function wallRouter(load: LoadFarmFront): Router {
  const r = new Router();
  mount(r, 'GET /app/wall', async (ctx) => {
    const data = await load(ctx);
    sendPage(ctx, <Wall data={data} />, { title: 'Video wall', scripts: ['wall.js'], farm: true }, data.filter?.error ? 400 : 200);
  });
  return r;
}
