/**
 * The portal's reading of a node's state (docs/farm.md, "The node's state" and "Availability"): the `node.state`
 * event of the node's stream carries its v2 Node object and whether it takes a job, typed (a kind and a detail).
 * Checked, never parsed from the English `not_available_reason`: a kind this version does not know, or a malformed
 * value, is read as the node's own reason not to take a job (`unhealthy`), so it is never offered by mistake.
 */
import { asAvailability, type Availability } from '../../core/availability.js';

/** What the portal keeps of a node's state (NodeLink.snapshot and NodeLink.availability, and the nodes.state column). */
export interface KeptState {
  snapshot: Record<string, unknown>;
  availability: Availability;
}

/** A node.state event's payload as the portal keeps it; undefined when it is not one (no Node object). */
export function nodeState(data: unknown): KeptState | undefined {
  const d = data as { node?: unknown; availability?: unknown } | null;
  if (typeof d !== 'object' || d === null || typeof d.node !== 'object' || d.node === null || Array.isArray(d.node)) return undefined;
  const availability = asAvailability(d.availability) ?? {
    kind: 'unhealthy',
    detail: `the node said whether it takes a job in a way this portal does not know (${JSON.stringify(d.availability)?.slice(0, 200)}); upgrade the portal`,
  };
  return { snapshot: d.node as Record<string, unknown>, availability };
}
