/**
 * `farmhand token create|list|revoke`: manage the node's v2 access tokens on
 * the appliance itself (the spec's portal menu has no counterpart on a
 * single node). Writes `<data_dir>/tokens.json`; a running daemon sees each
 * change on its next request.
 *
 * Where the data directory comes from: with `--config FILE` the file is
 * loaded exactly as `serve` loads it (a bad config exits 78), `--data-dir`
 * overriding its `data_dir`; with `--data-dir DIR` alone no config is read
 * (so it works before a config exists). One of the two is required: the
 * command never guesses a directory.
 */
import type { Writable } from 'node:stream';
import { resolve } from 'node:path';
import { isFarmError } from '../core/errors.js';
import { parseToken, TOKEN_ID_RE } from '../core/auth.js';
import { ConfigError, EX_CONFIG, loadConfig } from '../config/load.js';
import type { Role } from '../core/roles.js';
import { roleIn, TokenFileError, TokenStore, tokensFile, UNLISTED_ROLE } from '../storage/tokens.js';
import { userInfo } from 'node:os';
import type { AuditAction } from '../core/audit.js';
import { appendAuditEntry } from '../storage/auditLog.js';

/** The parsed command (src/cli/program.ts parses the command line). */
export interface TokenArgs {
  sub: 'create' | 'list' | 'revoke' | 'role' | 'users';
  user?: string;
  /** create: also set the user's role; role: the new role (undefined: remove it). */
  role?: Role | undefined;
  id?: string;
  config?: string;
  dataDir?: string;
}

/** `farmhand token ...` from its arguments (after `token`), as main.ts would run it. */
export async function tokenCommand(argv: string[], out: Writable, err: Writable): Promise<number> {
  const { runCli } = await import('./program.js');
  return runCli(['token', ...argv], { out, err }, { serve: () => Promise.reject(new Error('not here')) });
}

/** Exit codes: 0 done, 1 failed (unknown id, unusable tokens file), 78 bad config. */
export async function runTokenCommand(parsed: TokenArgs, out: Writable, err: Writable): Promise<number> {
  let dataDir: string;
  try {
    dataDir = parsed.config === undefined ? resolve(parsed.dataDir!) : loadConfig(parsed.config, { data_dir: parsed.dataDir }).data_dir;
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    err.write(`farmhand token: ${e.message}\n`);
    return EX_CONFIG;
  }
  const store = new TokenStore(tokensFile(dataDir));
  const audit: CliAudit = (action, target, detail, outcome) => recordCliAudit(dataDir, { action, target, detail, outcome }, err);
  try {
    return await run(parsed, store, out, err, audit);
  } catch (e) {
    if (e instanceof TokenFileError || isFarmError(e) || typeof (e as NodeJS.ErrnoException).code === 'string') {
      err.write(`farmhand token: ${(e as Error).message}\n`);
      return 1;
    }
    throw e;
  }
}

type CliAudit = (action: AuditAction, target: string | null, detail: Record<string, unknown>, outcome: number) => void;

/**
 * Write a CLI action to the node's audit trail (docs/auth.md, "Audit trail"): who is `cli`, the operating
 * system's user in `detail.os_user`. A failure to write is said on stderr; the action itself stands.
 */
export function recordCliAudit(dataDir: string, e: { action: AuditAction; target: string | null; detail: Record<string, unknown>; outcome: number; node?: string | null }, err: Writable): void {
  let osUser: string | null = null;
  try {
    osUser = userInfo().username;
  } catch {
    // no passwd entry for this uid
  }
  try {
    appendAuditEntry(dataDir, {
      at: new Date().toISOString(),
      who: 'cli',
      via: 'cli',
      token_id: null,
      from: null,
      action: e.action,
      node: e.node ?? null,
      target: e.target,
      detail: { ...e.detail, os_user: osUser, uid: process.getuid?.() ?? null },
      outcome: e.outcome,
    });
  } catch (x) {
    err.write(`farmhand: warning: the audit trail could not record ${e.action}: ${(x as Error).message}\n`);
  }
}

