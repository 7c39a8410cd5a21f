/**
 * The node's connection to its farm's portal (docs/farm.md), built from the
 * daemon's services: what the portal sees of the node, the running job, the
 * events, the results; opened last, so the portal sees the node only once it
 * answers requests.
 */
import type { FarmConfig } from '../config/schema.js';
import type { EventHub } from '../core/events.js';
import type { JobService } from '../core/jobs.js';
import type { NodeService } from '../core/node.js';
import type { Logger } from '../core/ports.js';
import { PortalLink } from '../farm/link/index.js';
import { TEST_USER_KEY, type NodeTestUser } from '../farm/protocol.js';
import type { ResultUploader } from '../farm/uploader.js';
import { presentNode } from '../http/presenters.js';
import type { TestUser } from '../runner/testUser.js';
import type { FileResultRepository } from '../storage/results/index.js';
import { version } from '../version.js';

export interface PortalLinkParts {
  credential: string;
  delegateSecret: string;
  /** Who tests run as (undefined: the daemon's own user, so a test can read the credential): the portal's page says so. */
  testUser: TestUser | undefined;
  /** This daemon's own URL: the portal's forwarded requests come here. */
  localUrl: string;
  node: NodeService;
  jobs: JobService;
  hub: EventHub;
  results: FileResultRepository;
  uploader: ResultUploader | undefined;
  logger: Logger;
}

export function portalLink(portal: NonNullable<FarmConfig['portal']>, nodeId: string, p: PortalLinkParts): PortalLink {
  // Links in the Node objects sent unasked point at the portal (a forwarded request names its own base URL).
  const portalBase = new URL(portal.url.replace(/^ws/i, 'http')).origin;
  const testUser: NodeTestUser = { run_as: p.testUser?.name ?? null, can_read_credential: !p.testUser };
  return new PortalLink({
    portalUrl: portal.url,
    credential: p.credential,
    nodeId,
    version,
    localUrl: p.localUrl,
    delegateSecret: p.delegateSecret,
    state: async () => {
      const state = await p.node.stateOf(nodeId);
      return { snapshot: { ...presentNode(state, undefined, portalBase), [TEST_USER_KEY]: testUser }, availability: state.availability };
    },
    job: () => {
      const j = p.jobs.current();
      return j ? { job_uid: j.job_uid, status: j.status } : null;
    },
    stopJob: (uid) => p.jobs.stop(uid),
    events: p.hub,
    record: (id) => {
      const r = p.results.get(id);
      return r === undefined || r === 'deleted' ? undefined : r;
    },
    logger: p.logger.child({ module: 'portal-link' }),
    ...(portal.reconnect_max_secs !== undefined && { backoff: { capMs: portal.reconnect_max_secs * 1000 } }),
    // The portal is back: deliver the results waiting for it now, not at the end of the uploader's back-off (up to 60 s).
    onState: (connected) => {
      if (connected) p.uploader?.nudge();
    },
  });
}
