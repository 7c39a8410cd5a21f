/**
 * The farm's web pages on the portal (docs/farm.md, "Web pages on the portal"):
 * the node's page components (src/web/pages/) fed with the farm's data.
 *
 * - `/`: every node, from the data of `GET /api/v2/nodes` (listFarmNodeViews) and
 *   the test case each running job is on (the jobs table), with its labels
 *   (node_labels); `?labels=k=v,...` keeps the nodes with all of them.
 * - `/app/wall`: the same nodes as tiles, their pictures over `/app/wall/frames`
 *   (wallFrames.ts); `/app/queue`: the queue per label set (PgJobQueue list and
 *   explain, with each node's availability as the dispatcher sees it).
 * - `/app/results` and its live row: the node's results list over the farm's
 *   index in PostgreSQL (FarmResults), with a Node column.
 *
 * - `/app/results/<result_id>` of a node that is offline: the node's result
 *   page rendered from the portal's storage (storedResultPageRouter, mounted
 *   before routes.ts forwards it), with the log from storage too.
 *
 * - `/app/jobs/<job_uid>` of a node that is offline: the node's job page
 *   rendered from the jobs table and the farm's index (storedJobPageRouter,
 *   mounted before routes.ts forwards it).
 *
 * Sign-in and the static files are mounted by the app (app.ts); the node
 * pages (result, job, live view) are forwarded by routes.ts.
 */
import Router from '@koa/router';
import type { Context, Next } from 'koa';
import { setTimeout as delay } from 'node:timers/promises';
import type pg from 'pg';
import { FarmError } from '../../core/errors.js';
import type { ResultRecord } from '../../core/model.js';
import { parseResultQuery, parseTimeZone } from '../../core/query.js';
import { userOf } from '../../http/auth.js';
import { sendFile } from '../../http/files.js';
import { resultIdFromParams } from '../../http/params.js';
import { presentResultDetail } from '../../http/presenters.js';
import { LOG_NAMES } from '../../http/resultRoutes.js';
import { historyOf, type History } from '../../web/result-data.js';
import { sendJobPage } from '../../web/pages/job.js';
import { resultPageData, sendLogVtt, sendResultPage, type ResultPageSource } from '../../web/pages/result.js';
import { farmFrontRouter, type FarmFrontData, type FarmNode, type LabelFilter, type RunningTest } from '../../web/pages/farm.js';
import { queuePageRouter, type QueuePageData, type QueueSetSummary } from '../../web/pages/queue.js';
import { wallRouter } from '../../web/pages/wall.js';
import { matches, parseSelector, selectorText, type Labels } from '../../core/queue.js';
import { endpointOf } from '../../http/endpoints/table.js';
import { farmNodeStates } from '../queue/adapters.js';
import { allNodeLabels } from '../queue/labels.js';
import { PgJobQueue, type QueuedJob } from '../queue/store.js';
import { WallFrames, wallFramesRouter } from './wallFrames.js';
import { resultsRouter, type ResultsSource } from '../../web/pages/results.js';
import type { FarmHub, FarmReservations } from '../contract.js';
import { presentFarmJob, type FarmJobs } from '../jobs.js';
import type { FarmResults } from '../results.js';
import type { StoredResults } from '../storedResults.js';
import { listFarmNodeViews, portalBaseUrl } from './routes.js';
import { isHere } from './nodePlace.js';
import { mount } from '../../http/endpoints/mount.js';

export interface PortalWebDeps {
  pool: pg.Pool;
  hub: FarmHub;
  reservations?: FarmReservations;
  results: Pick<FarmResults, 'query' | 'get'>;
  publicUrl?: string;
  /** Replicas "many": this replica's id (nodeViews.ts). */
  replicaId?: string;
}

/** How often a live row's wait looks for its result in the index. */
const ROW_POLL_MS = 200;

