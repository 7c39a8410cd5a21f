/**
 * Request validation from the table of endpoints: an entry's `check` (zod schemas for the path parameters,
 * the query string and the body; the body's usually its documented `body`, or all of it but a rule the
 * domain keeps) is run on the request before the route's handlers, bound to the route when the app is built
 * (authorize.ts `bindEndpoints`), as the role check is. A request it refuses is a 400 `{"error":
 * "invalid_request", "message": ...}` with the message of the first problem found: parameters first, then
 * the query, then the body, fields in each schema's order. The schemas carry the messages the hand
 * validators gave.
 */
import type { Context, Middleware, Next } from 'koa';
import type { z } from 'zod';
import { FarmError } from '../../core/errors.js';
import { bodyOf } from '../body.js';
import type { Checks, Endpoint } from './entry.js';

/** Where the checks are bound: a node's (`check`) or the portal's (`portalCheck`). */
export type Side = 'node' | 'portal';

/** The entry's checks on one side, or undefined when it has none there. */
export const checksOf = (e: Pick<Endpoint, 'check' | 'portalCheck'>, side: Side = 'node'): Checks | undefined => (side === 'node' ? e.check : e.portalCheck);

function run(schema: z.ZodType | undefined, value: unknown, what: string, code: Checks['code'] = 'invalid_request'): void {
  if (!schema) return;
  const r = schema.safeParse(value);
  if (!r.success) throw new FarmError(code, r.error.issues[0]?.message ?? `the request's ${what} is not valid`);
}

/** A request as the checks see it. */
export interface RequestParts {
  params?: unknown;
  query?: unknown;
  body?: unknown;
}

/** Throws the 400 of the first check that refuses the request; nothing when every one passes. */
export function validateRequest(checks: Checks | undefined, req: RequestParts): void {
  if (!checks) return;
  run(checks.params, req.params ?? {}, 'path', checks.code);
  run(checks.query, req.query ?? {}, 'query string', checks.code);
  run(checks.body, req.body, 'body', checks.code);
}

/** The body check of the entry's node side alone (the unit tests of run_tests and press). */
export function validateBody(e: Pick<Endpoint, 'check'>, body: unknown): void {
  run(e.check?.body, body, 'body');
}

/** The check in front of one route's handlers, bound to its entry; undefined for an entry without one on that side. */
export function validator(e: Endpoint, side: Side = 'node'): Middleware | undefined {
  const checks = checksOf(e, side);
  if (!checks || (!checks.params && !checks.query && !checks.body)) return undefined;
  return function validateRoute(ctx: Context, next: Next): Promise<unknown> {
    validateRequest(checks, { params: ctx.params, query: ctx.query, body: checks.body ? bodyOf(ctx) : undefined });
    return next();
  };
}

/**
 * The body of a request whose route's entry checked it with `schema` (its `check` or `portalCheck`), typed as that
 * schema's (`z.infer`): the handler's input is what the table let through, with no interface of its own to cast to.
 */
export const checkedBody = <S extends z.ZodType>(ctx: Context, _schema: S): z.infer<S> => bodyOf(ctx) as z.infer<S>;
