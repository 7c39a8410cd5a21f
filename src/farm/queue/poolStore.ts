/**
 * Pools' health checks, their runs, the nodes' health and pools' maintenance in PostgreSQL (migration 16;
 * docs/health-checks.md, "A pool's health check" and "A pool in maintenance"). A pool is a label selector, named by
 * its text (`device=roku,room=lab2`, keys in order), as a queue is. Written by the farm's administrator
 * (`farmhand farm pool ...`, `farmhand farm node healthy`) and by the portal's health-check runner (health.ts).
 */
import type pg from 'pg';
import { FarmError, invalid } from '../../core/errors.js';
import { checkSatisfiable, matches, selectorText, type Labels } from '../../core/queue.js';
import { allNodeLabels } from './labels.js';

type Db = Pick<pg.Pool, 'query'>;
type Row = Record<string, unknown>;

/** The user a pool's health-check jobs run as, and who a check's verdict is `set_by` (as the node's own checks). */
export const POOL_CHECK_USER = 'farmhand';
/** Who the verdict of a check is set by in node_health (an administrator's put-back names the administrator). */
export const CHECK_SETTER = 'health-check';
/** The default interval of a pool's periodic check. */
export const DEFAULT_EVERY_HOURS = 24;
export const MAX_EVERY_HOURS = 8760;
export const MAX_REASON = 500;

export interface PoolHealthCheck {
  selector: string;
  labels: Labels;
  test_case: string;
  revision: string;
  every_hours: number;
  set_by: string;
  set_at: string;
}

export interface NodeHealth {
  node_id: string;
  state: 'healthy' | 'unhealthy';
  check_id: number | null;
  selector: string | null;
  test_case: string | null;
  result_id: string | null;
  reason: string | null;
  since: string;
  set_by: string;
}

export interface PoolMaintenanceRow {
  selector: string;
  labels: Labels;
  reason: string;
  set_by: string;
  since: string;
}

const iso = (v: unknown): string => (v instanceof Date ? v.toISOString() : String(v));

/** A test case as run_tests takes one: `path/to/file.py::test_name`. */
export function checkTestCase(tc: string): string {
  if (!/^[^\s:]+\.py::[A-Za-z_][A-Za-z0-9_]*$/.test(tc)) throw invalid(`${JSON.stringify(tc)} is not a test case: give file.py::test_name, e.g. tests/health.py::test_ok`);
  return tc;
}

/** Hours between periodic checks: 0 (only when a node comes back online) to a year. */
export function checkEveryHours(v: number): number {
  if (!Number.isFinite(v) || v < 0 || v > MAX_EVERY_HOURS) throw invalid(`--every-hours must be a number of hours from 0 (only when a node comes back online) to ${MAX_EVERY_HOURS}`);
  return v;
}

/** A pool's selector must match a registered node (a typo is said at once, as for a queued job). */
async function knownPool(db: Db, labels: Labels): Promise<string[]> {
  const all = await allNodeLabels(db);
  checkSatisfiable(labels, all);
  return [...all].filter(([, l]) => matches(l, labels)).map(([id]) => id);
}

const presentCheck = (r: Record<string, unknown>): PoolHealthCheck => ({
  selector: r.selector as string,
  labels: r.labels as Labels,
  test_case: r.test_case as string,
  revision: r.revision as string,
  every_hours: Number(r.every_hours),
  set_by: r.set_by as string,
  set_at: iso(r.set_at),
});

export async function poolHealthChecks(db: Db): Promise<PoolHealthCheck[]> {
  const { rows } = await db.query<Row>('SELECT * FROM pool_health_checks ORDER BY selector');
  return rows.map(presentCheck);
}

/** The check a node takes: that of its pool with the most labels, then the first selector in order; undefined: none. */
export function checkFor(labels: Labels, checks: readonly PoolHealthCheck[]): PoolHealthCheck | undefined {
  const mine = checks.filter((c) => matches(labels, c.labels));
  mine.sort((a, b) => Object.keys(b.labels).length - Object.keys(a.labels).length || (a.selector < b.selector ? -1 : a.selector > b.selector ? 1 : 0));
  return mine[0];
}

