/**
 * The v2 API answered for this one node: the same services as v1, with
 * v2's request schemas (node_id, tags) and presenters (triage_url, branch,
 * username, tags). Any node id but ours is a 404.
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { FarmError } from '../../core/errors.js';
import type { JobRecord } from '../../core/model.js';
import { parseResultQuery, parseTimeZone } from '../../core/query.js';
import { parseRunRequest } from '../../core/runRequest.js';
import { bodyOf } from '../body.js';
import { baseUrl, callerOf, userOf, type Services } from '../context.js';
import { presentJob, presentResultSummary } from '../presenters.js';
import { resultsCsv } from '../formats/csv.js';
import { junitQueryOptions, resultsJunitXml } from '../formats/junit.js';
import { createLogTzTransform } from '../formats/logTz.js';
import { jobFromParams } from '../params.js';
import { mountResultRoutes } from '../resultRoutes.js';
import { mountNodeRoutes, withNotices } from './nodeRoutes.js';
import { mountPowerRoutes } from './power.js';
import { mount } from '../endpoints/mount.js';
import { checkedBody } from '../endpoints/validate.js';
import { PressRequest, V2RunTestsCheck } from '../openapi/schemas.js';

const JOB = '/api/v2/jobs/:node/:hex/:num';
const NODE = '/api/v2/nodes/:node_id';

export function v2Router(s: Services): Router {
  const r = new Router();
  const present = (ctx: Context, job: JobRecord) => presentJob(job, baseUrl(ctx, s), 'v2');
  const caller = (ctx: Context) => callerOf(ctx, 'v2');
  const ourNode = (ctx: Context) => {
    const id = (ctx.params as Record<string, string>).node_id;
    if (id !== s.nodeId) throw new FarmError('not_found', `no node ${JSON.stringify(id)}; this node is ${s.nodeId}`);
    return id;
  };
  const jobOf = (ctx: Context) => jobFromParams(ctx, s);
  const nodeJob = (ctx: Context) => {
    ourNode(ctx);
    const job = s.jobs.current();
    if (!job) throw new FarmError('not_found', `node ${s.nodeId} has never run a job`);
    return job;
  };

  mount(r, `GET ${NODE}/screenshot.png`, async (ctx) => {
    ourNode(ctx);
    ctx.type = 'image/png';
    ctx.body = await s.policy.picture(caller(ctx), 'screenshot');
  });
  mount(r, `GET ${NODE}/thumbnail.jpg`, async (ctx) => {
    ourNode(ctx);
    ctx.type = 'image/jpeg';
    ctx.body = await s.policy.picture(caller(ctx), 'thumbnail');
  });

  // COMPAT: manual remote control. The same path as a test script's press(): remote, encoder, transport.
  // The body is checked before this runs (the table's PressRequest).
  mount(r, `POST ${NODE}/press`, async (ctx) => {
    ourNode(ctx);
    const b = checkedBody(ctx, PressRequest);
    await s.policy.press(caller(ctx), b.key, { revision: b.test_pack_revision ?? undefined, remote: b.remote_control ?? null });
    ctx.status = 204;
  });

  // Maintenance (admin, from the table of endpoints): docs/api-notes.md, "Maintenance".
  mount(r, `POST ${NODE}/maintenance`, async (ctx) => {
    const node_id = ourNode(ctx);
    const maintenance = await s.policy.setMaintenance(caller(ctx), bodyOf(ctx));
    ctx.body = { node_id, maintenance };
  });

  mount(r, 'GET /api/v2/test_pack/*rev/test_case_names', async (ctx) => {
    const rev = await s.testPack.resolve(String((ctx.params).rev), { fresh: true });
    ctx.body = await s.testPack.testCaseNames(rev.sha);
  });

  // The body's shape is checked before this runs (the table's V2RunTestsCheck); a node other than this one is a 404.
  mount(r, 'POST /api/v2/run_tests', async (ctx) => {
    const body = checkedBody(ctx, V2RunTestsCheck);
    if (body.node_id !== s.nodeId) throw new FarmError('not_found', `no node ${JSON.stringify(body.node_id)}; this node is ${s.nodeId}`);
    const started = await s.policy.runTests(caller(ctx), parseRunRequest(body, 'v2'), idempotencyKey(ctx));
    ctx.body = withNotices(present(ctx, started.value), started);
  });

  mount(r, `GET ${JOB}`, (ctx) => {
    ctx.body = present(ctx, jobOf(ctx));
  });
  mount(r, `GET ${NODE}/job`, (ctx) => {
    ctx.body = present(ctx, nodeJob(ctx));
  });

  // Not in the spec: the job's own log, the node's job.log_url until its first run starts (presenters.ts
  // jobLogUrl). The log of the run in progress, else of the job's latest run (a redirect, query kept: `tz`);
  // an empty log so far while the job has had no run. Never cached: where it leads changes as the job runs.
  mount(r, `GET ${JOB}/log`, (ctx) => {
    const job = jobOf(ctx);
    const run = job.current_run?.result_id ?? s.results.query(parseResultQuery({ filter: `job:${job.job_uid}` }, { limit: 1 }))[0]?.result_id;
    ctx.set('Cache-Control', 'no-store');
    if (run === undefined) {
      ctx.type = 'text/plain; charset=utf-8';
      ctx.body = '';
      return;
    }
    const to = `/api/v2/results${run}/farmhand.log${ctx.querystring ? `?${ctx.querystring}` : ''}`;
    ctx.status = 302;
    ctx.set('Location', to);
    ctx.type = 'text/plain; charset=utf-8';
    ctx.body = `the log of run ${run}: ${to}\n`;
  });

  const awaitCompletion = async (ctx: Context, job: JobRecord) => {
    ctx.status = (await waitForEnd(ctx, s, job)) ? 200 : 202;
    ctx.body = present(ctx, s.jobs.get(job.job_uid) ?? job);
  };
  mount(r, `GET ${JOB}/await_completion`, (ctx) => awaitCompletion(ctx, jobOf(ctx)));
  mount(r, `GET ${NODE}/job/await_completion`, async (ctx) => {
    ourNode(ctx);
    const job = s.jobs.current();
    if (!job) {
      // "returns 200 at once if no job is in progress" - and there has never been one.
      ctx.body = { job_uid: null, status: 'exited' };
      return;
    }
    await awaitCompletion(ctx, job);
  });

  const stop = async (ctx: Context, job: JobRecord) => {
    const done = await s.policy.stop(caller(ctx), job.job_uid);
    ctx.status = done.value.stopped ? 200 : 202;
    ctx.body = withNotices(present(ctx, done.value.job), done);
  };
  mount(r, `PUT ${JOB}/stop`, (ctx) => stop(ctx, jobOf(ctx)));
  mount(r, `POST ${JOB}/stop`, (ctx) => stop(ctx, jobOf(ctx)));
  mount(r, `POST ${NODE}/job/stop`, (ctx) => stop(ctx, nodeJob(ctx)));

  mount(r, 'GET /api/v2/results', (ctx) => {
    const q = parseResultQuery(ctx.query);
    const base = baseUrl(ctx, s);
    ctx.body = s.results.query(q).map((x) => presentResultSummary(x, base, 'v2'));
  });

  mount(r, 'GET /api/v2/results.csv', (ctx) => {
    const q = parseResultQuery(ctx.query);
    ctx.type = 'text/csv; charset=utf-8';
    ctx.body = resultsCsv(s.results.query(q), { base: baseUrl(ctx, s), tz: q.tz });
  });

  mount(r, 'GET /api/v2/results.xml', (ctx) => {
    const q = parseResultQuery(ctx.query);
    // include_tz and junit_classname: the entry's query check (schemas.ts JunitQuery) answered a bad one.
    const xml = junitQueryOptions(ctx.query);
    ctx.type = 'application/xml; charset=utf-8';
    ctx.body = resultsJunitXml(s.results.query(q), { ...xml, tz: q.tz });
  });

  mount(r, 'GET /api/v2/user', (ctx) => {
    ctx.body = { login: userOf(ctx) ?? 'anonymous' };
  });

  // v2's log takes `tz` (default UTC) for its timestamps.
  mountNodeRoutes(r, s);
  mountPowerRoutes(r, s);
  mountResultRoutes(r, '/api/v2/results', 'v2', s, (ctx) => {
    const tz = parseTimeZone(ctx.query.tz);
    return tz === 'UTC' ? undefined : createLogTzTransform(tz);
  });
  return r;
}

/** Hold the request until the job ends or the hold time passes; false = still running. */
async function waitForEnd(ctx: Context, s: Services, job: JobRecord): Promise<boolean> {
  if (job.status === 'exited') return true;
  let timer: NodeJS.Timeout | undefined;
  let onClose: (() => void) | undefined;
  const held = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), s.awaitCompletionSecs * 1000);
    onClose = () => resolve(false); // the client went away: stop holding
    ctx.res.once('close', onClose);
  });
  try {
    return await Promise.race([s.jobs.whenEnded(job.job_uid).then(() => true), held]);
  } finally {
    clearTimeout(timer);
    if (onClose) ctx.res.off('close', onClose);
  }
}

/**
 * The request's `Idempotency-Key` (docs/api-notes.md, "Idempotency-Key"): up to 255 visible ASCII characters; absent,
 * undefined. Anything else is a 400 before the job is looked at.
 */
function idempotencyKey(ctx: Context): string | undefined {
  const key = ctx.get('Idempotency-Key');
  if (key === '') return undefined;
  if (!/^[\x21-\x7e]{1,255}$/.test(key)) {
    throw new FarmError('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters (no spaces), e.g. a UUID; leave it out to start a job every time');
  }
  return key;
}
