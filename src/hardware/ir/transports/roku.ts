/**
 * `roku:http://<ip>:8060`: a Roku player or TV through its External Control
 * Protocol (plain HTTP on port 8060). A press is `POST /keypress/<key>`, a
 * held key `POST /keydown/<key>` then `POST /keyup/<key>`; `launch(appId)` is
 * `POST /launch/<appId>` and `deviceInfo()` reads `GET /query/device-info`.
 *
 * Errors: a 403 means the device's "Control by mobile apps" setting is off (or
 * limited): `device_unavailable` naming the setting. A refused connection, a
 * silence past `timeoutMs` or any other status: `device_unavailable`. An
 * unknown key never reaches the device (`invalid_request`, from the key map):
 * Roku answers 200 to key names it does not know.
 */
import http from 'node:http';
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { silentLogger } from '../../../logger.js';
import { SerialQueue } from './async.js';
import { resolveKey, ROKU_KEYS } from './keymaps.js';
import { DEFAULT_TIMEOUT_MS, holdFor, holdMsOf, noTrains, type NamedKeyOptions } from './named.js';
import type { HoldOptions, IrTrain, IrTransport, KeyMap, SendKeyOptions, SendOptions } from './types.js';

/** ECP's port, used when the URI names none. */
export const ROKU_ECP_PORT = 8060;

const CONTROL_SETTING =
  'turn on Settings > System > Advanced system settings > Control by mobile apps on the device ' +
  '(Network access "Default" or "Permissive"; "Limited" and "Disabled" refuse ECP commands)';

interface Answer {
  status: number;
  body: string;
}

/** The ECP base URL of `http://host[:port][/]`; `invalid_request` for anything else. */
export function rokuBase(url: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new FarmError('invalid_request', `IR transport "roku:${url}": not a URL; use roku:http://<ip>:8060`);
  }
  if (u.protocol !== 'http:' || (u.pathname !== '/' && u.pathname !== '') || u.search || u.hash || u.username) {
    throw new FarmError('invalid_request', `IR transport "roku:${url}": use roku:http://<ip>:8060 (plain http, no path)`);
  }
  if (u.port === '') u.port = String(ROKU_ECP_PORT);
  return u;
}

export class RokuTransport implements IrTransport {
  readonly uri: string;
  readonly keyMap: KeyMap = ROKU_KEYS;
  private readonly base: URL;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private readonly agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  private readonly queue = new SerialQueue();
  private closed = false;

  constructor(url: string, opts: NamedKeyOptions = {}) {
    this.base = rokuBase(url);
    this.uri = `roku:${this.base.origin}`;
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.log = (opts.logger ?? silentLogger).child({ ir: this.uri });
  }

  send(_trains: readonly IrTrain[], _opts?: SendOptions): Promise<void> {
    return noTrains(this.uri);
  }

  /** `keypress/<key>`, or keydown, `holdMs`, keyup. */
  async sendKey(_remote: string, key: string, opts: SendKeyOptions = {}): Promise<void> {
    const k = resolveKey(this.keyMap, key);
    const holdMs = holdMsOf(opts.holdMs);
    if (holdMs === 0) {
      await this.queue.run(() => this.post(`keypress/${k}`, opts.signal), opts.signal);
      return;
    }
    await this.queue.run(() => this.hold(k, { maxMs: holdMs, ...(opts.signal && { signal: opts.signal }), rejectOnAbort: true }), opts.signal);
  }

  /** keydown, until the signal aborts or `maxMs`, keyup (sent whatever ends the hold). */
  async holdKey(_remote: string, key: string, opts: HoldOptions): Promise<void> {
    const k = resolveKey(this.keyMap, key);
    await this.queue.run(() => this.hold(k, opts), opts.signal);
  }

