/**
 * What `farmhand farm pool health-check`, `farmhand farm pool maintenance`, `farmhand farm node healthy` and
 * `farmhand farm node health` do (src/cli/farm.ts registers them; docs/health-checks.md): each changes the database in
 * one statement or prints, and returns the lines to print and the audit entry's detail. The portal's runner (health.ts)
 * and reconciler (pool.ts) hear of a change by the tables' triggers (NOTIFY farmhand, kinds node_health and
 * pool_maintenance).
 */
import type pg from 'pg';
import { invalid } from '../../core/errors.js';
import { parseSelector, selectorText } from '../../core/queue.js';
import {
  DEFAULT_EVERY_HOURS,
  endPoolMaintenance,
  markNodeHealthy,
  nodeHealthAll,
  poolHealthChecks,
  poolMaintenances,
  removePoolHealthCheck,
  setPoolHealthCheck,
  setPoolMaintenance,
  unhealthyDetail,
} from './poolStore.js';

type Db = Pick<pg.Pool, 'query'>;

/** What a command did: the lines for stdout, and (a change) the audit action's target and detail. */
export interface CommandDone {
  out: string[];
  audit?: { action: 'pool.health_check' | 'pool.maintenance' | 'node.healthy'; target: string; detail: Record<string, unknown> };
}

const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
const list = (nodes: string[]) => (nodes.length ? nodes.join(', ') : 'none connected yet');

export interface HealthCheckArgs {
  selector: string;
  testCase?: string | undefined;
  everyHours?: number | undefined;
  revision?: string | undefined;
  remove?: boolean | undefined;
  by: string;
}

/** `pool health-check SELECTOR [TEST_CASE] [--every-hours N] [--revision REV] [--remove]`; neither: print it. */
export async function poolHealthCheckCommand(db: Db, a: HealthCheckArgs): Promise<CommandDone> {
  const labels = parseSelector(a.selector, 'the pool');
  const selector = selectorText(labels);
  if (a.remove) {
    if (a.testCase !== undefined || a.everyHours !== undefined) throw invalid('--remove takes no test case nor --every-hours');
    const { removed, cleared } = await removePoolHealthCheck(db, labels);
    const back = cleared.length ? `; back in the pool (its check no longer holds them out): ${cleared.join(', ')}` : '';
    return { out: [`${selector}: health check ${removed.test_case} removed${back}`], audit: { action: 'pool.health_check', target: selector, detail: { before: removed, after: null, cleared } } };
  }
  if (a.testCase === undefined) {
    if (a.everyHours !== undefined || a.revision !== undefined) throw invalid('give the test case to change the check: farmhand farm pool health-check SELECTOR TEST_CASE --every-hours N');
    const c = (await poolHealthChecks(db)).find((x) => x.selector === selector);
    return { out: [c ? `${selector}: ${c.test_case} at ${c.revision}, ${every(c.every_hours)} (set by ${c.set_by}, ${c.set_at})` : `${selector}: no health check`] };
  }
  const { before, after, nodes } = await setPoolHealthCheck(db, labels, { test_case: a.testCase, every_hours: a.everyHours ?? DEFAULT_EVERY_HOURS, revision: a.revision ?? 'HEAD', by: a.by });
  return {
    out: [`${selector}: health check ${after.test_case} at ${after.revision}, ${every(after.every_hours)}, on ${plural(nodes.length, 'node')} (${list(nodes)}); it runs on each as soon as it is free`],
    audit: { action: 'pool.health_check', target: selector, detail: { before, after, nodes } },
  };
}

const every = (h: number) => (h === 0 ? 'when a node comes back online' : `when a node comes back online and every ${h} hour${h === 1 ? '' : 's'}`);

/** `pool maintenance SELECTOR --reason R | --end`; neither: print it. */
export async function poolMaintenanceCommand(db: Db, a: { selector: string; reason?: string | undefined; end?: boolean | undefined; by: string }): Promise<CommandDone> {
  const labels = parseSelector(a.selector, 'the pool');
  const selector = selectorText(labels);
  if (a.end) {
    if (a.reason !== undefined) throw invalid('give --reason to put the pool in maintenance or --end to take it out, not both');
    const { before, nodes } = await endPoolMaintenance(db, labels);
    return {
      out: [`${selector}: maintenance ended; ${plural(nodes.length, 'node')} taken out of it by the portal (${list(nodes)}), except those an administrator put in maintenance by themselves`],
      audit: { action: 'pool.maintenance', target: selector, detail: { on: false, before, nodes } },
    };
  }
  if (a.reason === undefined) {
    const m = (await poolMaintenances(db)).find((x) => x.selector === selector);
    return { out: [m ? `${selector}: in maintenance: ${m.reason} (${m.set_by}, since ${m.since})` : `${selector}: not in maintenance`] };
  }
  const { before, after, nodes } = await setPoolMaintenance(db, labels, a.reason, a.by);
  return {
    out: [`${selector}: in maintenance (${after.reason}); the portal puts its ${plural(nodes.length, 'node')} in maintenance (${list(nodes)}): running jobs finish, nothing new starts`],
    audit: { action: 'pool.maintenance', target: selector, detail: { on: true, before, after, nodes } },
  };
}

/** `node healthy ID`: the administrator puts the node back in its pool. */
export async function nodeHealthyCommand(db: Db, nodeId: string, by: string): Promise<CommandDone> {
  const { before, after } = await markNodeHealthy(db, nodeId, by);
  const was = before?.state === 'unhealthy' ? `was unhealthy: ${unhealthyDetail(before)}` : 'was not unhealthy';
  return { out: [`${nodeId}: healthy (${was}); queued jobs may take it again`], audit: { action: 'node.healthy', target: nodeId, detail: { before, after } } };
}

/** `node health`: each node's health as its last check or an administrator left it. */
export async function nodeHealthCommand(db: Db): Promise<CommandDone> {
  const rows = [...(await nodeHealthAll(db)).values()];
  const out = [['NODE', 'STATE', 'SINCE', 'POOL', 'RESULT', 'REASON'].join('\t')];
  for (const h of rows) out.push([h.node_id, h.state, h.since, h.selector ?? '-', h.result_id ?? '-', h.reason ?? '-'].join('\t'));
  return { out: rows.length ? out : ['no node has been checked yet'] };
}
