/**
 * Request bodies. COMPAT.md: clients post JSON without a Content-Type (or as
 * form data, as `curl -d` does), so the API's POST/PUT bodies are parsed as
 * JSON whatever the header says; a body that is not JSON is a 400.
 *
 * `Content-Encoding: gzip`, `deflate` or `br` bodies are decoded (co-body's
 * inflation), and the size limit counts the decoded bytes, so a zip bomb is a
 * 413 after at most the limit has been inflated. A body that does not decode
 * is a 400; any other encoding, or a list of encodings, is a 415
 * (docs/api-notes.md).
 *
 * koa-body is loaded by the first request with a body, not at start-up: with
 * its dependencies it is the largest module the daemon loads (about 0.1 s of
 * CPU on the appliance), and start-up is what a restarted node's clients wait
 * for (bench/README.md, issue 23).
 */
import type { Context, Middleware, Next } from 'koa';
import type { KoaBodyMiddlewareOptions } from 'koa-body';
import { FarmError } from '../core/errors.js';

type BodyParser = (ctx: Context, next: Next) => Promise<void>;
let koaBodyModule: Promise<typeof import('koa-body')> | undefined;

/** koa-body's middleware for `options`, made on the first call (one load of the module for all). */
function lazyKoaBody(options: Partial<KoaBodyMiddlewareOptions>): BodyParser {
  let parse: Middleware | undefined;
  return async (ctx, next) => {
    if (!parse) {
      const { koaBody } = await (koaBodyModule ??= import('koa-body'));
      parse ??= koaBody(options);
    }
    await parse(ctx, next);
  };
}

const BODY_METHODS = ['POST', 'PUT', 'PATCH', 'DELETE'];
/** Content codings the body parser decodes (RFC 9110: names are case-insensitive). */
export const BODY_ENCODINGS = ['identity', 'gzip', 'x-gzip', 'deflate', 'br'] as const;

export function jsonBody(limitBytes: number) {
  const parse = lazyKoaBody({
    json: true,
    urlencoded: false,
    text: false,
    multipart: false,
    jsonStrict: false,
    jsonLimit: limitBytes,
    parsedMethods: ['POST', 'PUT', 'PATCH', 'DELETE'] as KoaBodyMiddlewareOptions['parsedMethods'],
    onError: (err) => {
      throw err;
    },
  });
  return async function parseJson(ctx: Context, next: Next): Promise<void> {
    if (!BODY_METHODS.includes(ctx.method)) {
      await next();
      return;
    }
    const headers = ctx.request.headers;
    headers['content-type'] = 'application/json';
    const encoding = (ctx.get('Content-Encoding') || 'identity').trim().toLowerCase();
    if (!(BODY_ENCODINGS as readonly string[]).includes(encoding)) {
      throw new FarmError(
        'unsupported_media_type',
        `Content-Encoding "${encoding.slice(0, 40)}" is not supported; send the body plain or with one of gzip, deflate, br`,
      );
    }
    headers['content-encoding'] = encoding === 'x-gzip' ? 'gzip' : encoding;
    let parsed = false;
    try {
      await parse(ctx, async () => {
        parsed = true;
        await next();
      });
    } catch (e) {
      // Only errors of the parsing itself are translated; the routes' own errors pass through.
      if (!parsed && isDecodeError(e)) {
        throw new FarmError('invalid_request', `the request body is not valid ${headers['content-encoding']} data: ${(e as Error).message}`);
      }
      throw e;
    }
  };
}

/** zlib's errors (corrupt or truncated data) carry a `Z_...` code or a zlib errno and no HTTP status. */
function isDecodeError(e: unknown): boolean {
  const err = e as { status?: unknown; code?: unknown; errno?: unknown };
  if (typeof err !== 'object' || err === null || typeof err.status === 'number') return false;
  return (typeof err.code === 'string' && err.code.startsWith('Z_')) || (typeof err.code === 'string' && err.code.startsWith('ERR_BROTLI')) || typeof err.errno === 'number';
}

/** The parsed body; `{}` for an empty one. */
export function bodyOf(ctx: Context): unknown {
  const b = (ctx.request as { body?: unknown }).body;
  return b === undefined ? {} : b;
}

/**
 * The portal's HTML form posts (sign-in, sign-out: `FORM_PATHS` in auth.ts):
 * `application/x-www-form-urlencoded` bodies, to `{ field: value }`; any other
 * body is left unparsed (`{}`), and the same content codings are refused.
 */
export function formBody(limitBytes: number) {
  const parse = lazyKoaBody({
    json: false,
    urlencoded: true,
    text: false,
    multipart: false,
    formLimit: limitBytes,
    parsedMethods: ['POST'] as KoaBodyMiddlewareOptions['parsedMethods'],
    onError: (err) => {
      throw err;
    },
  });
  return async function parseForm(ctx: Context, next: Next): Promise<void> {
    const encoding = (ctx.get('Content-Encoding') || 'identity').trim().toLowerCase();
    if (ctx.method === 'POST' && !(BODY_ENCODINGS as readonly string[]).includes(encoding)) {
      throw new FarmError('unsupported_media_type', `Content-Encoding "${encoding.slice(0, 40)}" is not supported; send the form plain`);
    }
    await parse(ctx, next);
  };
}
