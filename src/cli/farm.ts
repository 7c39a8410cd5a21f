/**
 * `farmhand farm ...`: the farm's people, tokens and nodes, managed in its PostgreSQL database
 * (docs/farm.md, "People, tokens and node credentials"):
 *
 *   farmhand farm [--database CONNINFO | --config PORTAL.json] user add NAME [--role ROLE] | user role NAME ROLE | user list | user remove NAME
 *   farmhand farm ... token create USER [--expires-days N] | token list | token revoke ID
 *   farmhand farm ... node add ID | node list | node remove ID
 *   farmhand farm ... node label ID [KEY=VALUE ...] [--remove KEY ...]   (no change given: prints the labels)
 *   farmhand farm ... node healthy ID | node health
 *   farmhand farm ... pool health-check SELECTOR [TEST_CASE] [--every-hours N] [--revision REV] [--remove]
 *   farmhand farm ... pool maintenance SELECTOR [--reason TEXT | --end]
 *
 * The database: `--database`, else the `database` of `--config` (the portal's config file), else
 * the FARMHAND_DATABASE environment variable. Each command applies the farm's migrations first, so
 * it works before the portal has ever started.
 *
 * Exit status: 0 done; 1 refused (unknown user/token/node, name taken); 64 a command-line mistake
 * (no database given, a malformed connection string); 69 the database cannot be reached or refuses
 * us; 78 the portal config file cannot be read.
 */
import { readFileSync } from 'node:fs';
import type { Writable } from 'node:stream';
import { type Command, CommanderError, InvalidArgumentError } from 'commander';
import type pg from 'pg';
import type { AuditAction } from '../core/audit.js';
import { isFarmError } from '../core/errors.js';
import { LABEL_KEY, parseLabelAssignment, selectorText } from '../core/queue.js';
import { isRole, ROLES, type Role } from '../core/roles.js';
import type { CliIo } from './program.js';
import { registerPoolCommands, type PoolRun } from './farmPool.js';

export const EX_UNAVAILABLE = 69;
const EX_USAGE = 64;
/** As src/config/load.ts (not imported: it would load the node's config schema for every command). */
const EX_CONFIG = 78;

const NO_DATABASE = 'which database? give --database CONNINFO, --config PORTAL.json or set FARMHAND_DATABASE (e.g. postgresql:///farm?host=/run/postgresql)';

interface FarmOptions {
  database?: string;
  config?: string;
}

