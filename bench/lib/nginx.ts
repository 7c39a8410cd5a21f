/**
 * nginx as the reference static-file server for download benchmarks: a
 * minimal config (one worker, sendfile on, no access log) serving one folder
 * on 127.0.0.1, with its pid, log and temp paths in a temporary folder.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { waitFor200 } from './http.js';
import { freePort, spawnLogged, tail, type Spawned } from './processes.js';

/** A running nginx. */
export interface Nginx {
  /** `http://127.0.0.1:<port>`: paths below it are files below the root. */
  url: string;
  proc: Spawned;
  stop(): Promise<void>;
}

/** The config text; `user root;` only when running as root (nginx otherwise drops to nobody, who may not read the files). */
export function nginxConfig(opts: { root: string; port: number; workDir: string; asRoot: boolean }): string {
  const w = opts.workDir;
  return `${opts.asRoot ? 'user root;\n' : ''}worker_processes 1;
pid ${w}/nginx.pid;
error_log ${w}/error.log warn;
events { worker_connections 64; }
http {
  access_log off;
  client_body_temp_path ${w}/body;
  proxy_temp_path ${w}/proxy;
  fastcgi_temp_path ${w}/fastcgi;
  uwsgi_temp_path ${w}/uwsgi;
  scgi_temp_path ${w}/scgi;
  sendfile on;
  tcp_nopush on;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:${opts.port};
    root ${opts.root};
  }
}
`;
}

/**
 * Start `nginx -g 'daemon off;'` serving `root`, and wait until `probePath`
 * (a file under root) answers 200.
 */
export async function startNginx(root: string, workDir: string, probePath: string): Promise<Nginx> {
  mkdirSync(workDir, { recursive: true });
  const port = await freePort();
  const conf = join(workDir, 'nginx.conf');
  writeFileSync(conf, nginxConfig({ root, port, workDir, asRoot: process.getuid?.() === 0 }));
  const log = join(workDir, 'stdio.log');
  // -e: the error log before the config is read (else the packaged default path).
  const proc = spawnLogged('nginx', ['-e', join(workDir, 'error.log'), '-p', workDir, '-c', conf, '-g', 'daemon off;'], log);
  let alive = true;
  void proc.exited.then(() => (alive = false));
  const url = `http://127.0.0.1:${port}`;
  try {
    // A HEAD would do, but a GET of a small file is what waitFor200 knows.
    await waitFor200(`${url}/${probePath}`, performance.now() + 10_000, () => alive);
  } catch (e) {
    await proc.stop(1_000);
    throw new Error(`nginx did not start: ${(e as Error).message}\n${tail(log)}\n${tail(join(workDir, 'error.log'))}`);
  }
  return {
    url,
    proc,
    async stop() {
      await proc.stop(3_000);
    },
  };
}
