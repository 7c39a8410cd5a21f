/**
 * Portal replicas as real processes (`farmhand portal`, each its own process group) on one throwaway PostgreSQL,
 * behind a real Debian `haproxy` that checks each one's /readyz (docs/farm.md, "Many portals"). Nodes and clients
 * go through HAProxy's frontend; tests kill, stop and resume the replicas.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, killGroup } from './processFarm.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export interface PortalProcess {
  name: string;
  port: number;
  url: string;
  child: ChildProcess;
  /** stdout (the CLI's lines and the JSON log) and stderr so far. */
  out: () => string;
  err: () => string;
  /** Resolves with the exit code (null: a signal) once the process is gone. */
  exited: Promise<number | null>;
  signal(sig: NodeJS.Signals): void;
}

/** Start `farmhand portal --config <file>` in its own process group. */
export function startPortalProcess(name: string, port: number, config: string): PortalProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), 'portal', '--config', config], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
  child.stderr.on('data', (b: Buffer) => (err += b.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return {
    name,
    port,
    url: `http://127.0.0.1:${port}`,
    child,
    out: () => out,
    err: () => err,
    exited,
    signal(sig) {
      if (sig === 'SIGKILL') return killGroup(child);
      try {
        process.kill(-child.pid!, sig);
      } catch {
        // already gone
      }
    },
  };
}

export interface Haproxy {
  /** The frontend's `http://127.0.0.1:port`. */
  url: string;
  child: ChildProcess;
  log: () => string;
  /** HAProxy's operational state of a server: 2 running, 0 stopped (`show servers state`). */
  state(server: string): Promise<number | undefined>;
  stop(): void;
}

/**
 * HAProxy in front of the replicas (`servers`: name to port), as docs/farm.md's "Many portals" configuration but
 * with checks fast enough for a test: /readyz every 300 ms, down after 2 failures, up after 1 success.
 */
export async function startHaproxy(work: string, servers: Record<string, number>): Promise<Haproxy> {
  if (spawnSync('haproxy', ['-v']).error) throw new Error('haproxy is not installed: scripts/setup.sh installs it (apt-get install haproxy)');
  const port = await freePort();
  const socket = path.join(work, 'haproxy.sock');
  const cfg = path.join(work, 'haproxy.cfg');
  await writeFile(
    cfg,
    [
      'global',
      `    stats socket ${socket} mode 600 level admin`,
      'defaults',
      '    mode http',
      '    timeout connect 1s',
      '    timeout client 120s',
      '    timeout server 120s',
      '    timeout tunnel 1h',
      '    timeout check 1s',
      '    retries 2',
      '    option redispatch',
      'frontend farm',
      `    bind 127.0.0.1:${port}`,
      '    default_backend portals',
      'backend portals',
      '    balance first',
      '    option httpchk',
      '    http-check send meth GET uri /readyz ver HTTP/1.1 hdr Host farm',
      '    http-check expect status 200',
      '    default-server inter 300ms fall 2 rise 1',
      ...Object.entries(servers).map(([name, p]) => `    server ${name} 127.0.0.1:${p} check`),
      '',
    ].join('\n'),
  );
  const child = spawn('haproxy', ['-db', '-f', cfg], { stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  child.stdout.on('data', (b: Buffer) => (log += b.toString()));
  child.stderr.on('data', (b: Buffer) => (log += b.toString()));
  const net = await import('node:net');
  const command = (c: string) =>
    new Promise<string>((resolve, reject) => {
      const s = net.connect(socket);
      let text = '';
      s.on('data', (b: Buffer) => (text += b.toString('utf8')));
      s.on('end', () => resolve(text));
      s.on('error', reject);
      s.end(`${c}\n`);
    });
  return {
    url: `http://127.0.0.1:${port}`,
    child,
    log: () => log,
    async state(server) {
      const text = await command('show servers state portals').catch(() => '');
      const line = text.split('\n').find((l) => l.includes(` ${server} `));
      return line === undefined ? undefined : Number(line.split(' ')[5]);
    },
    stop: () => child.kill('SIGKILL'),
  };
}
