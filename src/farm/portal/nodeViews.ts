/**
 * The farm's nodes as v2 Node objects (`GET /api/v2/nodes`, `GET /api/v2/nodes/<id>`, the front door): each
 * node's last snapshot with what only the portal knows laid over it (docs/farm.md, "Forwarding": the Node object
 * on the portal).
 */
import type pg from 'pg';
import { availabilityText, type Availability } from '../../core/availability.js';
import { presentReservation } from '../../http/presenters.js';
import type { FarmHub, FarmReservation, FarmReservations, NodeLink } from '../contract.js';
import { farmNodeAvailability } from './availability.js';

export interface NodeViewDeps {
  pool: pg.Pool;
  hub: Pick<FarmHub, 'link'>;
  reservations?: Pick<FarmReservations, 'activeAll'> | undefined;
}

/**
 * Every registered node as a v2 Node object (`GET /api/v2/nodes`, and the portal's front door): the node's
 * last snapshot with the portal's overlays, as `caller` sees it.
 */
export async function listFarmNodes(d: NodeViewDeps, caller: string, base: string): Promise<Record<string, unknown>[]> {
  return (await listFarmNodeViews(d, caller, base)).map((v) => v.node);
}

/** listFarmNodes with each node's availability as a kind and a detail beside it (the front door reads the kind). */
export async function listFarmNodeViews(
  d: NodeViewDeps,
  caller: string,
  base: string,
): Promise<{ node: Record<string, unknown>; availability: Availability }[]> {
  const { rows } = await d.pool.query<NodeRow>(`SELECT node_id, version, online, offline_reason, last_seen, state FROM nodes ORDER BY node_id`);
  const held = (await d.reservations?.activeAll()) ?? new Map<string, FarmReservation>();
  return rows.map((row) => {
    const link = d.hub.link(row.node_id);
    const res = held.get(row.node_id);
    return { node: presentFarmNode(row, link, res, caller, base), availability: farmNodeAvailability(link, offlineReasonOfRow(row, link), res) };
  });
}

export interface NodeRow {
  node_id: string;
  version: string | null;
  online: boolean;
  offline_reason: string | null;
  last_seen: Date | null;
  /** The node's last state folded from its stream (fold.ts; its Node object under `node`), for a node this process has not heard from. */
  state?: { node?: Record<string, unknown> } | null;
}

/** Why a node is offline: its connection's word, else the database's (a node not connected since the portal started). */
const offlineReasonOfRow = (row: NodeRow, link: NodeLink | undefined): string | null =>
  link ? link.offlineReason : (row.offline_reason ?? 'it has never connected to the portal');

/**
 * The v2 Node object on the portal: the node's own (its last snapshot), with what only the portal knows laid
 * over it: whether it is connected, the address it connects from, the farm's reservation, its URL on the portal,
 * and available / not_available_reason worked out again from those.
 */
export function presentFarmNode(row: NodeRow, link: NodeLink | undefined, res: FarmReservation | undefined, caller: string, base: string): Record<string, unknown> {
  const snap = link?.snapshot ?? row.state?.node ?? {};
  const connected = link?.online ?? false;
  const offlineReason = offlineReasonOfRow(row, link);
  const capturing = snap.online !== false;
  const online = connected && capturing && link?.snapshot != null;
  const reason = availabilityText(farmNodeAvailability(link, offlineReason, res));
  return {
    node_id: row.node_id,
    ...snap,
    node_url: `${base}/api/v2/nodes/${encodeURIComponent(row.node_id)}`,
    available: reason === null,
    not_available_reason: reason,
    online,
    config: snap.config ?? {},
    device_type: snap.device_type ?? null,
    friendly_name: snap.friendly_name ?? null,
    external_ip_address: link?.externalIp ?? snap.external_ip_address ?? null,
    local_ip_address: snap.local_ip_address ?? null,
    geoip_city: snap.geoip_city ?? null,
    geoip_country: snap.geoip_country ?? null,
    job: snap.job ?? null,
    last_used_by: snap.last_used_by ?? null,
    last_used_time: snap.last_used_time ?? null,
    licence_expiry: snap.licence_expiry ?? null,
    reservation: res ? presentReservation({ ...res, ended: null }, caller) : null,
    // Not in the spec: the portal's view of the node's connection.
    farm: {
      connected,
      offline_reason: connected ? null : offlineReason,
      version: link?.version ?? row.version,
      last_seen: (link?.lastSeen ?? row.last_seen)?.toISOString() ?? null,
    },
  };
}
