/**
 * Request bodies. COMPAT.md: clients post JSON without a Content-Type (or as
 * form data, as `curl -d` does), so the API's POST/PUT bodies are parsed as
 * JSON whatever the header says; a body that is not JSON is a 400.
 */
import type { Context, Next } from 'koa';
import { HttpMethodEnum, koaBody } from 'koa-body';

export function jsonBody(limitBytes: number) {
  const parse = koaBody({
    json: true,
    urlencoded: false,
    text: false,
    multipart: false,
    jsonStrict: false,
    jsonLimit: limitBytes,
    parsedMethods: [HttpMethodEnum.POST, HttpMethodEnum.PUT, HttpMethodEnum.PATCH, HttpMethodEnum.DELETE],
    onError: (err) => {
      throw err;
    },
  });
  return async function parseJson(ctx: Context, next: Next): Promise<void> {
    if (['POST', 'PUT', 'PATCH', 'DELETE'].includes(ctx.method)) ctx.request.headers['content-type'] = 'application/json';
    await parse(ctx, next);
  };
}

/** The parsed body; `{}` for an empty one. */
export function bodyOf(ctx: Context): unknown {
  const b = (ctx.request as { body?: unknown }).body;
  return b === undefined ? {} : b;
}
