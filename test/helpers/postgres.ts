/**
 * A throwaway PostgreSQL cluster for tests and benches: initdb and pg_ctl from
 * Debian's `postgresql` package, listening only on a Unix socket in a fresh
 * temporary folder (no TCP port), removed by `stop()`.
 *
 * initdb refuses to run as root, so as root the cluster is created and run as
 * the unprivileged `postgres` user (made by the Debian package) through
 * `runuser`, and the temporary folder is given to that user. As any other user
 * it runs as that user. docs/farm.md ("The test cluster") says the same.
 */
import { execFile } from 'node:child_process';
import { chown, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fullLaneOnly } from './lane.js';

const run = promisify(execFile);

export interface TestPostgres {
  /** Folder holding the socket; the `host` of a pg connection. */
  host: string;
  port: number;
  user: string;
  database: string;
  /** Stop the server and remove the folder. */
  stop(): Promise<void>;
  /** Stop the server only (`pg_ctl stop -m <mode>`), keeping its data and socket folder; `start()` brings it back. */
  stopServer(mode?: 'fast' | 'immediate' | 'smart'): Promise<void>;
  /** Start a server stopped by `stopServer()`, on the same data, socket folder and port. */
  startServer(): Promise<void>;
  /** `pg_ctl restart -m <mode>` (default fast): every connection is cut, the data stays. */
  restart(mode?: 'fast' | 'immediate' | 'smart'): Promise<void>;
  /** SIGSTOP the server and every process of it: sockets stay open and nothing answers (a frozen host, a silent network). */
  freeze(): Promise<void>;
  /** SIGCONT what `freeze()` stopped. */
  thaw(): Promise<void>;
}

/** The postmaster's pid (the first line of postmaster.pid) and the pids of its children, from /proc. */
async function serverPids(data: string): Promise<number[]> {
  const postmaster = Number((await readFile(path.join(data, 'postmaster.pid'), 'utf8')).split('\n')[0]);
  const children: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = await readFile(`/proc/${name}/stat`, 'utf8').catch(() => '');
    // The fields after the command (which may hold spaces) in parentheses: state, ppid, ...
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    if (ppid === postmaster) children.push(Number(name));
  }
  return [postmaster, ...children];
}

/** The folder of initdb/pg_ctl: PG_BIN, else the newest /usr/lib/postgresql/<ver>/bin, else PATH. */
export async function postgresBinDir(): Promise<string> {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  const versions = existsSync(root) ? (await readdir(root)).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a)) : [];
  for (const v of versions) if (existsSync(path.join(root, v, 'bin', 'initdb'))) return path.join(root, v, 'bin');
  return '';
}

export async function startPostgres(): Promise<TestPostgres> {
  fullLaneOnly('a PostgreSQL cluster (startPostgres)');
  const bin = await postgresBinDir();
  const tool = (name: string): string => (bin ? path.join(bin, name) : name);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'farmhand-pg-'));
  const asRoot = process.getuid?.() === 0;
  const user = asRoot ? 'postgres' : os.userInfo().username;
  if (asRoot) {
    const { stdout } = await run('id', ['-u', user]);
    const { stdout: gid } = await run('id', ['-g', user]);
    await chown(dir, Number(stdout.trim()), Number(gid.trim()));
  }
  const as = (cmd: string, args: string[]) =>
    asRoot ? run('runuser', ['-u', user, '--', cmd, ...args]) : run(cmd, args);
  const data = path.join(dir, 'data');
  // C collation: text sorts by code point, as the in-memory index compares strings.
  await as(tool('initdb'), ['-D', data, '-U', user, '-A', 'trust', '--encoding=UTF8', '--locale=C', '--no-sync']);
  const port = 5432;
  const opts = `-c listen_addresses='' -k ${dir} -p ${port} -c fsync=off -c synchronous_commit=off -c full_page_writes=off`;
  const log = path.join(dir, 'log');
  await as(tool('pg_ctl'), ['-D', data, '-l', log, '-o', opts, '-w', '-t', '60', 'start']);
  let stopped = false;
  return {
    host: dir,
    port,
    user,
    database: 'postgres',
    async stop() {
      if (stopped) return;
      stopped = true;
      await as(tool('pg_ctl'), ['-D', data, '-m', 'immediate', '-w', 'stop']).catch(() => undefined);
      await rm(dir, { recursive: true, force: true });
    },
    async stopServer(mode = 'fast') {
      await as(tool('pg_ctl'), ['-D', data, '-m', mode, '-w', '-t', '60', 'stop']);
    },
    async startServer() {
      await as(tool('pg_ctl'), ['-D', data, '-l', log, '-o', opts, '-w', '-t', '60', 'start']);
    },
    async restart(mode = 'fast') {
      await as(tool('pg_ctl'), ['-D', data, '-l', log, '-o', opts, '-m', mode, '-w', '-t', '60', 'restart']);
    },
    // The postmaster first, so it forks no new process while its children are being stopped.
    async freeze() {
      for (const pid of await serverPids(data)) process.kill(pid, 'SIGSTOP');
    },
    async thaw() {
      for (const pid of (await serverPids(data)).reverse()) process.kill(pid, 'SIGCONT');
    },
  };
}
