/**
 * `/static/<file>`: the portal's client scripts (typed ES modules, `// @ts-check`,
 * checked by `tsconfig.client.json`) and its style sheet. A fixed set of files,
 * read once at start: a request names a file of that set or gets a 404, so no
 * path from a request reaches the file system.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { extname } from 'node:path';
import { fileURLToPath } from 'node:url';
import Router from '@koa/router';
import { FarmError } from '../core/errors.js';
import { mount } from '../http/endpoints/mount.js';

/** The folder beside this module (src/web/static, or dist/web/static after the build copies it). */
const DIR = fileURLToPath(new URL('./static/', import.meta.url));

const TYPES: Record<string, string> = {
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
};

function load(): Map<string, { body: Buffer; type: string }> {
  const files = new Map<string, { body: Buffer; type: string }>();
  for (const name of readdirSync(DIR)) {
    const type = TYPES[extname(name)];
    if (type) files.set(name, { body: readFileSync(DIR + name), type });
  }
  return files;
}

export function staticRouter(): Router {
  const files = load();
  const r = new Router();
  // Our own icon (an SVG), where browsers look for it unasked; cached for a day.
  const icon = files.get('favicon.svg');
  mount(r, 'GET /favicon.ico', (ctx) => {
    if (!icon) throw new FarmError('not_found', 'no icon');
    ctx.type = icon.type;
    ctx.set('Cache-Control', 'public, max-age=86400');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.body = icon.body;
  });
  mount(r, 'GET /static/:file', (ctx) => {
    const f = files.get(ctx.params.file ?? '');
    if (!f) throw new FarmError('not_found', `no static file ${ctx.params.file}; the portal's files are: ${[...files.keys()].join(', ')}`);
    ctx.type = f.type;
    // Files change only with a new version of the daemon; a reload after an upgrade gets the new ones.
    ctx.set('Cache-Control', 'no-cache');
    ctx.set('X-Content-Type-Options', 'nosniff');
    ctx.body = f.body;
  });
  return r;
}
