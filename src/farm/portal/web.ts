/**
 * The farm's web pages on the portal (docs/farm.md, "Web pages on the portal"):
 * the node's page components (src/web/pages/) fed with the farm's data.
 *
 * - `/`: every node, from the data of `GET /api/v2/nodes` (listFarmNodes) and
 *   the test case each running job is on (the jobs table).
 * - `/app/results` and its live row: the node's results list over the farm's
 *   index in PostgreSQL (FarmResults), with a Node column.
 *
 * Sign-in and the static files are mounted by the app (app.ts); the node
 * pages (result, job, live view) are forwarded by routes.ts.
 */
import type Router from '@koa/router';
import type { Context } from 'koa';
import { setTimeout as delay } from 'node:timers/promises';
import type pg from 'pg';
import { userOf } from '../../http/auth.js';
import { farmFrontRouter, type FarmNode, type RunningTest } from '../../web/pages/farm.js';
import { resultsRouter, type ResultsSource } from '../../web/pages/results.js';
import type { FarmHub, FarmReservations } from '../contract.js';
import type { FarmResults } from '../results.js';
import { listFarmNodes, portalBaseUrl } from './routes.js';

export interface PortalWebDeps {
  pool: pg.Pool;
  hub: FarmHub;
  reservations?: FarmReservations;
  results: Pick<FarmResults, 'query' | 'get'>;
  publicUrl?: string;
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
    const nodes = (await listFarmNodes(d, userOf(ctx)?.login ?? 'anonymous', portalBaseUrl(ctx, d.publicUrl))) as FarmNode[];
    const { rows } = await d.pool.query<{ job_uid: string; current_run: RunningTest | null }>(
      `SELECT job_uid, current_run FROM jobs WHERE state = 'running' AND current_run IS NOT NULL`,
    );
    return { nodes, running: new Map(rows.map((r) => [r.job_uid, r.current_run!])) };
  };
  return [farmFrontRouter(load), resultsRouter(farmResultsSource(d.results))];
}
