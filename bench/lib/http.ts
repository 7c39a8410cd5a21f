/**
 * HTTP client side of the benchmarks: timed requests over a fresh loopback
 * connection each (as curl or a script without a session does, so connection
 * set-up is part of every measurement), waiting for a server to answer, and
 * timed downloads that discard the body.
 */
import { execFile } from 'node:child_process';
import http from 'node:http';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

/** A finished request: status, body, and milliseconds from sending to the body's last byte. */
export interface Timed {
  status: number;
  body: Buffer;
  ms: number;
}

/** One request on a new connection; resolves after the whole body has arrived. */
export function timedRequest(url: string, opts: { method?: string; json?: unknown; timeoutMs?: number } = {}): Promise<Timed> {
  const payload = opts.json === undefined ? undefined : Buffer.from(JSON.stringify(opts.json));
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.request(
      url,
      {
        method: opts.method ?? 'GET',
        agent: false,
        timeout: opts.timeoutMs ?? 30_000,
        headers: payload ? { 'Content-Type': 'application/json', 'Content-Length': payload.length } : {},
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks), ms: performance.now() - t0 }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${opts.method ?? 'GET'} ${url}: no answer within ${opts.timeoutMs ?? 30_000} ms`)));
    req.on('error', reject);
    req.end(payload);
  });
}

/** GET and parse JSON, failing unless the status is 200. */
export async function getJson<T = unknown>(url: string): Promise<{ value: T; ms: number }> {
  const r = await timedRequest(url);
  if (r.status !== 200) throw new Error(`GET ${url} answered ${r.status}: ${r.body.toString('utf8', 0, 500)}`);
  return { value: JSON.parse(r.body.toString('utf8')) as T, ms: r.ms };
}

/**
 * Poll `url` every `intervalMs` until it answers 200; returns the time of
 * that answer (performance.now()). Gives up at `deadline` or when
 * `stillAlive` turns false (the server process died).
 */
export async function waitFor200(url: string, deadline: number, stillAlive: () => boolean, intervalMs = 10): Promise<number> {
  for (;;) {
    const r = await timedRequest(url, { timeoutMs: 5_000 }).catch(() => undefined);
    if (r?.status === 200) return performance.now();
    if (!stillAlive()) throw new Error(`the server exited before answering ${url}`);
    if (performance.now() > deadline) throw new Error(`${url} did not answer 200 in time (last: ${r ? r.status : 'no connection'})`);
    await new Promise((res) => setTimeout(res, intervalMs));
  }
}

/** A download: bytes received and seconds from request to last byte. */
export interface Download {
  bytes: number;
  seconds: number;
  status: number;
}

/**
 * Download `url` with curl into /dev/null (curl's own timing): a client fast
 * enough that the server, not the client, limits the throughput.
 */
export async function curlDownload(url: string): Promise<Download> {
  const { stdout } = await execFileP('curl', ['-s', '-o', '/dev/null', '-w', '%{http_code} %{size_download} %{time_total}', url], { timeout: 60_000 });
  const [status, bytes, seconds] = stdout.trim().split(' ').map(Number) as [number, number, number];
  return { status, bytes, seconds };
}

/** The same with Node's http client, for machines without curl: the body is counted and dropped. */
export function nodeDownload(url: string): Promise<Download> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    http
      .get(url, { agent: false }, (res) => {
        let bytes = 0;
        res.on('data', (c: Buffer) => (bytes += c.length));
        res.on('error', reject);
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes, seconds: (performance.now() - t0) / 1000 }));
      })
      .on('error', reject);
  });
}

/** curl when it is installed, else Node's client. */
export async function pickDownloader(): Promise<{ name: string; download: (url: string) => Promise<Download> }> {
  const hasCurl = await execFileP('curl', ['--version']).then(() => true, () => false);
  return hasCurl ? { name: 'curl -o /dev/null', download: curlDownload } : { name: "Node's http client", download: nodeDownload };
}
