/**
 * The daemon's start-up outside its services: the one-line StartupError and
 * what becomes one, the secrets read before anything starts, and the HTTP
 * server, which listens before the services exist (answering 503 until they
 * do) and whose closing is three steps of the stopping order (src/daemon.ts).
 */
import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, RequestListener, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { EX_CONFIG } from '../config/load.js';
import type { OidcConfig } from '../config/oidc.js';
import type { FarmConfig } from '../config/schema.js';
import type { Logger } from '../core/ports.js';
import { OidcSignIn, readClientSecret } from '../http/oidc.js';
import { healthBody } from '../http/opsRoutes.js';
import { SECURITY_HEADERS } from '../http/securityHeaders.js';
import { TestPackConfigError } from '../runner/gitTestPack.js';
import { LockHeldError } from '../storage/dataDirLock.js';
import { version } from '../version.js';

/**
 * Start-up failed: the message is one line for a person, `exitCode` what the
 * process exits with (78 = EX_CONFIG for a configuration that can never
 * work, 1 otherwise). Whatever had started is stopped again.
 */
export class StartupError extends Error {
  override readonly name = 'StartupError';
  constructor(
    message: string,
    readonly exitCode = 1,
  ) {
    super(message);
  }
}

/** What start-up reads before anything starts: a config that can never work fails here. */
export interface StartSecrets {
  portalCredential?: string;
  oidc?: OidcSignIn;
  /** Lets the portal link's requests to this server act for the portal's user (http/auth.ts); never logged. */
  delegateSecret?: string;
}

export async function readSecrets(cfg: FarmConfig, logger: Logger): Promise<StartSecrets> {
  // A node that is to join a farm and cannot read its credential is misconfigured: say so before anything starts.
  const portalCredential = cfg.portal && (await readCredential(cfg.portal.node_credential_file));
  // Likewise the OIDC client secret; the provider itself is asked only at the first sign-in (docs/auth.md).
  const oidc = cfg.oidc && new OidcSignIn(cfg.oidc, { publicUrl: cfg.public_url, clientSecret: await oidcClientSecret(cfg.oidc), logger: logger.child({ module: 'oidc' }) });
  return {
    ...(portalCredential && { portalCredential, delegateSecret: randomBytes(32).toString('base64url') }),
    ...(oidc && { oidc }),
  };
}

/** The OIDC client secret (`oidc.client_secret_file` or `client_secret`); unreadable: a config error. */
async function oidcClientSecret(o: OidcConfig): Promise<string> {
  try {
    return await readClientSecret(o);
  } catch (e) {
    throw new StartupError((e as Error).message, EX_CONFIG);
  }
}

/** The node credential `farmhand farm node add` printed, from `portal.node_credential_file`. */
async function readCredential(file: string): Promise<string> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? String(e);
    throw new StartupError(`portal.node_credential_file: cannot read ${file} (${code}); put there the credential 'farmhand farm node add <node_id>' printed on the portal`, EX_CONFIG);
  }
  const credential = text.trim();
  if (!credential || /\s/.test(credential)) {
    throw new StartupError(`portal.node_credential_file: ${file} must hold the node credential alone, on one line (it is ${credential ? 'more than one word' : 'empty'})`, EX_CONFIG);
  }
  return credential;
}

/** What a start-up failure says: one line, no stack. */
export function asStartupError(e: unknown, cfg: FarmConfig): StartupError {
  if (e instanceof StartupError) return e;
  if (e instanceof LockHeldError) return new StartupError(e.message);
  if (e instanceof TestPackConfigError) return new StartupError(e.message, EX_CONFIG);
  const err = e as NodeJS.ErrnoException;
  if (err.syscall === 'listen') {
    const why = err.code === 'EADDRINUSE' ? 'the address is already in use (is another farmhand running?)' : err.code === 'EACCES' ? 'permission denied (ports below 1024 need privileges)' : (err.code ?? err.message);
    return new StartupError(`cannot listen on ${cfg.listen}: ${why}`);
  }
  return new StartupError(`start-up failed: ${err instanceof Error ? err.message : String(e)}`);
}

/**
 * The daemon's HTTP server. It listens first, answering 503 (`answerStarting`) until `accept` hands it the app;
 * it closes in three steps of the stopping order: no new connections (`stopAccepting`, first), the connections
 * still open cut (`cutConnections`, once the running job and the event streams have ended), and, on a failed
 * start, the same at once.
 */
export class HttpServer {
  private handler: RequestListener = answerStarting;
  private closed: Promise<void> | undefined;

  private constructor(readonly server: Server) {}

  static async listen(listenOn: string): Promise<HttpServer> {
    let self: HttpServer | undefined;
    const server = await listen((req, res) => self?.handler(req, res), listenOn);
    return (self = new HttpServer(server));
  }

  /** `http://host:port` it listens on (0.0.0.0 as 127.0.0.1). */
  get url(): string {
    const addr = this.server.address() as AddressInfo;
    const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
    return `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${addr.port}`;
  }

  accept(handler: RequestListener): void {
    this.handler = handler;
  }

  /** Take no new connections; end the idle ones. Resolves once every connection has ended. */
  stopAccepting(): Promise<void> {
    this.closed ??= new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    return this.closed;
  }

  async cutConnections(): Promise<void> {
    const closed = this.stopAccepting();
    this.server.closeAllConnections();
    await closed;
  }
}

async function listen(handler: RequestListener, listenOn: string): Promise<Server> {
  const { createServer } = await import('node:http');
  const i = listenOn.lastIndexOf(':');
  const host = listenOn.slice(0, i).replace(/^\[|\]$/g, '');
  const port = Number(listenOn.slice(i + 1));
  const server = createServer(handler);
  server.headersTimeout = 30_000;
  server.requestTimeout = 120_000; // long polls hold 55 s
  server.on('clientError', answerClientError);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/**
 * The answer while the services are still starting (crash recovery, capture's
 * first frame): 503, except `/healthz` (the process answers) and `/readyz`
 * (not ready: starting).
 */
function answerStarting(req: IncomingMessage, res: ServerResponse): void {
  const route = req.method === 'GET' || req.method === 'HEAD' ? (req.url ?? '').replace(/[?#].*$/s, '').replace(/\/+$/, '') : '';
  const message = 'farmhand is starting up (recovering the last run, waiting for the first frame); try again in a few seconds';
  const [status, body] =
    route === '/healthz'
      ? [200, healthBody(version, true)]
      : route === '/readyz'
        ? [503, { error: 'not_ready', message, ready: false, failed: ['startup'], checks: { startup: { ok: false, detail: 'starting up' } } }]
        : [503, { error: 'device_unavailable', message }];
  const text = JSON.stringify(body);
  res.writeHead(status, { ...SECURITY_HEADERS, 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(text), 'Cache-Control': 'no-store', ...(status === 503 && { 'Retry-After': '1' }) });
  res.end(req.method === 'HEAD' ? undefined : text);
}

/** Requests Node rejects before Koa sees them (too-long URL or headers, malformed HTTP) still get a JSON error. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  const [status, code, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'headers_too_large', 'the request line or headers are too large; shorten the URL (a filter of a few KiB is plenty)']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'request_timeout', 'the request took too long to arrive']
        : [400, 'invalid_request', 'malformed HTTP request'];
  const body = JSON.stringify({ error: code, message });
  socket.end(`HTTP/1.1 ${status} ${code}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`);
}
