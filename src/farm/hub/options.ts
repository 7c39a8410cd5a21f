/**
 * The portal's side of the nodes' connections, what the hub is given and the close codes it uses (docs/farm.md,
 * "Connections and liveness"). Types and constants only: every file of src/farm/hub/ may import it.
 */
import type pg from 'pg';
import type { Logger } from '../../core/ports.js';
import type { NodeCredentials } from '../contract.js';
import type { HubFold } from '../fold.js';
import { CLOSE_REPLACED } from '../protocol.js';
import type { Tenure } from '../replicas/ownership.js';

/** What the hub asks of the jobs table (jobs.ts's FarmJobs); each call runs on the node's chain. */
export interface HubJobs {
  /** The node went offline: end its running job, record the run in flight as an error. */
  nodeOffline(nodeId: string, reason: string, tenure?: Tenure): Promise<unknown>;
  /** The node is back: the jobs of it the portal has ended (the welcome's ended_jobs). */
  reconcile(nodeId: string): Promise<string[]>;
  /** Nodes with a job the portal still has as running (for the grace period after a portal restart). */
  nodesWithRunningJobs(): Promise<string[]>;
}

export interface PortalHubOptions {
  pool: pg.Pool;
  credentials: NodeCredentials;
  logger: Logger;
  /** Told to nodes in the welcome; offline after MISSED_HEARTBEATS_OFFLINE of them. */
  heartbeatSecs: number;
  /** How often last_seen is flushed (one UPDATE for every node seen since the last flush). */
  flushSecs: number;
  jobs?: HubJobs;
  /**
   * Where the nodes' streams are folded (fold.ts), a batch per transaction, acknowledged after the commit; the
   * welcome's last_event_id is its cursor. Without one (tests of the connection alone) events are only published.
   */
  fold?: HubFold;
  /** A node's events held in memory before they are folded, at most (intake.ts; docs/farm.md, "The portal's inbox"). */
  maxInboxEvents?: number;
  /** ... and their frames' bytes at most. */
  maxInboxBytes?: number;
  /** After a portal start, how long a node that had a running job has to connect (default: restartGraceMs). */
  restartGraceMs?: number;
  /**
   * Replicas "many" (docs/farm.md, "Many portals"): this replica's id. The hub then takes a node at its hello with
   * an epoch and conditions every write about it on that ownership; start-up touches only its own nodes. Absent:
   * replicas "single", today's writes exactly.
   */
  replicaId?: string;
  /** Milliseconds since the epoch; tests may pass another clock. */
  now?: () => number;
}

/** Close codes the portal uses (4000-4999 are the application's). */
export { CLOSE_REPLACED };
export const CLOSE_PROTOCOL = 4002;
export const CLOSE_OFFLINE = 4003;
/** The node moved to another portal replica, or this replica lost its lease: the node reconnects (to another one). */
export const CLOSE_MOVED = 4004;