/** The one line program.ts adds: `farmhand farm` and its sub-commands. */
export function registerFarmCommand(program: Command, io: CliIo, setStatus: (code: number) => void): void {
  const farm = program
    .command('farm')
    .description("manage the farm's users, v2 tokens and nodes in its PostgreSQL database")
    .option('--database <conninfo>', 'PostgreSQL connection string, e.g. postgresql:///farm?host=/run/postgresql (else --config, else $FARMHAND_DATABASE)')
    .option('-c, --config <file>', "use the database of this portal config file")
    // Each sub-command's usage lists --database and --config too.
    .configureHelp({ showGlobalOptions: true });
  // commander calls an action with (arguments..., options, command); `args` are the first two parts.
  const act = (fn: (db: Db, args: unknown[]) => Promise<number>) => async (...all: unknown[]) => {
    const cmd = all[all.length - 1] as Command;
    const o = cmd.optsWithGlobals<FarmOptions>();
    if (o.database === undefined && o.config === undefined && !process.env.FARMHAND_DATABASE) {
      // A command-line mistake like any other: the usage, exit 64 (program.ts).
      io.err.write(`error: ${NO_DATABASE}\n\n`);
      cmd.outputHelp({ error: true });
      throw new CommanderError(EX_USAGE, 'farmhand.usage', NO_DATABASE);
    }
    setStatus(await withDatabase(o, io, (db) => fn(db, all.slice(0, -1))));
  };
  const str = (v: unknown) => v as string;

  const user = farm.command('user').description('people (and programs) who use the farm');
  user
    .command('add')
    .description('add a user')
    .argument('<name>', 'the user name')
    .option('--role <role>', `what the user may do: ${ROLES.join(', ')} (default run)`, parseRole)
    .action(act((db, [name, o]) => userAdd(db, str(name), (o as { role?: Role }).role)));
  user
    .command('role')
    .description("change a user's role; it applies to the user's tokens and sessions at once")
    .argument('<name>', 'the user name')
    .argument('<role>', ROLES.join(', '), parseRole)
    .action(act((db, [name, role]) => userRole(db, str(name), role as Role)));
  user.command('list').description('list the users').action(act((db) => userList(db)));
  user.command('remove').description('remove a user and its tokens').argument('<name>', 'the user name').action(act((db, [name]) => userRemove(db, str(name))));

  const token = farm.command('token').description("users' v2 access tokens");
  token
    .command('create')
    .description('make a token for a user; prints it once')
    .argument('<user>', 'who the token is for')
    .option('--expires-days <n>', 'the token stops working after this many days (default: never)', parseDays)
    .action(act((db, [name, o]) => tokenCreate(db, str(name), (o as { expiresDays?: number }).expiresDays)));
  token.command('list').description('list the tokens (never their secrets)').action(act((db) => tokenList(db)));
  token.command('revoke').description('revoke a token').argument('<id>', "the token's id (or the whole token)").action(act((db, [id]) => tokenRevoke(db, str(id))));

  const node = farm.command('node').description('the nodes allowed to join the farm');
  node.command('add').description("register a node (or re-key it); prints its credential once").argument('<id>', "the node's node_id").action(act((db, [id]) => nodeAdd(db, str(id))));
  node.command('list').description('list the registered nodes').action(act((db) => nodeList(db)));
  node
    .command('label')
    .description("set or remove a node's labels (device=roku-ultra room=lab2), which queued jobs select nodes by; with none given, print them")
    .argument('<id>', "the node's node_id")
    .argument('[labels...]', 'key=value to set (a key already set gets the new value)', parseLabel, [])
    .option('--remove <key>', 'remove this label (repeatable)', collectKey, [])
    .action(act((db, [id, labels, o]) => nodeLabel(db, str(id), labels as [string, string][], (o as { remove: string[] }).remove)));
  node.command('remove').description('remove a node, its jobs and its reservations').argument('<id>', "the node's node_id").action(act((db, [id]) => nodeRemove(db, str(id))));
  registerPoolCommands(farm, node, poolRun(act));
}

type Act = (fn: (db: Db, args: unknown[]) => Promise<number>) => (...all: unknown[]) => Promise<void>;

/** Pools' health checks and maintenance, a node put back (src/cli/farmPool.ts): each command's audit entry and output. */
function poolRun(act: Act): PoolRun {
  return (fn) =>
    act(async (db, args) => {
      const done = await fn(await import('../farm/queue/poolCommands.js'), db.pool, args);
      if (done.audit) await audit(db, done.audit.action, done.audit.target, done.audit.detail);
      db.out.write(done.out.map((l) => `${l}\n`).join(''));
      return 0;
    });
}

function parseRole(value: string): Role {
  if (!isRole(value)) throw new InvalidArgumentError(`one of ${ROLES.join(', ')}`);
  return value;
}

function parseLabel(value: string, previous: [string, string][]): [string, string][] {
  try {
    return [...previous, parseLabelAssignment(value, 'label')];
  } catch (e) {
    throw new InvalidArgumentError((e as Error).message);
  }
}

function collectKey(value: string, previous: string[]): string[] {
  if (!LABEL_KEY.test(value)) throw new InvalidArgumentError(`${JSON.stringify(value)} is not a label key (lower case letters, digits, ".", "_", "-", "/", starting with a letter)`);
  return [...previous, value];
}

function parseDays(value: string): number {
  if (!/^[1-9]\d{0,4}$/.test(value)) throw new InvalidArgumentError('a whole number of days from 1 to 99999');
  return Number(value);
}