  /** Start an app: `POST /launch/<appId>` with `params` as the query (deep links: contentId, mediaType). */
  async launch(appId: string, params: Record<string, string> = {}, signal?: AbortSignal): Promise<void> {
    if (!/^[A-Za-z0-9_.-]{1,64}$/.test(appId)) throw new FarmError('invalid_request', `Roku app id ${JSON.stringify(appId)} must be letters, digits, _ . or - (e.g. 12 or dev)`);
    const query = new URLSearchParams(params).toString();
    await this.queue.run(() => this.post(`launch/${appId}${query ? `?${query}` : ''}`, signal), signal);
  }

  /** `GET /query/device-info`: its simple elements (`model-name`, `serial-number`, `software-version`, `power-mode`...). */
  async deviceInfo(signal?: AbortSignal): Promise<Record<string, string>> {
    const a = await this.queue.run(() => this.request('GET', 'query/device-info', signal), signal);
    const info: Record<string, string> = {};
    for (const m of a.body.matchAll(/<([a-z0-9-]+)>([^<]*)<\/\1>/g)) info[m[1]!] = unescapeXml(m[2]!.trim());
    return info;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue.idle();
    this.agent.destroy();
  }

  private hold(k: string, opts: HoldOptions & { rejectOnAbort?: boolean }): Promise<void> {
    // Neither request is abortable: a release while the keydown is answered ends the hold at once (keyup
    // follows), and the key must come up whatever ended the press.
    return holdFor(() => this.post(`keydown/${k}`), () => this.post(`keyup/${k}`), opts);
  }

  private async post(path: string, signal?: AbortSignal): Promise<void> {
    await this.request('POST', path, signal);
  }

  /** One ECP request; any status but 2xx is a FarmError. */
  private async request(method: 'GET' | 'POST', path: string, signal?: AbortSignal): Promise<Answer> {
    if (this.closed) throw new FarmError('device_unavailable', `${this.uri} is closed`);
    const a = await this.exchange(method, path, signal);
    if (a.status >= 200 && a.status < 300) return a;
    const what = `${method} /${path}`;
    this.log.warn({ request: what, status: a.status }, 'Roku refused an ECP request');
    if (a.status === 403) {
      throw new FarmError('device_unavailable', `Roku at ${this.base.host} refused ${what} (403 Forbidden): ${CONTROL_SETTING}`, { status: 403 });
    }
    if (a.status === 404 && path.startsWith('launch/')) {
      throw new FarmError('invalid_request', `Roku at ${this.base.host} has no app ${path.slice(7).split('?')[0]} (404)`);
    }
    throw new FarmError('device_unavailable', `Roku at ${this.base.host} answered ${what} with HTTP ${a.status}`, { status: a.status });
  }

  private exchange(method: string, path: string, signal?: AbortSignal): Promise<Answer> {
    signal?.throwIfAborted();
    return new Promise<Answer>((resolve, reject) => {
      const req = http.request(new URL(path, this.base), { method, agent: this.agent, headers: { 'content-length': 0 } });
      const fail = (e: unknown) => {
        req.destroy();
        reject(e);
      };
      const timer = setTimeout(() => fail(this.unavailable(`did not answer ${method} /${path} within ${this.timeoutMs} ms`)), this.timeoutMs);
      const onAbort = () => fail(signal!.reason);
      signal?.addEventListener('abort', onAbort, { once: true });
      const done = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          done();
          resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
        });
        res.on('error', (e) => fail(this.unavailable(`broke off its answer: ${e.message}`)));
      });
      req.on('error', (e: NodeJS.ErrnoException) => {
        done();
        reject(this.unavailable(`cannot be reached (${e.code ?? e.message}): is it on, and on this network?`));
      });
      req.on('close', done);
      req.end();
    });
  }

  private unavailable(what: string): FarmError {
    return new FarmError('device_unavailable', `Roku at ${this.base.host} ${what}`);
  }
}

function unescapeXml(s: string): string {
  return s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&amp;/g, '&');
}
