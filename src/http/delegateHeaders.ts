/**
 * The headers of a request a farm portal forwards to this node (src/farm/protocol.ts re-exports them for the
 * farm's side). Believed only with the delegate secret (src/http/auth.ts, DelegateRule).
 */

/** Headers that name the acting user and the portal on a forwarded request (set by the node's side only). */
export const DELEGATE_HEADER = 'x-farmhand-portal-delegate';
export const ON_BEHALF_HEADER = 'x-farmhand-on-behalf-of';
export const BASE_URL_HEADER = 'x-farmhand-base-url';

/**
 * On a page the portal forwards (`/app/...`, `/api/v1/...` reads), whether the person reading it is signed in on
 * the portal (`1`): the node renders the page's controls for a signed-in person, but is told neither who she is
 * nor her session's CSRF token (docs/farm.md, "What a node can do to the portal"); the portal's own scripts fetch
 * the token from the portal. Believed only with the delegate secret, like the three above.
 */
export const SIGNED_IN_HEADER = 'x-farmhand-signed-in';

/**
 * The address of the person or program that called the portal, as the portal saw it (its socket's peer): a node
 * records it in its audit trail as the request's `from` (docs/auth.md, "Audit trail"). Believed only with the
 * delegate secret, like the others.
 */
export const CLIENT_ADDRESS_HEADER = 'x-farmhand-client-address';