/** `farmhand farm ...` from its arguments (after `farm`), for in-process tests. */
export async function farmCommand(argv: string[], out: Writable, err: Writable): Promise<number> {
  const { runCli } = await import('./program.js');
  return runCli(['farm', ...argv], { out, err }, { serve: () => Promise.reject(new Error('not here')) });
}

interface Db {
  pool: pg.Pool;
  out: Writable;
  err: Writable;
}

class CliFailure extends Error {
  constructor(
    readonly exitCode: number,
    message: string,
  ) {
    super(message);
  }
}

/** Where the connection string comes from, for the messages. */
function resolveDatabase(o: FarmOptions): { conninfo: string; source: string } {
  if (o.database !== undefined) return { conninfo: o.database, source: '--database' };
  if (o.config !== undefined) {
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(o.config, 'utf8'));
    } catch (e) {
      const why = e instanceof SyntaxError ? `not valid JSON (${e.message})` : `cannot read (${(e as NodeJS.ErrnoException).code ?? String(e)})`;
      throw new CliFailure(EX_CONFIG, `${o.config}: ${why}`);
    }
    const db = (raw as { database?: unknown } | null)?.database;
    if (typeof db !== 'string' || db === '') throw new CliFailure(EX_CONFIG, `${o.config}: no "database" connection string in it`);
    return { conninfo: db, source: o.config };
  }
  const env = process.env.FARMHAND_DATABASE;
  if (env) return { conninfo: env, source: 'FARMHAND_DATABASE' };
  throw new CliFailure(EX_USAGE, NO_DATABASE);
}

/** The connection string without its password, for messages. */
const redact = (conninfo: string): string => conninfo.replace(/^(postgres(?:ql)?:\/\/[^:@/]*:)[^@/]*@/, '$1***@').replace(/([?&]password=)[^&]*/, '$1***');

/**
 * Only the URL form (what the portal config takes). pg parses it itself (its parser accepts forms
 * WHATWG URL refuses, e.g. `postgresql://user@/db?host=/run/postgresql`), so the scheme is checked
 * here and the rest is reported when pg cannot parse it.
 */
function malformed(conninfo: string, source: string, why = ''): CliFailure {
  const code = source === '--database' || source === 'FARMHAND_DATABASE' ? EX_USAGE : EX_CONFIG;
  return new CliFailure(
    code,
    `${source}: ${JSON.stringify(redact(conninfo))} is not a PostgreSQL connection URL${why ? ` (${why})` : ''}; e.g. postgresql:///farm?host=/run/postgresql or postgresql://user:password@host:5432/farm`,
  );
}

