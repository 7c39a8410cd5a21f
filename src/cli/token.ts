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
import { parseArgs } from 'node:util';
import { isFarmError } from '../core/errors.js';
import { isValidUserName, parseToken, TOKEN_ID_RE } from '../core/auth.js';
import { ConfigError, EX_CONFIG, loadConfig } from '../config/load.js';
import { TokenFileError, TokenStore, tokensFile } from '../storage/tokens.js';

const EX_USAGE = 64;

export const TOKEN_USAGE = `usage:
  farmhand token create --user <name> (--config FILE | --data-dir DIR)
  farmhand token list                 (--config FILE | --data-dir DIR)
  farmhand token revoke <id>          (--config FILE | --data-dir DIR)
`;

class UsageError extends Error {}

/** Exit codes: 0 done, 1 failed (unknown id, unusable tokens file), 64 bad usage, 78 bad config. */
export async function tokenCommand(argv: string[], out: Writable, err: Writable): Promise<number> {
  let parsed;
  try {
    parsed = parseCommand(argv);
  } catch (e) {
    if (!(e instanceof UsageError) && !(e as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) throw e;
    err.write(`farmhand token: ${(e as Error).message}\n${TOKEN_USAGE}`);
    return EX_USAGE;
  }
  if (parsed === 'help') {
    out.write(TOKEN_USAGE);
    return 0;
  }
  let dataDir: string;
  try {
    dataDir = parsed.config === undefined ? resolve(parsed.dataDir!) : loadConfig(parsed.config, { data_dir: parsed.dataDir }).data_dir;
  } catch (e) {
    if (!(e instanceof ConfigError)) throw e;
    err.write(`farmhand token: ${e.message}\n`);
    return EX_CONFIG;
  }
  const store = new TokenStore(tokensFile(dataDir));
  try {
    return await run(parsed, store, out, err);
  } catch (e) {
    if (e instanceof TokenFileError || isFarmError(e) || typeof (e as NodeJS.ErrnoException).code === 'string') {
      err.write(`farmhand token: ${(e as Error).message}\n`);
      return 1;
    }
    throw e;
  }
}

interface Parsed {
  sub: 'create' | 'list' | 'revoke';
  user?: string;
  id?: string;
  config?: string;
  dataDir?: string;
}

function parseCommand(argv: string[]): Parsed | 'help' {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    strict: true,
    options: {
      user: { type: 'string', short: 'u' },
      config: { type: 'string', short: 'c' },
      'data-dir': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  const [sub, ...rest] = positionals;
  if (sub !== 'create' && sub !== 'list' && sub !== 'revoke') {
    throw new UsageError(sub === undefined ? 'a subcommand is required' : `unknown subcommand ${JSON.stringify(sub)}`);
  }
  if (values.config === undefined && values['data-dir'] === undefined) {
    throw new UsageError('--config FILE or --data-dir DIR is required');
  }
  const expected = sub === 'revoke' ? 1 : 0;
  if (rest.length !== expected) throw new UsageError(sub === 'revoke' ? 'revoke takes one token id' : `${sub} takes no arguments`);
  if (sub === 'create' && values.user === undefined) throw new UsageError('create needs --user <name>');
  if (values.user !== undefined && !isValidUserName(values.user)) {
    throw new UsageError(`user name ${JSON.stringify(values.user)} is not allowed: 1 to 64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit`);
  }
  if (sub !== 'create' && values.user !== undefined) throw new UsageError('--user is only for create');
  return { sub, user: values.user, id: rest[0], config: values.config, dataDir: values['data-dir'] };
}

async function run(p: Parsed, store: TokenStore, out: Writable, err: Writable): Promise<number> {
  switch (p.sub) {
    case 'create': {
      const { token, entry } = await store.create(p.user!);
      // The token alone on stdout, so `TOKEN=$(farmhand token create ...)` works; the rest for the person.
      out.write(`${token}\n`);
      err.write(`created token ${entry.id} for user ${entry.user}; it is shown only this once, store it now\n`);
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
      if (!removed) {
        err.write(`farmhand token: no token with id ${id} ('farmhand token list' shows the ids)\n`);
        return 1;
      }
      out.write(`revoked token ${removed.id} of user ${removed.user}\n`);
      return 0;
    }
  }
}

function formatTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) => r.map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!))).join('  ')).join('\n') + '\n';
}
