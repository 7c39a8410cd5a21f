/** The check of an entry's documented query string, for its `check` and `portalCheck` (validate.ts runs them). */
import { z } from 'zod';

/**
 * The check of a documented query string (an entry's `query`, a `z.object` of strings): each parameter given at most
 * once (Koa makes a repeated one an array: a 400 naming it), a required one there, then the schema itself. The
 * values' own rules (a time zone, a filter) stay the handler's, which names the bad value.
 */
export function queryCheck(q: z.ZodObject<Record<string, z.ZodType>>): z.ZodType {
  const fields = Object.entries(q.shape);
  return z
    .record(z.string(), z.unknown())
    .superRefine((v, ctx) => {
      for (const [k, field] of fields) {
        if (Array.isArray(v[k])) ctx.addIssue({ code: 'custom', message: `${k} must be given once in the query string`, path: [k] });
        else if (v[k] === undefined && !field.safeParse(undefined).success) ctx.addIssue({ code: 'custom', message: `${k} is required in the query string`, path: [k] });
      }
    })
    .pipe(q);
}