/** The farm-wide results for the node's results list: the index in PostgreSQL; a just-finished run waits for its upload. */
export function farmResultsSource(results: Pick<FarmResults, 'query' | 'get'>): ResultsSource {
  return {
    farm: true,
    query: (q) => results.query(q),
    async get(id, o) {
      const until = Date.now() + (o?.waitMs ?? 0);
      for (;;) {
        const rec = await results.get(id);
        if (rec || Date.now() >= until) return rec;
        await delay(ROW_POLL_MS);
      }
    },
  };
}

/** A page's `?labels=k=v,...`: the selector, or the text and what is wrong with it (the page says it beside the box, 400). */
export function labelFilterOf(ctx: Context): { selector?: Labels; filter?: LabelFilter } {
  const raw = ctx.query.labels;
  const text = (Array.isArray(raw) ? raw.join(',') : (raw ?? '')).trim();
  if (text === '') return {};
  try {
    const selector = parseSelector(text, 'labels');
    return { selector, filter: { text: selectorText(selector) } };
  } catch (e) {
    if (!(e instanceof FarmError)) throw e;
    return { filter: { text, error: e.message } };
  }
}

export function portalWebRouters(d: PortalWebDeps): Router[] {
  const load = async (ctx: Context): Promise<FarmFrontData> => {
    const { selector, filter } = labelFilterOf(ctx);
    const [views, labels] = await Promise.all([listFarmNodeViews(d, userOf(ctx)?.login ?? 'anonymous', portalBaseUrl(ctx, d.publicUrl)), allNodeLabels(d.pool)]);
    const all = views.map((v): FarmNode => ({ ...(v.node as FarmNode), availability: v.availability, labels: labels.get(String(v.node.node_id)) ?? {}, ...(v.testUser && { test_user: v.testUser }) }));
    const nodes = selector ? all.filter((n) => matches(n.labels ?? {}, selector)) : all;
    const { rows } = await d.pool.query<{ job_uid: string; current_run: RunningTest | null }>(
      `SELECT job_uid, current_run FROM jobs WHERE state = 'running' AND current_run IS NOT NULL`,
    );
    const login = userOf(ctx)?.login;
    return { nodes, total: all.length, running: new Map(rows.map((r) => [r.job_uid, r.current_run!])), ...(login !== undefined && { login }), ...(filter && { filter }) };
  };
  const frames = new WallFrames({ hub: d.hub });
  return [
    farmFrontRouter(load),
    resultsRouter(farmResultsSource(d.results)),
    wallRouter(load),
    wallFramesRouter({ pool: d.pool, frames, publicUrl: d.publicUrl }),
    queuePageRouter(queuePageLoader(d)),
  ];
}

/** Whether the portal serves the cancel of a queued job (the queue API): the page's Cancel buttons call it. */
const CANCEL_KEYS = ['/api/v2/queue/:queue_id', '/api/v2/queue/:id'];
const cancelApi = (): boolean => CANCEL_KEYS.some((p) => endpointOf('DELETE', p)?.served !== undefined && endpointOf('DELETE', p)!.served !== 'node');

/** The queue pages' data: every label set with waiting jobs, or one set's jobs explained. */
function queuePageLoader(d: PortalWebDeps): (ctx: Context) => Promise<QueuePageData> {
  const queue = new PgJobQueue(d.pool);
  const states = farmNodeStates({ pool: d.pool, hub: d.hub, reservations: d.reservations, replicaId: d.replicaId });
  return async (ctx) => {
    const { selector, filter } = labelFilterOf(ctx);
    const [availability, labels] = await Promise.all([states.availability(), allNodeLabels(d.pool)]);
    if (!selector) {
      const waiting = await queue.explain(await queue.list({ states: ['queued'] }), availability);
      return { kind: 'overview', sets: summarise(waiting, labels, availability), ...(filter && { filter }) };
    }
    const jobs = await queue.list({ selector, limit: 20 });
    const waiting = await queue.explain(jobs.filter((j) => j.state === 'queued'), availability);
    const nodes = [...labels].filter(([, l]) => matches(l, selector)).map(([node_id]) => ({ node_id, availability: availability.get(node_id) ?? { kind: 'offline' as const, detail: null } }));
    const user = userOf(ctx);
    const canceller = user && cancelApi() ? { login: user.login, admin: user.role === 'admin' } : undefined;
    return { kind: 'set', filter: filter!, selector: selectorText(selector), waiting, ended: jobs.filter((j) => j.state !== 'queued'), nodes, ...(canceller && { canceller }) };
  };
}

