/**
 * The fields a farm portal adds to the v2 Node object (schemas.ts `Node`), each optional: a node alone never sends
 * them. Laid over each node's snapshot by the portal (src/farm/portal/nodeViews.ts presentFarmNode).
 */
import { z } from 'zod';

const isoTime = () => z.string().meta({ description: 'ISO 8601 date-time, e.g. 2026-11-23T09:19:15.123Z' });

export const FARM_NODE_FIELDS = {
  labels: z.record(z.string(), z.string()).optional().meta({ description: "Not in the spec: on a farm portal only, the node's labels set by the farm's administrator (docs/queue.md); never the node's own." }),
  health: z
    .object({
      state: z.enum(['unchecked', 'healthy', 'unhealthy']),
      pool: z.string().nullable().meta({ description: 'The pool (label selector) whose check gave the verdict; null when unchecked or put back by an administrator.' }),
      test_case: z.string().nullable(),
      reason: z.string().nullable().meta({ description: 'Why the check failed (unhealthy), or how the node was put back.' }),
      result_url: z.string().nullable().meta({ description: "The check's result (GET it on the portal); null when it recorded none." }),
      checked_at: isoTime().nullable().meta({ description: 'When the check that gave the verdict started, or when an administrator put the node back.' }),
      set_by: z.string().nullable(),
    })
    .optional()
    .meta({ description: "Not in the spec: on a farm portal only, the node's health for its pool's health check (docs/health-checks.md); an unhealthy node gets no queued job." }),
};