/** Set (or replace) a pool's health check; returns the one before (null) and the nodes it applies to. */
export async function setPoolHealthCheck(
  db: Db,
  labels: Labels,
  o: { test_case: string; every_hours: number; revision: string; by: string },
): Promise<{ before: PoolHealthCheck | null; after: PoolHealthCheck; nodes: string[] }> {
  const nodes = await knownPool(db, labels);
  const selector = selectorText(labels);
  const before = (await db.query<Row>('SELECT * FROM pool_health_checks WHERE selector = $1', [selector])).rows[0];
  const { rows } = await db.query<Row>(
    `INSERT INTO pool_health_checks (selector, labels, test_case, revision, every_hours, set_by) VALUES ($1, $2, $3, $4, $5, $6)
     ON CONFLICT (selector) DO UPDATE SET test_case = EXCLUDED.test_case, revision = EXCLUDED.revision, every_hours = EXCLUDED.every_hours,
       set_by = EXCLUDED.set_by, set_at = now() RETURNING *`,
    [selector, JSON.stringify(labels), checkTestCase(o.test_case), o.revision, checkEveryHours(o.every_hours), o.by],
  );
  return { before: before ? presentCheck(before) : null, after: presentCheck(rows[0]!), nodes };
}

/**
 * Remove a pool's health check. The verdicts its checks left (a node unhealthy by it) go with it: with no check, nothing
 * would ever bring such a node back.
 */
export async function removePoolHealthCheck(db: Db, labels: Labels): Promise<{ removed: PoolHealthCheck; cleared: string[] }> {
  const selector = selectorText(labels);
  const { rows } = await db.query<Row>('DELETE FROM pool_health_checks WHERE selector = $1 RETURNING *', [selector]);
  if (!rows[0]) throw new FarmError('not_found', `the pool ${selector} has no health check; farmhand farm pool health-check ${selector} TEST_CASE sets one`);
  const cleared = await db.query<{ node_id: string }>(`DELETE FROM node_health WHERE selector = $1 AND set_by = $2 RETURNING node_id`, [selector, CHECK_SETTER]);
  return { removed: presentCheck(rows[0]), cleared: cleared.rows.map((r) => r.node_id).sort() };
}

const presentHealth = (r: Record<string, unknown>): NodeHealth => ({
  node_id: r.node_id as string,
  state: r.state as NodeHealth['state'],
  check_id: r.check_id === null ? null : Number(r.check_id),
  selector: r.selector as string | null,
  test_case: r.test_case as string | null,
  result_id: r.result_id as string | null,
  reason: r.reason as string | null,
  since: iso(r.since),
  set_by: r.set_by as string,
});

/** Every node's health as its last check (or an administrator) left it; a node never checked is absent. */
export async function nodeHealthAll(db: Db): Promise<Map<string, NodeHealth>> {
  const { rows } = await db.query<Row>('SELECT * FROM node_health ORDER BY node_id');
  return new Map(rows.map((r) => [r.node_id as string, presentHealth(r)]));
}

/** `farmhand farm node healthy`: the administrator puts the node back, whatever its last check said. */
export async function markNodeHealthy(db: Db, nodeId: string, by: string): Promise<{ before: NodeHealth | null; after: NodeHealth }> {
  const known = await db.query<Row>('SELECT 1 FROM nodes WHERE node_id = $1', [nodeId]);
  if (known.rowCount === 0) throw new FarmError('not_found', `no node ${JSON.stringify(nodeId)} is registered; farmhand farm node list shows them`);
  const before = (await db.query<Row>('SELECT * FROM node_health WHERE node_id = $1', [nodeId])).rows[0];
  const { rows } = await db.query<Row>(
    `INSERT INTO node_health (node_id, state, check_id, selector, test_case, result_id, reason, set_by) VALUES ($1, 'healthy', NULL, NULL, NULL, NULL, 'put back by an administrator', $2)
     ON CONFLICT (node_id) DO UPDATE SET state = 'healthy', check_id = NULL, selector = NULL, test_case = NULL, result_id = NULL, reason = EXCLUDED.reason, since = now(), set_by = EXCLUDED.set_by
     RETURNING *`,
    [nodeId, by],
  );
  return { before: before ? presentHealth(before) : null, after: presentHealth(rows[0]!) };
}

