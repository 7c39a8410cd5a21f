/**
 * The command line, parsed with commander:
 *
 *   farmhand serve [--config FILE] [--listen HOST:PORT] [--data-dir DIR] ...
 *   farmhand token create --user NAME [--role ROLE] | list | revoke ID   (--config FILE | --data-dir DIR)
 *   farmhand user role NAME ROLE|none | list                  (--config FILE | --data-dir DIR)
 *   farmhand portal --config FILE
 *   farmhand ir encode <file.lircd.conf> <KEY>... [--remote NAME] [--count N]
 *   farmhand --version | version | help [command]
 *
 * Every mistake on the command line (unknown command or option, a missing
 * value, a bad port) prints the usage of the command concerned and exits 64
 * (EX_USAGE), never a stack trace. The commands themselves live elsewhere;
 * `serve` is passed in by main.ts, which owns signals.
 */
import type { Writable } from 'node:stream';
import { Command, CommanderError, InvalidArgumentError } from 'commander';
import { isValidUserName } from '../core/auth.js';
import { isRole, ROLES, type Role } from '../core/roles.js';
import { version } from '../version.js';
import { registerFarmCommand } from './farm.js';

export const EX_USAGE = 64;

export interface CliIo {
  out: Writable;
  err: Writable;
}

export interface ServeOptions {
  config?: string;
  listen?: string;
  dataDir?: string;
  testPack?: string;
  nodeId?: string;
  capture?: string;
  ir?: string;
}

export interface CliCommands {
  serve(opts: ServeOptions): Promise<number>;
}

/** `HOST:PORT` with a port 0..65535 (IPv6 hosts in brackets); what config's `listen` takes. */
export function parseListen(value: string): string {
  const m = /^(\[[0-9a-fA-F:.]+\]|[^:[\]\s]+):(\d{1,5})$/.exec(value);
  if (!m || Number(m[2]) > 65535) throw new InvalidArgumentError('expected HOST:PORT with a port from 0 to 65535, e.g. 127.0.0.1:8080');
  return value;
}

export function parseRole(value: string): Role {
  if (!isRole(value)) throw new InvalidArgumentError(`one of ${ROLES.join(', ')}`);
  return value;
}

function parseUser(value: string): string {
  if (!isValidUserName(value)) {
    throw new InvalidArgumentError('1 to 64 letters, digits, ".", "_", "@" or "-", starting with a letter or digit');
  }
  return value;
}

function parseCount(value: string): string {
  if (!/^[1-9]\d*$/.test(value)) throw new InvalidArgumentError('a whole number >= 1');
  return value;
}

