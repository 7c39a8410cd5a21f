/**
 * Serving a file from disk: Content-Type by extension, Content-Length,
 * Last-Modified, single-range `Range` requests (206/416), streamed without
 * reading the file into memory - through two reused buffers, so a 200 MB
 * video costs no garbage (a fresh buffer per chunk made the collector scan the
 * whole results index again and again, halving download speed).
 */
import type { FileHandle } from 'node:fs/promises';
import type { ServerResponse } from 'node:http';
import type { Context } from 'koa';
import { lookup } from 'mime-types';
import parseRange from 'range-parser';
import { FarmError } from '../core/errors.js';
import { openRegular } from '../storage/safeFile.js';
import { ARTIFACT_CSP } from './securityHeaders.js';

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

/**
 * Serve a file a test run left (or the run's own log and screenshot) with its
 * type, in the artifact sandbox: a browser that opens it as a page (an HTML
 * report, an SVG) shows it with an opaque origin and runs none of its script,
 * whatever the file holds (src/http/securityHeaders.ts `ARTIFACT_CSP`). Every
 * type gets it, not only the active ones (HTML, SVG, XML, XHTML, script): a
 * list of active types misses the next one, and an image, a video or text
 * shows the same under it.
 */
export async function sendFile(ctx: Context, file: { path: string; size: number; mtime: Date }, name: string): Promise<void> {
  ctx.set('Content-Security-Policy', ARTIFACT_CSP);
  ctx.set('X-Content-Type-Options', 'nosniff');
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
      return stream(ctx, file.path, r.start, r.end);
    }
    // Malformed or multi-range: serve the whole file, as RFC 9110 allows.
  }
  ctx.status = 200;
  ctx.length = file.size;
  if (ctx.method === 'HEAD' || file.size === 0) {
    ctx.body = Buffer.alloc(0); // Koa sends no body for HEAD; no file handle is opened
    ctx.length = file.size;
    return;
  }
  return stream(ctx, file.path, 0, file.size - 1);
}

/**
 * Open a listed file to serve it: regular files only, never blocking (a test
 * may have swapped it for a FIFO since it was listed); `not_found` when it is
 * gone or no longer a regular file.
 */
export async function openServed(path: string): Promise<FileHandle> {
  return openRegular(path).catch((e: NodeJS.ErrnoException) => {
    if (e.code === 'ENOENT' || e.code === 'ENOTREG' || e.code === 'ELOOP' || e.code === 'EMLINK') throw new FarmError('not_found', 'the file is gone or is no longer a regular file');
    throw e;
  });
}

const CHUNK = 256 * 1024;

/** Bytes start..end (inclusive) of a file as the response body; headers as set on ctx. */
async function stream(ctx: Context, path: string, start: number, end: number): Promise<void> {
  // Before the headers go out: a vanished file is still an error answer.
  const fh = await openServed(path);
  ctx.respond = false;
  const res = ctx.res;
  res.writeHead(ctx.status, ctx.response.headers);
  try {
    await pump(fh, res, start, end);
  } finally {
    await fh.close();
  }
}

/** Read into one buffer while the other is being written; a buffer is reused only once its write completed. */
async function pump(fh: FileHandle, res: ServerResponse, start: number, end: number): Promise<void> {
  const bufs = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)];
  const writing: Array<Promise<void>> = [Promise.resolve(), Promise.resolve()];
  let pos = start;
  for (let i = 0; pos <= end && !res.destroyed; i ^= 1) {
    await writing[i];
    const { bytesRead } = await fh.read(bufs[i]!, 0, Math.min(CHUNK, end - pos + 1), pos);
    if (bytesRead === 0) break; // the file shrank: the client sees a short body and knows
    pos += bytesRead;
    writing[i] = new Promise((resolve) => res.write(bufs[i]!.subarray(0, bytesRead), () => resolve()));
  }
  await Promise.all(writing);
  res.end();
}
