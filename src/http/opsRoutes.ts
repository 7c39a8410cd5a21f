/**
 * Endpoints for operators and their tools (docs/operations.md):
 * `GET /healthz` (the process answers; constant cost), `GET /readyz` (ready
 * to run tests, every check listed; 503 when not) and `GET /metrics`
 * (Prometheus text format). The HTTP layer knows nothing of Prometheus: it
 * is handed functions.
 */
import Router from '@koa/router';
import type { Readiness } from '../service/readiness.js';
import { mount } from './endpoints/mount.js';

export interface OpsEndpoints {
  version: string;
  /** Every readiness check, run now. */
  readiness: () => Promise<Readiness>;
  /** The Prometheus exposition; absent: no /metrics. */
  metrics?: { contentType: string; scrape: () => Promise<string> };
}

const started = Date.now();

/** `/healthz`'s body: the same answer while starting (daemon.ts) and after. */
export const healthBody = (version: string, starting: boolean) => ({ status: 'ok', version, starting, uptime_seconds: Math.round((Date.now() - started) / 1000) });

export function opsRouter(ops: OpsEndpoints): Router {
  const r = new Router();
  mount(r, 'GET /healthz', (ctx) => {
    ctx.set('Cache-Control', 'no-store');
    ctx.body = healthBody(ops.version, false);
  });
  mount(r, 'GET /readyz', async (ctx) => {
    const readiness = await ops.readiness();
    ctx.set('Cache-Control', 'no-store');
    ctx.status = readiness.ready ? 200 : 503;
    ctx.body = readinessBody(readiness);
  });
  const metrics = ops.metrics;
  if (metrics) {
    mount(r, 'GET /metrics', async (ctx) => {
      const text = await metrics.scrape();
      ctx.set('Cache-Control', 'no-store');
      ctx.type = metrics.contentType;
      ctx.body = text;
    });
  }
  return r;
}

/** 200: `{ready: true, failed: [], checks}`; 503 adds the JSON error fields (`not_ready` and what failed). */
export function readinessBody(r: Readiness): Record<string, unknown> {
  if (r.ready) return { ready: true, failed: [], checks: r.checks };
  const why = r.failed.map((c) => `${c}: ${r.checks[c].detail}`).join('; ');
  return { error: 'not_ready', message: `the node is not ready to run tests (${why})`, ready: false, failed: r.failed, checks: r.checks };
}
