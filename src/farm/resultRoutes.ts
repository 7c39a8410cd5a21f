/**
 * The portal's v2 result endpoints, farm-wide:
 *
 * - `GET /api/v2/results`, `.csv`, `.xml`: from the farm's index in
 *   PostgreSQL (FarmResults), with the node's query parsing
 *   (parseResultQuery) and the node's formats, so the answers are the
 *   node's for the same records.
 * - A result's detail, `farmhand.log`/`stbt.log`, `screenshot.png`,
 *   `artifacts` and artifact files: from the portal's storage once the node
 *   uploaded the result (StoredResults); 410 once the portal deleted it; not
 *   uploaded yet, or only its record so far (its files still on the node),
 *   or a run in progress: passed on to the owning node
 *   (`forward`), which answers as it always does (404 unknown, 410 deleted,
 *   a live log).
 */
import Router from '@koa/router';
import type { Context } from 'koa';
import { FarmError } from '../core/errors.js';
import type { ResultRecord } from '../core/model.js';
import { parseResultQuery, parseTimeZone } from '../core/query.js';
import { openServed, sendFile } from '../http/files.js';
import { resultsCsv } from '../http/formats/csv.js';
import { junitQueryOptions, resultsJunitXml } from '../http/formats/junit.js';
import { createLogTzTransform } from '../http/formats/logTz.js';
import { resultIdFromParams } from '../http/params.js';
import { presentResultDetail, presentResultSummary } from '../http/presenters.js';
import { LOG_NAMES } from '../http/resultRoutes.js';
import type { FarmHub } from './contract.js';
import { answerWith, forwardToNode } from './portal/nodeForward.js';
import type { StoredResults } from './storedResults.js';
import { mount } from '../http/endpoints/mount.js';

/** Pass the request in `ctx` to the node that owns it and answer with the node's response. */
export type ForwardToNode = (nodeId: string, ctx: Context) => Promise<void>;

export interface FarmResultRoutesOptions {
  store: StoredResults;
  forward: ForwardToNode;
  /** Absolute base URL of the portal for result_url etc.; default each request's own. */
  publicUrl?: string;
}

const ID = '/:node/:hex/:num/:stamp';

export function farmResultRouter(o: FarmResultRoutesOptions): Router {
  const r = new Router();
  const base = (ctx: Context): string => (o.publicUrl ?? `${ctx.protocol}://${ctx.host}`).replace(/\/+$/, '');
  const index = o.store.index;

  mount(r, 'GET /api/v2/results', async (ctx) => {
    const q = parseResultQuery(ctx.query);
    const b = base(ctx);
    // Only the summary's fields are read (querySummaries): the list's JSON is the same, in half the time.
    ctx.body = (await index.querySummaries(q)).map((x) => presentResultSummary(x, b, 'v2'));
  });

  mount(r, 'GET /api/v2/results.csv', async (ctx) => {
    const q = parseResultQuery(ctx.query);
    const rows = await index.query(q);
    ctx.type = 'text/csv; charset=utf-8';
    ctx.body = resultsCsv(rows, { base: base(ctx), tz: q.tz });
  });

  mount(r, 'GET /api/v2/results.xml', async (ctx) => {
    const q = parseResultQuery(ctx.query);
    // include_tz and junit_classname: the entry's portalCheck (schemas.ts JunitQuery) answered a bad one.
    const xml = junitQueryOptions(ctx.query);
    const rows = await index.query(q);
    ctx.type = 'application/xml; charset=utf-8';
    ctx.body = resultsJunitXml(rows, { ...xml, tz: q.tz });
  });

  /** The uploaded record, or undefined once the request was forwarded to the node. */
  const uploaded = async (ctx: Context, what: 'detail' | 'files' = 'files'): Promise<ResultRecord | undefined> => {
    const { id, parsed } = resultIdFromParams(ctx);
    if (!parsed) throw new FarmError('not_found', `no result ${id}`);
    const found = await o.store.get(id);
    if (found === 'deleted') throw new FarmError('gone', `result ${id} has been deleted (retention); it is no longer available`);
    if (found && !(await o.store.filesOnNode(id))) return found;
    // The portal's account of a run it declared lost stands, for the detail too: not the late node's.
    if (found && what === 'detail' && (await o.store.endedByPortal(found.job_uid))) return found;
    if (found) {
      // A record uploaded before its files (or the portal's own account of a lost run): the node has
      // the files. A node that is not connected leaves what the portal holds: the record, the files
      // it received so far (a result stays readable when its node is off).
      try {
        await o.forward(parsed.job.nodeId, ctx);
        return undefined;
      } catch (e) {
        if (e instanceof FarmError && e.code === 'device_unavailable') return found;
        throw e;
      }
    }
    await o.forward(parsed.job.nodeId, ctx);
    return undefined;
  };

  mount(r, `GET /api/v2/results${ID}`, async (ctx) => {
    const rec = await uploaded(ctx, 'detail');
    if (rec) ctx.body = presentResultDetail(rec, await o.store.artifacts(rec.result_id), base(ctx), 'v2');
  });

  for (const name of LOG_NAMES) {
    mount(r, `GET /api/v2/results${ID}/${name}`, async (ctx) => {
      const rec = await uploaded(ctx);
      if (!rec) return;
      const file = await o.store.openArtifact(rec.result_id, 'farmhand.log');
      if (!file) throw new FarmError('not_found', `result ${rec.result_id} has no log`);
      // v2's log takes `tz` (default UTC) for its timestamps, as on the node.
      const tz = parseTimeZone(ctx.query.tz);
      if (tz === 'UTC') return sendFile(ctx, file, 'farmhand.log');
      ctx.type = 'text/plain; charset=utf-8';
      const fh = await openServed(file.path);
      ctx.body = fh.createReadStream().pipe(createLogTzTransform(tz));
    });
  }

  // The web pages (the node's result page and results list, seen through the portal) read a result's files
  // through v1, which is open to readers: the same answers from the portal's storage (else the node).
  mount(r, [`GET /api/v2/results${ID}/screenshot.png`, `GET /api/v1/result${ID}/screenshot.png`], async (ctx) => {
    const rec = await uploaded(ctx);
    if (!rec) return;
    const file = await o.store.openArtifact(rec.result_id, 'screenshot.png');
    if (!file) throw new FarmError('not_found', `result ${rec.result_id} has no screenshot (the capture was offline when it ended)`);
    await sendFile(ctx, file, 'screenshot.png');
  });

  mount(r, `GET /api/v2/results${ID}/artifacts`, async (ctx) => {
    const rec = await uploaded(ctx);
    if (rec) ctx.body = await o.store.artifacts(rec.result_id);
  });

  mount(r, [`GET /api/v2/results${ID}/artifacts/*path`, `GET /api/v1/result${ID}/artifacts/*path`], async (ctx) => {
    const rec = await uploaded(ctx);
    if (!rec) return;
    const rel = String((ctx.params).path);
    const file = await o.store.openArtifact(rec.result_id, rel);
    if (!file) throw new FarmError('not_found', `result ${rec.result_id} has no artifact ${JSON.stringify(rel)}`);
    await sendFile(ctx, file, rel);
  });

  return r;
}

/** `forward` for farmResultRouter through the hub's connection to the node, as the caller: the one forward (src/farm/portal/nodeForward.ts). */
export function forwardThroughHub(hub: Pick<FarmHub, 'forward'>, publicUrl?: string): ForwardToNode {
  return async (nodeId, ctx) => {
    answerWith(ctx, await forwardToNode(hub, ctx, nodeId, publicUrl), publicUrl);
  };
}
