/**
 * `farmhand farm pool ...` and `farmhand farm node healthy | health`: pools' health checks and maintenance
 * (docs/health-checks.md). The work is src/farm/queue/poolCommands.ts, loaded when a command runs; farm.ts opens the
 * database and writes each command's audit entry and output (`PoolRun`).
 */
import { userInfo } from 'node:os';
import { type Command, InvalidArgumentError } from 'commander';
import type pg from 'pg';
import type { CommandDone } from '../farm/queue/poolCommands.js';

/** Run a pool command against the farm's database: farm.ts's, which audits what it did and prints its lines. */
export type PoolRun = (fn: (c: typeof import('../farm/queue/poolCommands.js'), pool: pg.Pool, args: unknown[]) => Promise<CommandDone>) => (...all: unknown[]) => Promise<void>;

/** Pools' health checks and maintenance, a node put back (docs/health-checks.md; src/farm/queue/poolCommands.ts). */
export function registerPoolCommands(farm: Command, node: Command, run: PoolRun): void {
  const pool = farm.command('pool').description('pools of nodes (a label selector, e.g. device=roku): their health check and maintenance');
  pool
    .command('health-check')
    .description("set, remove or (with neither) print a pool's health check: a test case run on each of its nodes when it comes back online and every N hours")
    .argument('<selector>', 'the pool: labels its nodes all have, e.g. device=roku or device=roku,room=lab2')
    .argument('[test_case]', 'the check, e.g. tests/health.py::test_ok')
    .option('--every-hours <n>', 'also every N hours after its last check (0: only when a node comes back online; default 24)', parseHours)
    .option('--revision <rev>', "the test pack's revision it runs at (default HEAD: the default branch)")
    .option('--remove', 'remove the check (the nodes it held out come back)')
    .action(run((c, db, [sel, tc, o]) => c.poolHealthCheckCommand(db, { selector: sel as string, testCase: tc as string | undefined, ...(o as object), by: osUser() })));
  pool
    .command('maintenance')
    .description('put every node of a pool in maintenance (running jobs finish, nothing new starts), end it, or (with neither) print it')
    .argument('<selector>', 'the pool: labels its nodes all have, e.g. device=roku')
    .option('--reason <text>', 'why, until when (each node shows it)')
    .option('--end', "end the pool's maintenance")
    .action(run((c, db, [sel, o]) => c.poolMaintenanceCommand(db, { selector: sel as string, ...(o as { reason?: string; end?: boolean }), by: osUser() })));
  node
    .command('healthy')
    .description('put a node whose health check failed back in its pool')
    .argument('<id>', "the node's node_id")
    .action(run((c, db, [id]) => c.nodeHealthyCommand(db, id as string, osUser())));
  node.command('health').description("each node's health as its pool's last check (or an administrator) left it").action(run((c, db) => c.nodeHealthCommand(db)));
}

function parseHours(value: string): number {
  if (!/^\d{1,4}(\.\d{1,3})?$/.test(value) || Number(value) > 8760) throw new InvalidArgumentError('a number of hours from 0 to 8760, e.g. 6 or 0.5');
  return Number(value);
}

/** Who a pool's change is set by (the nodes' maintenance names them): the operating system's user, as the audit's os_user. */
function osUser(): string {
  try {
    return userInfo().username;
  } catch {
    return 'cli';
  }
}
