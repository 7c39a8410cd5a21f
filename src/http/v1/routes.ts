/**
 * The v1 API of a single appliance: no node id in paths, no credentials by
 * default (COMPAT.md), `job_id` still answered by run_tests. Handlers are
 * short: validate, one service call, present.
 */
import Router from '@koa/router';
import { parseResultQuery } from '../../core/query.js';
import { parseRunRequest } from '../../core/runRequest.js';
import { baseUrl, callerOf, type Services } from '../context.js';
import { presentJob, presentResultSummary, presentV1RunTests } from '../presenters.js';
import { jobFromParams } from '../params.js';
import { mountResultRoutes } from '../resultRoutes.js';
import { mount } from '../endpoints/mount.js';
import { checkedBody } from '../endpoints/validate.js';
import { V1RunTestsRequest } from '../openapi/schemas.js';

const JOB = '/api/v1/jobs/:node/:hex/:num';

export function v1Router(s: Services): Router {
  const r = new Router();

  mount(r, 'GET /api/v1/device/screenshot.png', async (ctx) => {
    ctx.type = 'image/png';
    ctx.body = await s.policy.picture(callerOf(ctx, 'v1'), 'screenshot');
  });
  mount(r, 'GET /api/v1/device/thumbnail.jpg', async (ctx) => {
    ctx.type = 'image/jpeg';
    ctx.body = await s.policy.picture(callerOf(ctx, 'v1'), 'thumbnail');
  });

  mount(r, 'GET /api/v1/test_pack/*rev/test_case_names', async (ctx) => {
    const rev = await s.testPack.resolve(String((ctx.params).rev), { fresh: true });
    ctx.body = await s.testPack.testCaseNames(rev.sha);
  });

  mount(r, 'POST /api/v1/run_tests', async (ctx) => {
    // The same policy as v2: licence, reservation (a v2 reservation holds the node for v1 clients too), busy, online.
    const started = await s.policy.runTests(callerOf(ctx, 'v1'), parseRunRequest(checkedBody(ctx, V1RunTestsRequest), 'v1'));
    ctx.body = presentV1RunTests(started.value, baseUrl(ctx, s));
  });

  mount(r, `GET ${JOB}`, (ctx) => {
    ctx.body = presentJob(jobFromParams(ctx, s), baseUrl(ctx, s), 'v1');
  });

  mount(r, `POST ${JOB}/stop`, async (ctx) => {
    const { value } = await s.policy.stop(callerOf(ctx, 'v1'), jobFromParams(ctx, s).job_uid);
    ctx.status = value.stopped ? 200 : 202;
    ctx.body = presentJob(value.job, baseUrl(ctx, s), 'v1');
  });

  mount(r, `GET ${JOB}/results`, (ctx) => {
    const job = jobFromParams(ctx, s);
    const q = parseResultQuery({ ...ctx.query, filter: `job:${job.job_uid}` });
    ctx.body = s.results.query(q).map((x) => presentResultSummary(x, baseUrl(ctx, s), 'v1'));
  });

  mount(r, 'GET /api/v1/results', (ctx) => {
    const q = parseResultQuery(ctx.query);
    const base = baseUrl(ctx, s);
    ctx.body = s.results.query(q).map((x) => presentResultSummary(x, base, 'v1'));
  });

  mountResultRoutes(r, '/api/v1/result', 'v1', s);
  return r;
}
