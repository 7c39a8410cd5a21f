/**
 * The daemon's web interface, for people: for now the triage page of a
 * result (`triage_url`), plain HTML with its fields, log, screenshot, video and
 * artifact links. Its links go to the v1 reads, which a browser can follow
 * without a token. With `auth.v1_requires_token` the page and its links need
 * one, like v1: `guardApi` (auth.ts) covers `/app/...` too (docs/auth.md).
 */
import Router from '@koa/router';
import { parseTimeZone } from '../core/query.js';
import { baseUrl, type Services } from './context.js';
import { openServed } from './files.js';
import { resultFromParams, runInProgress } from './resultRoutes.js';
import { runningPage, triagePage } from './triage.js';

export function webRouter(s: Services): Router {
  const r = new Router();
  r.get('/app/results/:node/:hex/:num/:stamp', async (ctx) => {
    const tz = parseTimeZone(ctx.query.tz);
    const live = runInProgress(ctx, s);
    if (live) {
      ctx.type = 'text/html; charset=utf-8';
      ctx.set('Cache-Control', 'no-store');
      ctx.body = runningPage({ resultId: live.result_id, testCase: live.test_case, startTime: live.start_time, base: baseUrl(ctx, s), tz, api: 'v1' });
      return;
    }
    const record = resultFromParams(ctx, s);
    const log = await s.results.openArtifact(record.result_id, 'farmhand.log');
    const page = triagePage({
      record,
      artifacts: await s.results.artifacts(record.result_id),
      logText: log ? await readTail(log.path, log.size) : null,
      base: baseUrl(ctx, s),
      tz,
      api: 'v1',
    });
    ctx.type = 'text/html; charset=utf-8';
    ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; img-src 'self'; media-src 'self'; base-uri 'none'; form-action 'none'");
    ctx.body = page;
  });
  return r;
}

/** The page shows the log's last lines: read at most the last 1 MiB, not a whole 64 MiB log. */
async function readTail(file: string, size: number, max = 1024 * 1024): Promise<Buffer> {
  const fh = await openServed(file);
  try {
    const len = Math.min(size, max);
    const buf = Buffer.alloc(len);
    await fh.read(buf, 0, len, size - len);
    // Drop a partial first line when the read starts mid-file.
    return size > len ? buf.subarray(buf.indexOf(0x0a) + 1) : buf;
  } finally {
    await fh.close();
  }
}
