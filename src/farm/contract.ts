/**
 * The seams between the farm's parts (docs/farm.md). The portal process
 * (`farmhand portal`) is composed in `src/farm/portal/` from implementations
 * of these interfaces, each in its own module and tested on its own against a
 * real PostgreSQL:
 *
 * - identity:      users, v2 tokens and node credentials (`users.ts`, `nodeCredentials.ts`)
 * - the hub:       nodes' outbound connections, liveness, forwarding (`hub/`; the node's side is `link/`)
 * - reservations:  all-or-nothing, leases, the wait queue (`reservations.ts`)
 * - results:       uploads from nodes, the farm-wide index, result files (`uploads.ts`, `results.ts`)
 * - events:        the outbox, the farm-wide SSE stream, webhooks (`events.ts`)
 *
 * Nothing here imports Koa or pg, so every part can be read on its own.
 */
import type { Readable } from 'node:stream';
import type { EventType, FarmEvent } from '../core/events.js';
import type { TokenVerifier } from '../core/auth.js';
import type { Availability } from '../core/availability.js';

/** v2 tokens of people and programs, kept in PostgreSQL; `verify` answers from memory (kept fresh). */
export interface FarmTokenVerifier extends TokenVerifier {
  /** Load the table and start following changes. */
  start(): Promise<void>;
  close(): Promise<void>;
}

/** Nodes are registered on the portal (`farmhand farm node add <id>`), which prints their credential once. */
export interface NodeCredentials {
  /** True when `credential` is the current credential of the registered node `nodeId`. */
  verify(nodeId: string, credential: string): Promise<boolean>;
}

/** A v2 request the portal passes on to the node that owns it. */
export interface ForwardRequest {
  method: string;
  /** Path and query, e.g. `/api/v2/jobs/n1/abcd/3?x=y`. */
  path: string;
  /** Request headers worth passing on (content-type, accept, range, if-none-match, last-event-id). */
  headers: Record<string, string>;
  body?: Buffer;
  /** The authenticated caller; the node acts on its behalf (last_used_by, results' username). */
  user: string;
  /** The portal's base URL (`http://portal:8080`), so the node writes job_url etc. pointing at the portal. */
  baseUrl: string;
}

export interface ForwardResponse {
  status: number;
  headers: Record<string, string>;
  /** Streams the body as it arrives from the node. */
  body: Readable;
}

/** Why a node is offline, as `not_available_reason` and the node_offline event say it. */
export type OfflineReason = string;

/** What the portal knows of one node from its connection (memory only; the database has the last flush). */
export interface NodeLink {
  nodeId: string;
  online: boolean;
  /** Null while online. */
  offlineReason: OfflineReason | null;
  /** The node's software version, from its hello. */
  version: string | null;
  /** Address the portal sees the node connect from. */
  externalIp: string | null;
  /** Last heartbeat or message received. */
  lastSeen: Date | null;
  /**
   * The node's own v2 Node object (what `GET /api/v2/nodes/<id>` answers on the node), as its last `node.state`
   * event said it (hub/intake.ts; before the first, the one folded into nodes.state); the portal overlays online, reservation, available, not_available_reason,
   * external_ip_address and node_url.
   */
  snapshot: Record<string, unknown> | null;
  /**
   * Whether the node takes a job, as its last `node.state` said it (a kind and a detail, checked by
   * hub/availability.ts); null before the first. The portal decides by the kind, never by the text (farm.ts
   * busyReason, routes.ts presentFarmNode).
   */
  availability: Availability | null;
  /**
   * The node's current or last job as its own ordered stream says: its hello's, then each job.started and
   * job.exited as it arrives. Ahead of `snapshot`, which the node publishes after a debounce: a job.exited comes
   * before the node's answer to the stop that ended the job (the same socket, in order), so once a stop through
   * the portal answers, this already says exited (docs/farm.md, "A stopped job through the portal").
   */
  job: { job_uid: string; status: 'running' | 'exited' } | null;
}

/** Who made an event the hub publishes: the node (relayed, with the node's own id) or the portal. */
export type EventOrigin = 'node' | 'portal';

export interface FarmHub {
  /** The node's link, or undefined for a node that never connected since the portal started. */
  link(nodeId: string): NodeLink | undefined;
  links(): NodeLink[];
  /**
   * Pass a request to the node over its connection. Rejects with FarmError('device_unavailable') (503)
   * when the node is not connected. `signal` aborts it (the client went away).
   */
  forward(nodeId: string, req: ForwardRequest, signal?: AbortSignal): Promise<ForwardResponse>;
  /**
   * Every event a node publishes (job.started, run.finished, ...), and node.online/node.offline from the hub itself.
   * `from` says which: 'node' for the node's own events (their id is the node's), 'portal' for the hub's.
   */
  onEvent(listener: (e: FarmEvent, from?: EventOrigin) => void): () => void;
  /**
   * A connected node's availability as the portal decides it may have changed: its own availability changed kind
   * (maintenance, its capture, its health check: the node's node.state, which the hub keeps on the link and does not
   * publish as an event), or its job ended (told as its job.exited arrives, before the fold publishes the event).
   * Optional for stand-ins.
   */
  onAvailabilityChange?(listener: (nodeId: string) => void): () => void;
  /**
   * Resolves once the node's events received so far are folded into the database (jobs, results' job rows):
   * what the node said before an answer that came after them is then the portal's too. At once for a node
   * the hub does not know.
   */
  folded(nodeId: string): Promise<void>;
  /**
   * The node answered that this job exited (a stop, a read of the job): its NodeLink.job says so from now on, if
   * it names that job (an answer that overtook the node's job.exited, sent only once the node is welcomed).
   */
  jobExited?(nodeId: string, jobUid: string): void;
}

/** A reservation as the farm keeps it (the spec's Reservation, without the presentation fields). */
export interface FarmReservation {
  reservation_id: number;
  node_id: string;
  username: string;
  start_time: string;
  /** ISO 8601; null when it never expires. */
  expires: string | null;
  message: string;
  ended: boolean;
  /** Extension: the lease (docs/farm.md). */
  lease_secs: number | null;
}

export interface ReserveRequest {
  node_ids: string[];
  message: string;
  duration_secs: number | null;
  username: string;
  /** Extension: ends unless extended within this many seconds. */
  lease_secs?: number | null;
  /** Extension: wait (first come, first served) up to this long instead of a 409. */
  wait_secs?: number | null;
}

/**
 * Reservations in PostgreSQL. Errors are FarmErrors (src/core/errors.ts) carrying the spec's status:
 * 400 invalid/ended, 403 not the creator, 404 unknown node or reservation, 409 busy or reserved.
 */
export interface FarmReservations {
  /** All or nothing. `isBusy(nodeId)` says why a free node cannot be reserved (running a job, offline...). */
  reserve(req: ReserveRequest, signal?: AbortSignal): Promise<FarmReservation[]>;
  extend(id: number, username: string, durationSecs: number): Promise<void>;
  end(id: number, username: string): Promise<void>;
  interrupt(id: number, username: string, message: string): Promise<void>;
  /** The active reservation of a node, if any. */
  active(nodeId: string): Promise<FarmReservation | undefined>;
  activeAll(): Promise<Map<string, FarmReservation>>;
}

/** The farm-wide event log (the outbox). */
export interface FarmEventLog {
  append(type: EventType, nodeId: string | null, data: unknown): Promise<void>;
}
