/**
 * The node's side of the portal connection, what it is given (docs/farm.md, "The node's connection"): everything
 * the link reads comes in as a function, so src/farm/link/ imports neither Koa nor the daemon (the composition
 * root, src/daemon.ts, wires them). Types only.
 */
import type { EventHub } from '../../core/events.js';
import type { ResultRecord } from '../../core/model.js';
import type { Logger } from '../../core/ports.js';
import type { NodeSnapshot } from '../protocol.js';
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
  /** The node's v2 Node object now (what GET /api/v2/nodes/<id> answers) and its availability as a kind and a detail. */
  snapshot: () => Promise<Required<NodeSnapshot>>;
  /** The current job, or the last one. */
  job: () => { job_uid: string; status: 'running' | 'exited' } | null;
  /** Stop a job the portal has ended (resolves when it stopped or stopping was given up). */
  stopJob: (jobUid: string) => Promise<unknown>;
  events: Pick<EventHub, 'subscribe' | 'since' | 'buffered'>;
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
  /** Snapshots are sent at most this often after a change (default 250 ms). */
  snapshotDebounceMs?: number;
  /** A snapshot is also compared this often, for changes no event announces (default 30 s). */
  snapshotRefreshMs?: number;
}
