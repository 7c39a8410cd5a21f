/**
 * What the queue needs from the rest of the portal (docs/queue.md, "Wiring"), as ports so that the dispatcher is
 * tested against a real PostgreSQL with the nodes' side driven by the test: where each node stands (NodeStates)
 * and how a job is started on a named node (JobStarter). adapters.ts builds both from the portal's hub, the way
 * `POST /api/v2/run_tests` with a node_id reaches a node.
 */
import type { Availability } from '../../core/availability.js';
import type { RunRequest } from '../../core/runRequest.js';

export interface NodeStates {
  /**
   * Every registered node's availability as the portal decides it (src/farm/portal/availability.ts
   * farmNodeAvailability): offline when not connected, the node's own reason (maintenance, unhealthy, licence),
   * reserved by a person, running a job; `available` is a free node.
   */
  availability(): Promise<Map<string, Availability>>;
  /** Whether this portal process starts jobs on the node (replicas "many": its connection is here). Default: all. */
  isLocal?(nodeId: string): boolean;
  /** Subscribe to "a node may have become free" (a job exited, a node came online, its state changed); returns the unsubscribe. */
  onChange?(fn: () => void): () => void;
  /**
   * The node's job as this process last heard of it (its job.started and job.exited, before the database has them):
   * once the job a start answered is heard of here, the availability above counts it, running or ended. Absent: the
   * dispatcher relies on its settle time alone.
   */
  jobOf?(nodeId: string): { job_uid: string; status: 'running' | 'exited' } | null;
}

/** A job to start on a node: the run_tests body (without node_id), on behalf of the user who queued it. */
export interface StartRequest {
  nodeId: string;
  run: RunRequest;
  username: string;
  /** The queued job's id; 0 for a pool's health check (health.ts), which is never queued. */
  queueId: number;
  /**
   * The start's Idempotency-Key (a queued job's `start_key`): sent again with the same start, the node answers the job
   * it started instead of starting another. Absent: none (a health check).
   */
  key?: string;
}

/**
 * What became of a start: the job_uid the node answered, or a refusal. `retry`: the node could not take it now
 * (busy, in maintenance): the job goes back to the queue; else the request itself was refused (a test case the test
 * pack lacks): the job fails with the node's message, as run_tests would have answered it. `unknown`: no answer
 * came that says whether the node started it (no answer in time, the connection lost on the way, a gateway's 5xx):
 * the job stays pinned to the node and the same start is sent again (its key) until the node says.
 */
export type StartOutcome = { ok: true; job_uid: string } | { ok: false; retry: boolean; unknown?: boolean; status: number | null; message: string };

export interface JobStarter {
  /** Start the job; `signal` aborts a start that takes too long (the outcome is then a retry). Must not throw. */
  start(req: StartRequest, signal: AbortSignal): Promise<StartOutcome>;
}

/** The wake-ups the dispatcher hears (src/farm/wakeups.ts FarmWakeups fits): `queue_job` (a job queued, any replica) and `resync`. */
export interface QueueWakeups {
  on(kind: string, fn: (w: Record<string, unknown>) => void): () => void;
}
