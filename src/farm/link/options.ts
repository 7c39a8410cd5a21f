/**
 * The node's side of the portal connection, what it is given (docs/farm.md, "The node's connection"): everything
 * the link reads comes in as a function, so src/farm/link/ imports neither Koa nor the daemon (the composition
 * root, src/daemon.ts, wires them). Types only.
 */
import type { EventHub } from '../../core/events.js';
import type { ResultRecord } from '../../core/model.js';
import type { Logger } from '../../core/ports.js';
import type { Availability } from '../../core/availability.js';
import type { BackoffSettings } from './backoff.js';

export interface PortalLinkOptions {
  /** The portal's URL as configured (`http(s)://` or `ws(s)://`). */
  portalUrl: string;
  credential: string;
  nodeId: string;
  version: string;
  /** The node's own HTTP server (`http://127.0.0.1:8080`); forwarded requests are made there. */
  localUrl: string;
  /** The secret that makes the node's server believe the on-behalf headers (http/auth.ts DelegateRule). */
  delegateSecret: string;
  /**
   * The node's v2 Node object now (what GET /api/v2/nodes/<id> answers) and its availability as a kind and a
   * detail: published as `node.state` when it changes (nodeState.ts).
   */
  state: () => Promise<NodeStateNow>;
  /** The current job, or the last one. */
  job: () => { job_uid: string; status: 'running' | 'exited' } | null;
  /** Stop a job the portal has ended (resolves when it stopped or stopping was given up). */
  stopJob: (jobUid: string) => Promise<unknown>;
  /** The node's event hub: read with its internal events (node.state), which the link also publishes there. */
  events: Pick<EventHub, 'subscribe' | 'since' | 'buffered' | 'publish'>;
  /**
   * The node's record of a run, sent with its `run.finished` (docs/farm.md, "The node stream"); undefined when
   * the node no longer has it (deleted by retention before the portal got it).
   */
  record?: (resultId: string) => ResultRecord | undefined;
  logger: Logger;
  /** Told each time the link comes up or goes down (metrics). */
  onState?: (connected: boolean) => void;
  backoff?: Partial<BackoffSettings>;
  random?: () => number;
  /** node.state is published this long after a change (default 250 ms: several changes in a row make one). */
  stateDebounceMs?: number;
  /** A change of last_used_time alone is published at most this often (default 30 s). */
  stateUsageMs?: number;
  /** The state is also compared this often, for changes no event announces (default 30 s). */
  stateRefreshMs?: number;
}

/** The node's state as the daemon reads it. */
export interface NodeStateNow {
  snapshot: Record<string, unknown>;
  availability: Availability;
}
