/** Checks the entries' `check` and `portalCheck` share (validate.ts runs them): a documented query string, a maintenance body. */
import { z } from 'zod';
import { parseMaintenanceRequest } from '../../core/maintenance.js';

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

/** The table's check of a maintenance body: the domain's own rule (core/maintenance.ts), its message in the 400. */
export const MaintenanceCheck = z.unknown().superRefine((body, ctx) => {
  try {
    parseMaintenanceRequest(body);
  } catch (e) {
    ctx.addIssue({ code: 'custom', message: e instanceof Error ? e.message : 'the maintenance body is not valid' });
  }
});
