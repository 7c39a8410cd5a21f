/**
 * The farm's nodes as v2 Node objects (`GET /api/v2/nodes`, `GET /api/v2/nodes/<id>`, the front door): each
 * node's last snapshot with what only the portal knows laid over it (docs/farm.md, "Forwarding": the Node object
 * on the portal).
 */
import type pg from 'pg';
import { availabilityText, type Availability } from '../../core/availability.js';
import type { Labels } from '../../core/queue.js';
import { presentReservation } from '../../http/presenters.js';
import type { FarmHub, FarmReservation, FarmReservations, NodeLink } from '../contract.js';
import { nodeState } from '../hub/availability.js';
import { nodeTestUserOf, TEST_USER_KEY, type NodeTestUser } from '../protocol.js';
import { allNodeLabels } from '../queue/labels.js';
import { nodeHealthAll, type NodeHealth } from '../queue/poolStore.js';
import { farmNodeAvailability } from './availability.js';

export interface NodeViewDeps {
  pool: pg.Pool;
  hub: Pick<FarmHub, 'link'>;
  reservations?: Pick<FarmReservations, 'activeAll'> | undefined;
  /**
   * Replicas "many": this replica's id. A node connected to another replica (its owner's lease live) is then
   * presented from the database (remoteLink) rather than as offline; undefined in mode "single".
   */
  replicaId?: string | undefined;
}

/**
 * The columns a Node object is built from: the node's row, and (replicas "many") whether its owner replica's lease
 * is live and the job the jobs table says it runs (read by the partial index jobs_node_running, for nodes online at
 * a replica only).
 */
export const NODE_COLUMNS = `n.node_id, n.version, n.online, n.offline_reason, n.last_seen, n.state, n.owner_replica, n.external_ip,
  (r.lease_until IS NOT NULL AND r.lease_until > now()) AS owner_live,
  CASE WHEN n.online AND n.owner_replica IS NOT NULL
    THEN (SELECT j.job_uid FROM jobs j WHERE j.node_id = n.node_id AND j.state = 'running' LIMIT 1) END AS running_job
  FROM nodes n LEFT JOIN portal_replicas r ON r.replica_id = n.owner_replica`;

/**
 * Every registered node as a v2 Node object (`GET /api/v2/nodes`, and the portal's front door): the node's
 * last snapshot with the portal's overlays, as `caller` sees it.
 */
export async function listFarmNodes(d: NodeViewDeps, caller: string, base: string): Promise<Record<string, unknown>[]> {
  return (await listFarmNodeViews(d, caller, base)).map((v) => v.node);
}

/**
 * listFarmNodes with each node's availability as a kind and a detail beside it (the front door reads the kind), and
 * who its tests run as (its page warns when a test can read the node's credential).
 */
