/**
 * Serving a file from disk: Content-Type by extension, Content-Length,
 * Last-Modified, single-range `Range` requests (206/416), streamed without
 * reading the file into memory.
 */
import { createReadStream } from 'node:fs';
import type { Context } from 'koa';
import { lookup } from 'mime-types';
import parseRange from 'range-parser';
import { FarmError } from '../core/errors.js';

/** Content types for the files test runs leave behind that mime-types does not know as text. */
const EXTRA_TYPES: Record<string, string> = {
  log: 'text/plain; charset=utf-8',
  conf: 'text/plain; charset=utf-8',
  py: 'text/plain; charset=utf-8',
};

export function contentTypeFor(name: string): string {
  const base = name.split('/').pop() ?? name;
  const ext = base.includes('.') ? base.split('.').pop()!.toLowerCase() : '';
  if (EXTRA_TYPES[ext]) return EXTRA_TYPES[ext];
  const t = ext ? lookup(ext) : false;
  if (!t) return ext ? 'application/octet-stream' : 'text/plain; charset=utf-8'; // duration, test-name, ...
  return t.startsWith('text/') ? `${t}; charset=utf-8` : t;
}

export function sendFile(ctx: Context, file: { path: string; size: number; mtime: Date }, name: string): void {
  ctx.set('Accept-Ranges', 'bytes');
  ctx.set('Last-Modified', file.mtime.toUTCString());
  ctx.type = contentTypeFor(name);
  const header = ctx.get('Range');
  if (header) {
    const ranges = parseRange(file.size, header, { combine: true });
    if (ranges === -1) {
      ctx.set('Content-Range', `bytes */${file.size}`);
      throw new FarmError('range_not_satisfiable', `Range ${header} is outside the file (${file.size} bytes)`);
    }
    if (ranges !== -2 && ranges.type === 'bytes' && ranges.length === 1) {
      const r = ranges[0]!;
      ctx.status = 206;
      ctx.set('Content-Range', `bytes ${r.start}-${r.end}/${file.size}`);
      ctx.length = r.end - r.start + 1;
      ctx.body = createReadStream(file.path, { start: r.start, end: r.end, highWaterMark: 256 * 1024 });
      return;
    }
    // Malformed or multi-range: serve the whole file, as RFC 9110 allows.
  }
  if (ctx.method === 'HEAD') {
    ctx.body = Buffer.alloc(0); // Koa sends no body for HEAD; no file handle is opened
  } else {
    ctx.body = createReadStream(file.path, { highWaterMark: 256 * 1024 });
  }
  ctx.status = 200;
  ctx.length = file.size;
}