async function run(p: TokenArgs, store: TokenStore, out: Writable, err: Writable, audit: CliAudit): Promise<number> {
  switch (p.sub) {
    case 'create': {
      const before = p.role === undefined ? undefined : (await store.read()).roles;
      const { token, entry } = await store.create(p.user!, p.role === undefined ? {} : { role: p.role });
      audit('token.create', entry.id, { user: entry.user, ...(p.role === undefined ? {} : { role: p.role }) }, 0);
      // The token alone on stdout, so `TOKEN=$(farmhand token create ...)` works; the rest for the person.
      out.write(`${token}\n`);
      err.write(`created token ${entry.id} for user ${entry.user}${p.role ? ` (role ${p.role})` : ''}; it is shown only this once, store it now\n`);
      if (before) await warnFirstRole(store, before, err);
      return 0;
    }
    case 'role': {
      const { before, after } = await store.setRole(p.user!, p.role);
      audit('user.role', p.user!, { before: roleIn(before, p.user!) ?? null, after: roleIn(after, p.user!) ?? null }, 0);
      const was = roleIn(before, p.user!) ?? 'no role (roles not configured)';
      const now = roleIn(after, p.user!) ?? 'no role (roles not configured: everyone signed in may do everything)';
      out.write(`${p.user}: ${was} -> ${now}; this applies to the user's tokens and sessions on their next request\n`);
      await warnFirstRole(store, before, err);
      return 0;
    }
    case 'users': {
      const c = await store.read();
      const names = [...new Set([...c.tokens.map((t) => t.user), ...Object.keys(c.roles)])].sort();
      const count = (u: string) => String(c.tokens.filter((t) => t.user === u).length);
      const roleOf = (u: string) => (Object.hasOwn(c.roles, u) ? c.roles[u]! : Object.keys(c.roles).length > 0 ? `${UNLISTED_ROLE} (not set)` : '-');
      out.write(formatTable([['USER', 'ROLE', 'TOKENS'], ...names.map((u) => [u, roleOf(u), count(u)])]));
      if (Object.keys(c.roles).length === 0) err.write('no roles are configured: everyone signed in may do everything\n');
      return 0;
    }
    case 'list': {
      const tokens = await store.list();
      out.write(formatTable([['ID', 'USER', 'CREATED'], ...tokens.map((t) => [t.id, t.user, t.created])]));
      return 0;
    }
    case 'revoke': {
      // Accept the whole token too: someone holding a leaked token can revoke it without looking up its id.
      const id = parseToken(p.id!)?.id ?? p.id!;
      if (!TOKEN_ID_RE.test(id)) {
        err.write(`farmhand token: ${JSON.stringify(p.id)} is not a token id (8 hex digits, as 'farmhand token list' shows)\n`);
        return 1;
      }
      const removed = await store.revoke(id);
      audit('token.revoke', id, removed ? { user: removed.user } : { unknown: true }, removed ? 0 : 1);
      if (!removed) {
        err.write(`farmhand token: no token with id ${id} ('farmhand token list' shows the ids)\n`);
        return 1;
      }
      out.write(`revoked token ${removed.id} of user ${removed.user}\n`);
      return 0;
    }
  }
}

/** The first role set on a node changes what everyone else may do: say whom it lowered to `read`. */
async function warnFirstRole(store: TokenStore, before: Record<string, Role>, err: Writable): Promise<void> {
  if (Object.keys(before).length > 0) return;
  const c = await store.read();
  if (Object.keys(c.roles).length === 0) return;
  const lowered = [...new Set(c.tokens.map((t) => t.user))].filter((u) => !Object.hasOwn(c.roles, u)).sort();
  err.write(
    `roles are now in force on this node: a user without a role may only read (${UNLISTED_ROLE})` +
      (lowered.length ? `; that is now ${lowered.join(', ')} (give them a role: farmhand user role <name> <role>)` : '') +
      '. Roles bind callers with a token or a session: unless the config sets auth.v1_requires_token to true, callers without a token still use v1 and the pages as before\n',
  );
}

function formatTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}