export async function listFarmNodeViews(
  d: NodeViewDeps,
  caller: string,
  base: string,
): Promise<{ node: Record<string, unknown>; availability: Availability; testUser: NodeTestUser | undefined }[]> {
  const { rows } = await d.pool.query<NodeRow>(`SELECT ${NODE_COLUMNS} ORDER BY n.node_id`);
  const held = (await d.reservations?.activeAll()) ?? new Map<string, FarmReservation>();
  const [labels, health] = await Promise.all([allNodeLabels(d.pool), nodeHealthAll(d.pool)]);
  return rows.map((row) => {
    const link = linkOf(d, row);
    const res = held.get(row.node_id);
    return {
      node: presentFarmNode(row, link, res, caller, base, labels.get(row.node_id) ?? {}, health.get(row.node_id)),
      availability: farmNodeAvailability(link, offlineReasonOfRow(row, link), res),
      testUser: nodeTestUserOf(link?.snapshot ?? row.state?.node),
    };
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
  /** Replicas: the replica holding the node's connection, whether its lease is live, and the job running on it (jobs table). */
  owner_replica?: string | null;
  owner_live?: boolean | null;
  running_job?: string | null;
  /** The address the node connects from, as its owner replica wrote it at hello. */
  external_ip?: string | null;
}

/**
 * The node as this portal knows it: its connection's link when it is connected here; else (replicas "many") when
 * another replica holds its connection (`nodes.online`, its owner's lease live), a link built from the database
 * (remoteLink); else the link this process kept of it, if any (offline).
 */
export function linkOf(d: Pick<NodeViewDeps, 'hub' | 'replicaId'>, row: NodeRow): NodeLink | undefined {
  const link = d.hub.link(row.node_id);
  if (link?.online || d.replicaId === undefined) return link;
  return remoteLink(row, d.replicaId) ?? link;
}

/**
 * A node connected to another replica, as the database says it (docs/farm.md, "Many portals: the node's state on
 * every replica"): online while `nodes.online` and its owner's lease is live; its Node object and availability the
 * last `node.state` folded into `nodes.state`; its job running when the jobs table has one running (the fold writes
 * it from the node's ordered job events, as the owner's NodeLink.job); what only the owner's memory has (the
 * address the node connects from, the last heartbeat not yet flushed) is the row's.
 */
export function remoteLink(row: NodeRow, replicaId: string): NodeLink | undefined {
  if (!row.online || !row.owner_live || !row.owner_replica || row.owner_replica === replicaId) return undefined;
  const kept = nodeState(row.state);
  if (!kept) return undefined;
  return {
    nodeId: row.node_id,
    online: true,
    offlineReason: null,
    version: row.version,
    externalIp: row.external_ip ?? null,
    lastSeen: row.last_seen,
    snapshot: kept.snapshot,
    availability: kept.availability,
    // Not running by the jobs table: exited (the snapshot's job may lag the fold of job.exited by its debounce).
    job: row.running_job ? { job_uid: row.running_job, status: 'running' } : { job_uid: '', status: 'exited' },
  };
}

/** Why a node is offline: its connection's word, else the database's (a node not connected since the portal started). */
const offlineReasonOfRow = (row: NodeRow, link: NodeLink | undefined): string | null =>
  link ? link.offlineReason : (row.offline_reason ?? 'it has never connected to the portal');

/**
 * The v2 Node object on the portal: the node's own (its last snapshot), with what only the portal knows laid
 * over it: whether it is connected, the address it connects from, the farm's reservation, its URL on the portal,
 * its labels (the farm administrator's, node_labels: whatever the node's snapshot says of `labels` is replaced, so a
 * test pack cannot grant its node labels; docs/queue.md), its pool health (node_health: presentNodeHealth), and
 * available / not_available_reason worked out again.
 */
export function presentFarmNode(
  row: NodeRow,
  link: NodeLink | undefined,
  res: FarmReservation | undefined,
  caller: string,
  base: string,
  labels: Labels,
  health?: NodeHealth,
): Record<string, unknown> {
  // Who the node's tests run as is for its page only (protocol.ts TEST_USER_KEY), not the API's Node object.
  const { [TEST_USER_KEY]: _testUser, ...snap } = link?.snapshot ?? row.state?.node ?? {};
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
    // Not in the spec: the farm administrator's labels of the node (never the node's own word).
    labels,
    // Not in the spec: the node's health for its pool's health check (docs/health-checks.md).
    health: presentNodeHealth(health, base),
    // Not in the spec: the portal's view of the node's connection.
    farm: {
      connected,
      offline_reason: connected ? null : offlineReason,
      version: link?.version ?? row.version,
      last_seen: (link?.lastSeen ?? row.last_seen)?.toISOString() ?? null,
    },
  };
}

/**
 * A node's pool health as its Node object shows it (docs/health-checks.md, "A pool's health check"): `unchecked`
 * while node_health has no row for it (never checked, or its pool has no check), else the last verdict, with the
 * check's result linked (`result_url`, null when the check recorded none or an administrator put the node back).
 */
export function presentNodeHealth(h: NodeHealth | undefined, base: string): Record<string, unknown> {
  if (!h) return { state: 'unchecked', pool: null, test_case: null, reason: null, result_url: null, checked_at: null, set_by: null };
  return {
    state: h.state,
    pool: h.selector,
    test_case: h.test_case,
    reason: h.reason,
    result_url: h.result_id ? `${base}/api/v2/results${h.result_id}` : null,
    checked_at: h.since,
    set_by: h.set_by,
  };
}

/** One node's pool health (`GET /api/v2/nodes/<id>`): the store's read, one query, as its labels. */
export async function nodeHealthOf(pool: Pick<pg.Pool, 'query'>, nodeId: string): Promise<NodeHealth | undefined> {
  return (await nodeHealthAll(pool)).get(nodeId);
}