/** The overview's rows: one per label set with waiting jobs, in the order of their first job. */
function summarise(waiting: QueuedJob[], labels: Map<string, Labels>, availability: ReadonlyMap<string, { kind: string }>): QueueSetSummary[] {
  const sets = new Map<string, QueueSetSummary>();
  for (const j of waiting) {
    const s = sets.get(j.selector);
    if (s) {
      s.waiting++;
      if (j.queued_at < s.oldest) s.oldest = j.queued_at;
      continue;
    }
    const mine = [...labels].filter(([, l]) => matches(l, j.labels)).map(([id]) => id);
    const free = mine.filter((id) => availability.get(id)?.kind === 'available').length;
    sets.set(j.selector, { selector: j.selector, waiting: 1, topPriority: j.priority, oldest: j.queued_at, why: j.waiting?.message ?? '', matching: mine.length, free });
  }
  return [...sets.values()];
}

const ID = '/:node/:hex/:num/:stamp';

/** Why a node is offline, as the hub has it. */
const offlineReasonOf = (hub: Pick<FarmHub, 'link'>, nodeId: string): string => hub.link(nodeId)?.offlineReason ?? 'not connected to the portal';

/** The runs of a test case on one node, oldest first, from the farm's index (the node's page shows its own runs). */
async function farmHistory(pool: pg.Pool, record: ResultRecord, nodeId: string): Promise<History> {
  const { rows } = await pool.query<{ result_id: string; result: ResultRecord['result']; start_time: Date; test_pack_sha: string }>(
    `SELECT result_id, result::text AS result, start_time, test_pack_sha FROM results
     WHERE test_case = $1 AND node_id = $2 ORDER BY start_time, result_id`,
    [record.test_case, nodeId],
  );
  return historyOf(
    rows.map((r) => ({ result_id: r.result_id, result: r.result, start_time: r.start_time.toISOString(), test_pack_sha: r.test_pack_sha })),
    record,
  );
}

/**
 * The result page of a node that is offline, from the portal's storage (docs/farm.md, "Web pages on the
 * portal"): the node's page (resultPageData, ResultPage) over StoredResults. A connected node's page is
 * the node's own, forwarded (routes.ts); so is a result not uploaded yet. The log, the result's v1 JSON,
 * screenshot and artifacts the page links to are served from storage once uploaded (the last two by
 * src/farm/resultRoutes.ts).
 */