/** Run the command line `argv` (without node and script); resolves with the exit status. */
export async function runCli(argv: string[], io: CliIo, commands: CliCommands): Promise<number> {
  let status = 0;
  const program = new Command('farmhand')
    .description('a test node for set-top boxes, driven over the Test-Farm HTTP API')
    .exitOverride()
    .configureOutput({ writeOut: (s) => io.out.write(s), writeErr: (s) => io.err.write(s) })
    .showHelpAfterError()
    .version(version, '--version', 'print the version');

  program
    .command('serve')
    .description('run the daemon')
    .option('-c, --config <file>', 'the JSON config file')
    .option('--listen <host:port>', 'where the HTTP API listens', parseListen)
    .option('--data-dir <dir>', 'results, jobs, state')
    .option('--test-pack <path|url>', 'the test-pack git repository')
    .option('--node-id <id>', "this node's id")
    .option('--capture <uri>', 'the capture source (v4l2:, testsrc:, virtual:, none:, ...)')
    .option('--ir <uri>', 'the infrared transport (irtoy:, lircd:, virtual:, ...)')
    .action(async (opts: ServeOptions) => {
      status = await commands.serve(opts);
    });

  const token = program.command('token').description("manage the node's v2 access tokens");
  const dataDirOptions = (c: Command) =>
    c.option('-c, --config <file>', 'use the data_dir of this config file').option('--data-dir <dir>', 'the data directory (overrides the config)');
  const needDir = (c: Command, o: { config?: string; dataDir?: string }) => {
    if (o.config !== undefined || o.dataDir !== undefined) return;
    io.err.write('error: --config FILE or --data-dir DIR is required\n\n');
    c.outputHelp({ error: true });
    throw new CommanderError(EX_USAGE, 'farmhand.usage', '--config FILE or --data-dir DIR is required');
  };
  dataDirOptions(
    token
      .command('create')
      .description('make a token for a user; prints it once')
      .requiredOption('-u, --user <name>', 'who the token is for', parseUser)
      .option('--role <role>', `also set the user's role (${ROLES.join(', ')}); it applies to all of the user's tokens`, parseRole),
  ).action(async (o: { user: string; role?: Role; config?: string; dataDir?: string }, c: Command) => {
    needDir(c, o);
    const { runTokenCommand } = await import('./token.js');
    status = await runTokenCommand({ sub: 'create', user: o.user, role: o.role, config: o.config, dataDir: o.dataDir }, io.out, io.err);
  });
  dataDirOptions(token.command('list').description('list the tokens (never their secrets)')).action(async (o: { config?: string; dataDir?: string }, c: Command) => {
    needDir(c, o);
    const { runTokenCommand } = await import('./token.js');
    status = await runTokenCommand({ sub: 'list', config: o.config, dataDir: o.dataDir }, io.out, io.err);
  });
  dataDirOptions(token.command('revoke').description('remove a token').argument('<id>', "the token's id (or the whole token)")).action(
    async (id: string, o: { config?: string; dataDir?: string }, c: Command) => {
      needDir(c, o);
      const { runTokenCommand } = await import('./token.js');
      status = await runTokenCommand({ sub: 'revoke', id, config: o.config, dataDir: o.dataDir }, io.out, io.err);
    },
  );

  const user = program.command('user').description("the node's users and their roles (docs/auth.md, \"Roles\")");
  dataDirOptions(
    user
      .command('role')
      .description("set a user's role (none: remove it); it applies to the user's tokens and sessions on their next request")
      .argument('<name>', 'the user name', parseUser)
      .argument('<role>', `${ROLES.join(', ')} or none`, (v: string) => (v === 'none' ? 'none' : parseRole(v))),
  ).action(async (name: string, role: Role | 'none', o: { config?: string; dataDir?: string }, c: Command) => {
    needDir(c, o);
    const { runTokenCommand } = await import('./token.js');
    status = await runTokenCommand({ sub: 'role', user: name, role: role === 'none' ? undefined : role, config: o.config, dataDir: o.dataDir }, io.out, io.err);
  });
  dataDirOptions(user.command('list').description('list the users with tokens or roles, and their roles')).action(async (o: { config?: string; dataDir?: string }, c: Command) => {
    needDir(c, o);
    const { runTokenCommand } = await import('./token.js');
    status = await runTokenCommand({ sub: 'users', config: o.config, dataDir: o.dataDir }, io.out, io.err);
  });

  program
    .command('portal')
    .description('run the farm portal: every node of the farm behind one v2 endpoint, on PostgreSQL (docs/farm.md)')
    .requiredOption('-c, --config <file>', "the portal's JSON config file")
    .action(async (o: { config: string }) => {
      const { runPortalCommand } = await import('./portal.js');
      status = await runPortalCommand(o, io.out, io.err);
    });

  program
    .command('ir')
    .description('infrared tools')
    .command('encode')
    .description("print the pulse/space train LIRC would send, in irsimsend's format")
    .argument('<file>', 'a .lircd.conf file')
    .argument('<keys...>', 'key names')
    .option('--remote <name>', 'which remote of the file (default: the one irsimsend uses)')
    .option('--count <n>', 'how many times each key is sent', parseCount)
    .action(async (file: string, keys: string[], o: { remote?: string; count?: string }) => {
      const { irEncodeCommand } = await import('../hardware/ir/lirc/cli.js');
      const args = [file, ...keys, ...(o.remote === undefined ? [] : ['--remote', o.remote]), ...(o.count === undefined ? [] : ['--count', o.count])];
      status = await irEncodeCommand(args, io.out, io.err);
    });

  registerFarmCommand(program, io, (code) => (status = code));

  program
    .command('version')
    .description('print the version')
    .action(() => {
      io.out.write(`${version}\n`);
    });

  try {
    await program.parseAsync(argv, { from: 'user' });
  } catch (e) {
    if (!(e instanceof CommanderError)) throw e;
    // --version and --help end here with 0; every other CommanderError is a usage mistake.
    return e.exitCode === 0 ? 0 : EX_USAGE;
  }
  return status;
}
