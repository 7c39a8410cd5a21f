/**
 * The audit trail, the pure part (docs/auth.md, "Audit trail"): what one entry
 * says, the fixed vocabulary of actions, the query `GET /api/v2/audit` takes,
 * and the `AuditLog` port. A node keeps its trail in its data directory
 * (src/storage/auditLog.ts), the farm's portal in PostgreSQL
 * (src/farm/audit.ts); the HTTP layer records (src/http/audit.ts).
 */
import { FarmError } from './errors.js';

/**
 * Every state-changing action the trail knows. A manual control session is two
 * entries, never one per key press: `remote.session_start` at its first press,
 * `remote.session_end` when it has been idle (or the server stops), with the
 * count of presses.
 */
export const AUDIT_ACTIONS = [
  'job.run',
  'job.stop',
  'reservation.create',
  'reservation.extend',
  'reservation.end',
  'reservation.interrupt',
  'remote.session_start',
  'remote.session_end',
  'testpack.fetch',
  'token.create',
  'token.revoke',
  'user.create',
  'user.remove',
  'user.role',
  'node.add',
  'node.remove',
  'node.maintenance',
  'node.label',
  'power.cycle',
  'queue.enqueue',
  'queue.cancel',
  'pool.maintenance', 'pool.health_check', 'node.healthy', 'node.health_check',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

export const isAuditAction = (v: unknown): v is AuditAction => typeof v === 'string' && (AUDIT_ACTIONS as readonly string[]).includes(v);

/** How the caller proved who they are; `oidc`: the identity provider, at a person's sign-in (a role it changed). */
export type AuditVia = 'token' | 'session' | 'portal' | 'cli' | 'oidc' | 'none';

/** One entry, as recorded and as answered. */
export interface AuditEntry {
  /** Opaque, orders entries (newest first = largest first); `before` takes it. */
  id: string;
  /** ISO 8601, UTC, milliseconds. */
  at: string;
  /** The user name; `anonymous` for a v1 caller without a token; `cli` for a command on the machine with no user. */
  who: string;
  via: AuditVia;
  /** The public id of the token used (a session's sign-in token); null for the CLI, the portal's delegation or nobody. */
  token_id: string | null;
  /** The caller's address; behind the portal, the address the portal saw. Null for the CLI. */
  from: string | null;
  action: AuditAction;
  /** The node acted on, when there is one. */
  node: string | null;
  /** What was acted on: a job uid, a reservation id, a token id, a user name. */
  target: string | null;
  /** A few facts about the request (small; never a secret, never key names). */
  detail: Record<string, unknown>;
  /** The HTTP status answered; for the CLI, its exit code. */
  outcome: number;
}

/** An entry before the log gives it an id. */
export type NewAuditEntry = Omit<AuditEntry, 'id'>;

export interface AuditQuery {
  user?: string;
  /** An action, or a family: `reservation` matches every `reservation.*`. */
  action?: string;
  node?: string;
  /** Inclusive bounds, ms since the epoch. */
  since?: number;
  until?: number;
  /** Only entries older than this entry id (the previous page's `next_before`). */
  before?: string;
  limit: number;
}

export interface AuditPage {
  /** Newest first. */
  entries: AuditEntry[];
  /** Pass as `before` for the next page; null when this page is the last. */
  next_before: string | null;
}

/** Where entries are kept. `record` never throws and never waits for the disk or the database. */
export interface AuditLog {
  record(entry: NewAuditEntry): void;
  query(q: AuditQuery): Promise<AuditPage>;
  /** Whether `before` has the form of this log's entry ids. */
  isCursor(before: string): boolean;
}

export const DEFAULT_AUDIT_LIMIT = 100;
export const MAX_AUDIT_LIMIT = 1000;

const bad = (message: string) => new FarmError('invalid_filter', message);
const one = (v: unknown, name: string): string | undefined => {
  if (v === undefined) return undefined;
  if (typeof v !== 'string') throw bad(`give ${name} once`);
  return v;
};

/** A time filter: an ISO 8601 date-time with a zone, or a date (UTC midnight). */
function parseTime(v: string, name: string): number {
  const ok = /^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?(Z|[+-]\d{2}:?\d{2}))?$/i.test(v);
  const t = ok ? Date.parse(v.length === 10 ? `${v}T00:00:00Z` : v) : NaN;
  if (Number.isNaN(t)) throw bad(`${name} must be an ISO 8601 time with a zone, e.g. 2026-03-04T05:06:07Z, or a date, e.g. 2026-03-04 (got ${JSON.stringify(v.slice(0, 64))})`);
  return t;
}

