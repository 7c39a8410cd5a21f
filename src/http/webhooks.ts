/**
 * `POST /github/post-receive` (COMPAT): a push happened; fetch the test pack
 * now, so the next run_tests of a branch sees it. No body is needed and no
 * token (the sender is a git host's webhook); the answer is 204 once fetched.
 */
import Router from '@koa/router';
import { FarmError } from '../core/errors.js';
import type { Services } from './context.js';
import { mount } from './endpoints/mount.js';

export function webhookRouter(s: Services): Router {
  const r = new Router();
  mount(r, 'POST /github/post-receive', async (ctx) => {
    await s.testPack.fetch().catch((e: unknown) => {
      s.logger.warn({ err: e }, 'post-receive: fetching the test pack failed');
      throw new FarmError('device_unavailable', `could not fetch the test-pack repository: ${(e as Error).message}`);
    });
    ctx.status = 204;
  });
  return r;
}