export function storedResultPageRouter(d: { store: StoredResults; hub: Pick<FarmHub, 'link'>; pool: pg.Pool; publicUrl?: string }): Router {
  const r = new Router();
  /** The uploaded record, when the request is for the portal's copy; undefined passes it on (to the node). */
  const stored = async (ctx: Context, o: { offlineOnly: boolean; what?: 'detail' | 'files' }): Promise<{ record: ResultRecord; nodeId: string } | undefined> => {
    const { id, parsed } = resultIdFromParams(ctx);
    if (!parsed) return undefined;
    if (o.offlineOnly && isHere(d.hub, parsed.job.nodeId)) return undefined;
    const found = await d.store.get(id);
    if (found === 'deleted') throw new FarmError('gone', `result ${id} has been deleted (retention); it is no longer available`);
    if (!found) return undefined;
    // A record sent ahead of its files (docs/farm.md, "The upload protocol"): while its node is connected the
    // node answers (it has the files), except for the detail of a run the portal declared lost (its record stands).
    if (isHere(d.hub, parsed.job.nodeId) && (await d.store.filesOnNode(id))) {
      if (o.what === 'files' || !(await d.store.endedByPortal(found.job_uid))) return undefined;
    }
    return { record: found, nodeId: parsed.job.nodeId };
  };
  const src = (nodeId: string): ResultPageSource => ({
    artifacts: (id) => d.store.artifacts(id),
    openArtifact: (id, rel) => d.store.openArtifact(id, rel),
    history: (record) => farmHistory(d.pool, record, nodeId),
  });

  mount(r, `GET /app/results${ID}`, async (ctx: Context, next: Next): Promise<void> => {
    const s = await stored(ctx, { offlineOnly: true });
    if (!s) {
      await next();
      return;
    }
    const data = await resultPageData(src(s.nodeId), s.record, {
      tz: parseTimeZone(ctx.query.tz),
      nodeId: s.nodeId,
      remote: null,
      signedIn: userOf(ctx) !== undefined,
      offline: offlineReasonOf(d.hub, s.nodeId),
    });
    sendResultPage(ctx, data, { farm: true });
  });
  mount(r, `GET /app/results${ID}/log.vtt`, async (ctx: Context, next: Next): Promise<void> => {
    const s = await stored(ctx, { offlineOnly: true });
    if (!s) {
      await next();
      return;
    }
    await sendLogVtt(ctx, src(s.nodeId), s.record);
  });
  // The v1 reads the page links to, from storage once uploaded (as the screenshot and artifacts are).
  mount(r, `GET /api/v1/result${ID}`, async (ctx: Context, next: Next): Promise<void> => {
    const s = await stored(ctx, { offlineOnly: false });
    if (!s) {
      await next();
      return;
    }
    ctx.body = presentResultDetail(s.record, await d.store.artifacts(s.record.result_id), portalBaseUrl(ctx, d.publicUrl), 'v1');
  });
  for (const name of LOG_NAMES) {
    mount(r, `GET /api/v1/result${ID}/${name}`, async (ctx: Context, next: Next): Promise<void> => {
      const s = await stored(ctx, { offlineOnly: false, what: 'files' });
      if (!s) {
        await next();
        return;
      }
      const file = await d.store.openArtifact(s.record.result_id, 'farmhand.log');
      if (!file) throw new FarmError('not_found', `result ${s.record.result_id} has no log`);
      await sendFile(ctx, file, 'farmhand.log');
    });
  }
  return r;
}

/**
 * The job page of a node that is offline (docs/farm.md, "Web pages on the portal"): the node's page
 * (sendJobPage, src/web/pages/job.tsx) over the portal's jobs table (the Job object, the request's
 * fields, why the portal ended it) and the farm's index (the job's results, newest first). No live
 * tail and no Stop: the page says the node is offline. A connected node's page is the node's own,
 * forwarded (routes.ts).
 */
export function storedJobPageRouter(d: { hub: Pick<FarmHub, 'link'>; jobs: Pick<FarmJobs, 'get'>; results: Pick<FarmResults, 'query'> }): Router {
  const r = new Router();
  mount(r, 'GET /app/jobs/:node/:hex/:num', async (ctx: Context, next: Next): Promise<void> => {
    const { node: nodeId, hex, num } = ctx.params as { node: string; hex: string; num: string };
    // A job the portal has no record of is the node's to answer (forwarded: the hub's 503 while it is offline).
    const row = isHere(d.hub, nodeId) ? undefined : await d.jobs.get(`/${nodeId}/${hex}/${num}`);
    if (!row) {
      await next();
      return;
    }
    const tz = parseTimeZone(ctx.query.tz);
    const job = presentFarmJob(row, '', 'v2');
    const q = row.request;
    const record = {
      number: Number(num),
      username: row.username,
      category: q.category ?? '',
      test_pack_sha: q.test_pack_sha ?? '',
      test_pack_branch: q.test_pack_branch ?? null,
      soak: q.soak === 'run forever' ? ('run forever' as const) : ('run once' as const),
      current_run: row.current_run,
    };
    const results = await d.results.query(parseResultQuery({ filter: `job:${row.job_uid}`, sort: 'date:desc' }));
    sendJobPage(
      ctx,
      { job, record, results, log: undefined, tz, signedIn: userOf(ctx) !== undefined, offline: { nodeId, reason: offlineReasonOf(d.hub, nodeId), endReason: row.end_reason } },
      { farm: true },
    );
  });
  return r;
}
