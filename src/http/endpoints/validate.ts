/**
 * Request validation from the table of endpoints: an entry's `check` (a zod schema, usually its documented
 * `body` or all of it but a rule the domain keeps) is run on the request's body before the route's handlers,
 * bound to the route when the app is built (authorize.ts `bindEndpoints`), as the role check is. A body it
 * refuses is a 400 `{"error": "invalid_request", "message": ...}` with the message of the first problem
 * found, fields in the schema's order: the schemas carry the messages the hand validators gave.
 */
import type { Context, Middleware, Next } from 'koa';
import { FarmError } from '../../core/errors.js';
import { bodyOf } from '../body.js';
import type { Endpoint } from './entry.js';

/** Throws the 400 of the entry's check for `body`; nothing when it passes (or the entry has no check). */
export function validateBody(e: Pick<Endpoint, 'check'>, body: unknown): void {
  if (!e.check) return;
  const r = e.check.safeParse(body);
  if (!r.success) throw new FarmError('invalid_request', r.error.issues[0]?.message ?? 'the request body is not valid');
}

/** The check in front of one route's handlers, bound to its entry; undefined for an entry without one. */
export function validator(e: Endpoint): Middleware | undefined {
  if (!e.check) return undefined;
  return function validateRequest(ctx: Context, next: Next): Promise<unknown> {
    validateBody(e, bodyOf(ctx));
    return next();
  };
}
