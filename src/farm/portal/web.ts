/**
 * The farm's web pages on the portal (docs/farm.md, "Web pages on the portal"):
 * the node's page components (src/web/pages/) fed with the farm's data.
 *
 * - `/`: every node, from the data of `GET /api/v2/nodes` (listFarmNodeViews) and
 *   the test case each running job is on (the jobs table).
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
import { farmFrontRouter, type FarmNode, type RunningTest } from '../../web/pages/farm.js';
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

export function portalWebRouters(d: PortalWebDeps): Router[] {
  const load = async (ctx: Context) => {
    const views = await listFarmNodeViews(d, userOf(ctx)?.login ?? 'anonymous', portalBaseUrl(ctx, d.publicUrl));
    const nodes = views.map((v): FarmNode => ({ ...(v.node as FarmNode), availability: v.availability, ...(v.testUser && { test_user: v.testUser }) }));
    const { rows } = await d.pool.query<{ job_uid: string; current_run: RunningTest | null }>(
      `SELECT job_uid, current_run FROM jobs WHERE state = 'running' AND current_run IS NOT NULL`,
    );
    const login = userOf(ctx)?.login;
    return { nodes, running: new Map(rows.map((r) => [r.job_uid, r.current_run!])), ...(login !== undefined && { login }) };
  };
  return [farmFrontRouter(load), resultsRouter(farmResultsSource(d.results))];
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
