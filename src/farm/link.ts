/**
 * Kept only so `src/daemon.ts`'s `import { PortalLink } from './farm/link.js'` stands while another branch
 * changes daemon.ts: the node's side of the portal connection lives in src/farm/link/ (see its index.ts).
 * Once daemon.ts imports './farm/link/index.js', this file goes.
 */
export * from './link/index.js';