/** The text of a node's unhealthy availability: what failed, where its result is. */
export function unhealthyDetail(h: NodeHealth): string {
  const result = h.result_id ? `, result ${h.result_id}` : '';
  return `health check failed: ${h.test_case ?? 'the check'} (pool ${h.selector ?? '?'}${result}): ${h.reason ?? 'no reason given'}`;
}

// ---------------------------------------------------------------- maintenance

const presentMaintenance = (r: Record<string, unknown>): PoolMaintenanceRow => ({
  selector: r.selector as string,
  labels: r.labels as Labels,
  reason: r.reason as string,
  set_by: r.set_by as string,
  since: iso(r.since),
});

export async function poolMaintenances(db: Db): Promise<PoolMaintenanceRow[]> {
  const { rows } = await db.query<Row>('SELECT * FROM pool_maintenance ORDER BY selector');
  return rows.map(presentMaintenance);
}

/** One line, no control characters, at most MAX_REASON: it becomes each node's maintenance message. */
export function checkReason(reason: string): string {
  const r = reason.trim();
  if (r === '') throw invalid('--reason is required: say why and until when (each node of the pool shows it)');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(r)) throw invalid('--reason must be one line without control characters');
  if (r.length > MAX_REASON) throw invalid(`--reason is too long: at most ${MAX_REASON} characters`);
  return r;
}

/** Put a pool in maintenance (again: the new reason replaces the old); returns the row before and the pool's nodes. */
export async function setPoolMaintenance(db: Db, labels: Labels, reason: string, by: string): Promise<{ before: PoolMaintenanceRow | null; after: PoolMaintenanceRow; nodes: string[] }> {
  const nodes = await knownPool(db, labels);
  const selector = selectorText(labels);
  const before = (await db.query<Row>('SELECT * FROM pool_maintenance WHERE selector = $1', [selector])).rows[0];
  const { rows } = await db.query<Row>(
    `INSERT INTO pool_maintenance (selector, labels, reason, set_by) VALUES ($1, $2, $3, $4)
     ON CONFLICT (selector) DO UPDATE SET reason = EXCLUDED.reason, set_by = EXCLUDED.set_by, since = now() RETURNING *`,
    [selector, JSON.stringify(labels), checkReason(reason), by],
  );
  return { before: before ? presentMaintenance(before) : null, after: presentMaintenance(rows[0]!), nodes };
}

/** End a pool's maintenance; not_found when it is not in maintenance. */
export async function endPoolMaintenance(db: Db, labels: Labels): Promise<{ before: PoolMaintenanceRow; nodes: string[] }> {
  const selector = selectorText(labels);
  const { rows } = await db.query<Row>('DELETE FROM pool_maintenance WHERE selector = $1 RETURNING *', [selector]);
  if (!rows[0]) throw new FarmError('not_found', `the pool ${selector} is not in maintenance`);
  const all = await allNodeLabels(db);
  return { before: presentMaintenance(rows[0]), nodes: [...all].filter(([, l]) => matches(l, labels)).map(([id]) => id) };
}

/** The message a pool's maintenance puts on each of its nodes; `poolOfMessage` reads the pool back from it. */
export const poolMessage = (m: Pick<PoolMaintenanceRow, 'selector' | 'reason'>): string => `pool ${m.selector}: ${m.reason}`;
export const poolOfMessage = (message: string | undefined | null): string | undefined => /^pool (\S+): /.exec(message ?? '')?.[1];