/** Errors that mean "the database is not there (or not for us)", as opposed to a refused operation. */
const NET_CODES = new Set(['ECONNREFUSED', 'ENOENT', 'EACCES', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN', 'ECONNRESET', 'EPIPE']);
function isConnectionError(e: unknown): boolean {
  const code = (e as { code?: unknown }).code;
  if (typeof code === 'string' && (NET_CODES.has(code) || /^(08|28|3D|57P)/.test(code))) return true;
  return e instanceof Error && /timeout|terminated|Connection terminated/i.test(e.message);
}

async function withDatabase(o: FarmOptions, io: CliIo, fn: (db: Db) => Promise<number>): Promise<number> {
  let pool: pg.Pool | undefined;
  let where = '';
  try {
    const { conninfo, source } = resolveDatabase(o);
    if (!/^postgres(ql)?:\/\//.test(conninfo)) throw malformed(conninfo, source);
    where = redact(conninfo);
    const { default: pgLib } = await import('pg');
    try {
      pool = new pgLib.Pool({ connectionString: conninfo, max: 2, connectionTimeoutMillis: 10_000 });
      pool.on('error', () => undefined); // an idle client's error surfaces in the next query instead
      await pool.query('SELECT 1');
    } catch (e) {
      if (e instanceof TypeError) throw malformed(conninfo, source, e.message);
      throw new CliFailure(EX_UNAVAILABLE, `cannot use the database ${where}: ${(e as Error).message}`);
    }
    const { migrate } = await import('../farm/db/migrate.js');
    await migrate(pool);
    return await fn({ pool, out: io.out, err: io.err });
  } catch (e) {
    if (e instanceof CliFailure) {
      io.err.write(`farmhand farm: ${e.message}\n`);
      return e.exitCode;
    }
    if (isFarmError(e)) {
      io.err.write(`farmhand farm: ${e.message}\n`);
      return 1;
    }
    if (isConnectionError(e)) {
      io.err.write(`farmhand farm: lost the database ${where}: ${(e as Error).message}\n`);
      return EX_UNAVAILABLE;
    }
    throw e;
  } finally {
    await pool?.end().catch(() => undefined);
  }
}

// ------------------------------------------------------------------ the sub-commands

/** Write a command's action to the farm's audit trail (src/farm/audit.ts); a failure is a warning, the action stands. */
async function audit({ pool, err }: Db, action: AuditAction, target: string, detail: Record<string, unknown> = {}): Promise<void> {
  const { insertAuditEntries, commandEntry } = await import('../farm/audit.js');
  await insertAuditEntries(pool, [commandEntry(action, target, detail)]).catch((e: unknown) => err.write(`farmhand farm: warning: the audit trail could not record ${action}: ${(e as Error).message}\n`));
}

async function userAdd(db: Db, name: string, role: Role | undefined): Promise<number> {
  const { pool, out } = db;
  const { PgUsers } = await import('../farm/users.js');
  const added = await new PgUsers(pool).add(name, ...(role === undefined ? [] : [role]));
  await audit(db, 'user.create', name, { role: added.role });
  out.write(`added user ${name} (role ${added.role}); make it a token: farmhand farm token create ${name}\n`);
  return 0;
}

async function userRole(db: Db, name: string, role: Role): Promise<number> {
  const { pool, out } = db;
  const { PgUsers } = await import('../farm/users.js');
  const { before, after } = await new PgUsers(pool).setRole(name, role);
  await audit(db, 'user.role', name, { before, after });
  out.write(`${name}: ${before} -> ${after}; this applies to the user's tokens and sessions at once\n`);
  return 0;
}

async function userList({ pool, out }: Db): Promise<number> {
  const { PgUsers } = await import('../farm/users.js');
  const users = await new PgUsers(pool).list();
  out.write(table([['USER', 'ROLE', 'TOKENS', 'CREATED'], ...users.map((u) => [u.username, u.role, String(u.tokens), u.created])]));
  return 0;
}

async function userRemove(db: Db, name: string): Promise<number> {
  const { pool, out } = db;
  const { PgUsers } = await import('../farm/users.js');
  const users = new PgUsers(pool);
  const tokens = (await users.get(name))?.tokens ?? 0;
  await users.remove(name);
  await audit(db, 'user.remove', name, { tokens });
  out.write(`removed user ${name} and its ${tokens} token${tokens === 1 ? '' : 's'}\n`);
  return 0;
}

async function tokenCreate(db: Db, user: string, days: number | undefined): Promise<number> {
  const { pool, out, err } = db;
  const { PgTokens } = await import('../farm/users.js');
  const { token, entry } = await new PgTokens(pool).createToken(user, days === undefined ? {} : { expiresInSecs: days * 86_400 });
  await audit(db, 'token.create', entry.id, { user: entry.user, expires: entry.expires ?? null });
  // The token alone on stdout, so `TOKEN=$(farmhand farm token create ...)` works; the rest for the person.
  out.write(`${token}\n`);
  err.write(`created token ${entry.id} for user ${entry.user}${entry.expires ? `, valid until ${entry.expires}` : ''}; it is shown only this once, store it now\n`);
  return 0;
}

async function tokenList({ pool, out }: Db): Promise<number> {
  const { PgTokens } = await import('../farm/users.js');
  const now = Date.now();
  const state = (t: { revoked: string | null; expires: string | null }) =>
    t.revoked ? `revoked ${t.revoked}` : t.expires && Date.parse(t.expires) <= now ? `expired ${t.expires}` : t.expires ? `valid until ${t.expires}` : 'valid';
  const tokens = await new PgTokens(pool).list();
  out.write(table([['ID', 'USER', 'CREATED', 'STATE'], ...tokens.map((t) => [t.id, t.user, t.created, state(t)])]));
  return 0;
}

async function tokenRevoke(db: Db, id: string): Promise<number> {
  const { pool, out } = db;
  const { PgTokens } = await import('../farm/users.js');
  const t = await new PgTokens(pool).revoke(id);
  await audit(db, 'token.revoke', t.id, { user: t.user });
  out.write(`revoked token ${t.id} of user ${t.user}\n`);
  return 0;
}

async function nodeAdd(db: Db, id: string): Promise<number> {
  const { pool, out, err } = db;
  const { checkNodeId, registerNode } = await import('../farm/nodeCredentials.js');
  checkNodeId(id);
  const existed = ((await pool.query('SELECT 1 FROM nodes WHERE node_id = $1', [id])).rowCount ?? 0) > 0;
  const credential = await registerNode(pool, id);
  await audit(db, 'node.add', id, { rekeyed: existed });
  // The credential alone on stdout: `farmhand farm node add stb-1 > node-credential` writes the file.
  out.write(`${credential}\n`);
  err.write(
    `${existed ? `re-keyed node ${id}: its old credential no longer works` : `registered node ${id}`}.\n` +
      `Put this credential in the file the node's config names in portal.node_credential_file\n` +
      `(e.g. /etc/farmhand/node-credential, readable only by the user farmhand runs as).\n` +
      `It is shown only this once; 'farmhand farm node add ${id}' again makes a new one.\n`,
  );
  return 0;
}

async function nodeList({ pool, out }: Db): Promise<number> {
  const { listNodes } = await import('../farm/nodeCredentials.js');
  const nodes = await listNodes(pool);
  const state = (n: { online: boolean; offlineReason: string | null; hasCredential: boolean }) =>
    !n.hasCredential ? 'no credential' : n.online ? 'online' : n.offlineReason ? `offline: ${n.offlineReason}` : 'offline';
  out.write(
    table([
      ['NODE', 'STATE', 'LAST SEEN', 'VERSION', 'REGISTERED'],
      ...nodes.map((n) => [n.nodeId, state(n), n.lastSeen ?? '-', n.version ?? '-', n.registered]),
    ]),
  );
  return 0;
}

async function nodeLabel(db: Db, id: string, set: [string, string][], remove: string[]): Promise<number> {
  const { pool, out } = db;
  const { nodeLabels, setNodeLabels } = await import('../farm/queue/labels.js');
  if (set.length === 0 && remove.length === 0) {
    out.write(`${selectorText(await nodeLabels(pool, id)) || '(no labels)'}\n`);
    return 0;
  }
  const given = Object.fromEntries(set);
  if (set.length !== Object.keys(given).length) throw new CliFailure(EX_USAGE, 'a label key is given twice; give each key once');
  const { before, after } = await setNodeLabels(pool, id, given, remove);
  await audit(db, 'node.label', id, { before, after });
  out.write(`${id}: ${selectorText(after) || '(no labels)'}\n`);
  return 0;
}

async function nodeRemove(db: Db, id: string): Promise<number> {
  const { pool, out } = db;
  const { removeNode } = await import('../farm/nodeCredentials.js');
  const r = await removeNode(pool, id);
  await audit(db, 'node.remove', id);
  const active = r.activeReservations ? `, ${r.activeReservations} of them active` : '';
  out.write(`removed node ${id} (${r.jobs} job${r.jobs === 1 ? '' : 's'}, ${r.reservations} reservation row${r.reservations === 1 ? '' : 's'}${active}; its results stay)\n`);
  return 0;
}

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}
