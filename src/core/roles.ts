/**
 * Roles: what a signed-in caller may do. Ordered; each role may do everything
 * the roles before it may:
 *
 * - `read`: results, logs, screenshots, node status.
 * - `manual`: also the live view and the remote control (manual control), no
 *   test pack, no runs.
 * - `run`: also run and stop tests, read the test pack, reserve nodes.
 * - `admin`: also users, tokens, nodes, maintenance, the audit trail.
 *
 * Pure: which endpoint needs which role is said by the HTTP layer's table.
 */
export const ROLES = ['read', 'manual', 'run', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export const isRole = (value: unknown): value is Role => typeof value === 'string' && (ROLES as readonly string[]).includes(value);

/** Whether a caller of role `have` may do what needs role `need`. */
export const permits = (have: Role, need: Role): boolean => ROLES.indexOf(have) >= ROLES.indexOf(need);
