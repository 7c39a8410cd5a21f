/**
 * Whether a node of the farm takes a job, as the portal decides it (docs/farm.md, "Availability"): by the
 * kinds, never by parsing the English reason. The node's own kinds (offline capture, licence, maintenance, health check)
 * stand; whether it is reserved is the farm's database's word and whether it runs a job its ordered events'
 * (NodeLink.job), so the node's own `reserved` and `running` are left to those.
 */
import { AVAILABLE, type Availability } from '../../core/availability.js';
import type { FarmReservation, NodeLink } from '../contract.js';

/** The node's job: its events' (NodeLink.job) when they have named one, else its snapshot's. */
export function nodeJob(link: Pick<NodeLink, 'job' | 'snapshot'> | undefined): { status?: string; job_uid?: string } | null | undefined {
  if (link?.job) return link.job;
  return link?.snapshot?.job as { status?: string; job_uid?: string } | null | undefined;
}

/** The node's availability if it is one of its own reasons (not reserved, not running, not available); else null. */
export function nodeOwnReason(link: Pick<NodeLink, 'availability'> | undefined): Availability | null {
  const a = link?.availability;
  return a && (a.kind === 'offline' || a.kind === 'licence_expired' || a.kind === 'maintenance' || a.kind === 'unhealthy') ? a : null;
}

const running = (job: ReturnType<typeof nodeJob>): Availability | null =>
  job?.status === 'running' ? { kind: 'running', detail: job.job_uid ?? 'starting' } : null;

/**
 * Why a node cannot be reserved now, from what its connection says (the reservation itself is the
 * database's business): not connected, running a job, or the node's own reason.
 */
export function linkAvailability(link: NodeLink | undefined): Availability {
  if (!link?.online) return { kind: 'offline', detail: link?.offlineReason ?? 'not connected to the portal' };
  return running(nodeJob(link)) ?? nodeOwnReason(link) ?? AVAILABLE;
}

/** The v2 Node object's availability on the portal: not connected, the node's own reason, the farm's reservation, a running job. */
export function farmNodeAvailability(link: NodeLink | undefined, offlineReason: string | null, res: Pick<FarmReservation, 'username' | 'reservation_id'> | undefined): Availability {
  if (!link?.online) return { kind: 'offline', detail: offlineReason ?? 'not connected to the portal' };
  const own = nodeOwnReason(link);
  if (own) return own;
  if (res) return { kind: 'reserved', detail: `${res.username} (reservation ${res.reservation_id})` };
  return running(nodeJob(link)) ?? AVAILABLE;
}