/**
 * The query of `GET /api/v2/audit` from its parameters; FarmError('invalid_filter') (400) naming the bad one.
 * `checkCursor` says whether a `before` value is one of this log's ids.
 */
export function parseAuditQuery(q: Record<string, unknown>, checkCursor: (before: string) => boolean): AuditQuery {
  const known = new Set(['user', 'action', 'node', 'since', 'until', 'before', 'limit']);
  for (const k of Object.keys(q)) if (!known.has(k)) throw bad(`unknown parameter ${JSON.stringify(k.slice(0, 64))}; the filters are ${[...known].join(', ')}`);
  const out: AuditQuery = { limit: DEFAULT_AUDIT_LIMIT };
  const user = one(q.user, 'user');
  if (user !== undefined) {
    if (user === '' || user.length > 64) throw bad('user must be a user name (1 to 64 characters)');
    out.user = user;
  }
  const action = one(q.action, 'action');
  if (action !== undefined) {
    const families = new Set(AUDIT_ACTIONS.map((a) => a.split('.')[0]));
    if (!isAuditAction(action) && !families.has(action)) throw bad(`action must be one of ${AUDIT_ACTIONS.join(', ')}, or a family (${[...families].join(', ')}); got ${JSON.stringify(action.slice(0, 64))}`);
    out.action = action;
  }
  const node = one(q.node, 'node');
  if (node !== undefined) {
    if (node === '' || node.length > 128) throw bad('node must be a node id');
    out.node = node;
  }
  const since = one(q.since, 'since');
  if (since !== undefined) out.since = parseTime(since, 'since');
  const until = one(q.until, 'until');
  if (until !== undefined) out.until = parseTime(until, 'until');
  if (out.since !== undefined && out.until !== undefined && out.since > out.until) throw bad('since is after until');
  const before = one(q.before, 'before');
  if (before !== undefined) {
    if (!checkCursor(before)) throw bad(`before must be an entry id from an earlier answer (its next_before); got ${JSON.stringify(before.slice(0, 64))}`);
    out.before = before;
  }
  const limit = one(q.limit, 'limit');
  if (limit !== undefined) {
    if (!/^\d{1,7}$/.test(limit) || Number(limit) < 1 || Number(limit) > MAX_AUDIT_LIMIT) throw bad(`limit must be a whole number from 1 to ${MAX_AUDIT_LIMIT}`);
    out.limit = Number(limit);
  }
  return out;
}

/** Whether an entry's action is the filter's action, or of its family. */
export const actionMatches = (filter: string, action: string): boolean => action === filter || action.startsWith(`${filter}.`);

/** Whether an entry passes the query's filters (`before` and `limit` aside). */
export function entryMatches(q: AuditQuery, e: AuditEntry): boolean {
  if (q.user !== undefined && e.who !== q.user) return false;
  if (q.action !== undefined && !actionMatches(q.action, e.action)) return false;
  if (q.node !== undefined && e.node !== q.node) return false;
  const t = Date.parse(e.at);
  if (q.since !== undefined && t < q.since) return false;
  if (q.until !== undefined && t > q.until) return false;
  return true;
}

/** A short text for `detail`: at most `max` characters. */
export const clip = (v: string, max = 200): string => (v.length > max ? `${v.slice(0, max)}…` : v);
