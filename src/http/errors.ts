/**
 * The one error middleware: FarmError codes become statuses and a JSON body
 * `{"error": code, "message": text}`. Errors thrown by Koa or its middleware
 * with a 4xx status are passed on the same way; anything else is logged with
 * its stack and answered with a plain 500 that reveals nothing.
 */
import type { Context, Next } from 'koa';
import { isFarmError, type ErrorCode } from '../core/errors.js';
import type { Logger } from '../core/ports.js';

export const STATUS: Record<ErrorCode, number> = {
  invalid_request: 400,
  invalid_filter: 400,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  gone: 410,
  payload_too_large: 413,
  unsupported_media_type: 415,
  range_not_satisfiable: 416,
  rate_limited: 429,
  device_unavailable: 503,
  database_unavailable: 503,
  storage_full: 507,
  internal: 500,
};

const CODE_FOR_STATUS: Record<number, ErrorCode> = {
  400: 'invalid_request',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  410: 'gone',
  413: 'payload_too_large',
  415: 'unsupported_media_type',
  416: 'range_not_satisfiable',
  429: 'rate_limited',
};

export function sendError(ctx: Context, status: number, code: string, message: string): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = { error: code, message };
}

export function errorHandler(logger: Logger) {
  return async function handleErrors(ctx: Context, next: Next): Promise<void> {
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) {
        sendError(ctx, 404, 'not_found', `no such endpoint: ${ctx.method} ${ctx.path}`);
      } else if (ctx.status === 405 && (ctx.body === undefined || typeof ctx.body === 'string')) {
        sendError(ctx, 405, 'method_not_allowed', `${ctx.method} is not allowed on ${ctx.path}; allowed: ${ctx.response.get('Allow')}`);
      } else if (ctx.status === 501 && (ctx.body === undefined || typeof ctx.body === 'string')) {
        // The router's answer to a method it does not know at all (TRACE, PROPFIND, ...).
        sendError(ctx, 501, 'not_implemented', `the method ${ctx.method.slice(0, 20)} is not used by this API; use GET, POST, PUT or DELETE`);
      }
    } catch (e) {
      if (isFarmError(e)) {
        // A 429, or a 503 of something that comes back (a node or replica away: the farm portal's proxy).
        if ((e.code === 'rate_limited' || e.code === 'device_unavailable') && typeof e.details?.retryAfter === 'number') {
          ctx.set('Retry-After', String(e.details.retryAfter));
        }
        sendError(ctx, STATUS[e.code], e.code, e.message);
        if (e.code === 'internal' || e.code === 'storage_full') logger.error({ err: e }, e.message);
        return;
      }
      const err = e as { status?: unknown; expose?: unknown; message?: string; type?: string };
      const status = typeof err.status === 'number' ? err.status : 500;
      if (status >= 400 && status < 500) {
        const code = err.type === 'entity.parse.failed' ? 'invalid_request' : (CODE_FOR_STATUS[status] ?? 'invalid_request');
        const message =
          err.type === 'entity.parse.failed'
            ? 'the request body is not valid JSON'
            : status === 413
              ? 'the request body is too large'
              : (err.message ?? 'bad request');
        sendError(ctx, status, code, message);
        return;
      }
      logger.error({ err: e, method: ctx.method, path: ctx.path }, 'unexpected error');
      sendError(ctx, 500, 'internal', 'internal error; the daemon log has the details');
    }
  };
}
