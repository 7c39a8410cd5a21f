/**
 * The portal's side of the nodes' connections (docs/farm.md, "The portal and the hub"), one concern a file:
 * portalHub.ts composes connections.ts (endpoint, hello, dispatch), liveness.ts (last_seen, offline, fault
 * trigger), intake.ts (node events), forwarding.ts and h2Client.ts (requests to nodes, HTTP/2
 * streams in the socket) over nodes.ts (the table and each node's
 * ordered database work); options.ts holds what the hub is given. The portal, jobs.ts and the tests import
 * from here.
 */
export { foreignIds } from './intake.js';
export { CLOSE_OFFLINE, CLOSE_PROTOCOL, CLOSE_REPLACED, type HubJobs, type PortalHubOptions } from './options.js';
export { PortalHub } from './portalHub.js';
