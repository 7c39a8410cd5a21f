/**
 * `adb:<serial>` or `adb:<host>:<port>`: an Android / Android TV device,
 * through an adb server (the `adb` program's, found at `ADB_SERVER_SOCKET`
 * `tcp:<host>:<port>`, else 127.0.0.1 and `ANDROID_ADB_SERVER_PORT` or 5037)
 * with adbkit as the client. A press is `input keyevent <code>` in the
 * device's shell; a press held for a time is `input keyevent --longpress
 * <code>` (Android's long press: `input` cannot hold a key for a given time
 * nor until a release).
 *
 * `input keyevent` answers nothing and succeeds for any name, so names are
 * checked first against Android's key codes (`invalid_request`) and sent as
 * numbers. A `host:port` device is `adb connect`ed before the first press
 * and again after a failure. No adb server, a device it does not have, an
 * offline or unauthorized device, or no answer within `timeoutMs`:
 * `device_unavailable`. farmhand does not start an adb server itself.
 */
import type { Duplex } from 'node:stream';
import adbkitModule, { type Client } from '@devicefarmer/adbkit';
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { silentLogger } from '../../../logger.js';
import { SerialQueue, abortable } from './async.js';
import { ADB_KEYS, androidKeyCode, resolveKey } from './keymaps.js';
import { DEFAULT_TIMEOUT_MS, holdMsOf, noTrains, type NamedKeyOptions } from './named.js';
import type { IrTrain, IrTransport, KeyMap, SendKeyOptions, SendOptions } from './types.js';

export interface AdbServerAddress {
  host: string;
  port: number;
}

export interface AdbOptions extends NamedKeyOptions {
  /** The adb server; default from the environment as `adb` reads it. */
  server?: AdbServerAddress;
}

/** Where `adb` itself would look for its server. */
export function adbServerFromEnv(env: NodeJS.ProcessEnv = process.env): AdbServerAddress {
  const socket = /^tcp:(?:(.+):)?(\d{1,5})$/.exec(env.ADB_SERVER_SOCKET ?? '');
  if (socket) return { host: socket[1] ?? '127.0.0.1', port: Number(socket[2]) };
  const port = Number(env.ANDROID_ADB_SERVER_PORT);
  return { host: '127.0.0.1', port: Number.isInteger(port) && port > 0 && port < 65536 ? port : 5037 };
}

/** A device over the network (`adb connect`) when the serial is `host:port`. */
export function networkDevice(serial: string): { host: string; port: number } | undefined {
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(serial);
  if (!m) return undefined;
  return { host: m[1]!.replace(/^\[|\]$/g, ''), port: Number(m[2]) };
}

type AdbClass = typeof adbkitModule.Adb;
/** adbkit's Adb class, however the CommonJS module was imported (Node's ESM loader, or a CommonJS transform). */
const Adb: AdbClass = (adbkitModule as unknown as { Adb?: AdbClass }).Adb ?? (adbkitModule as unknown as AdbClass);

/** Output of `input keyevent` that says it did not run (it prints nothing when it did). */
const INPUT_FAILED = /error|exception|not found|usage:|permission denied|inaccessible/i;

export class AdbTransport implements IrTransport {
  readonly uri: string;
  readonly keyMap: KeyMap = ADB_KEYS;
  readonly server: AdbServerAddress;
  private readonly client: Client;
  private readonly net: { host: string; port: number } | undefined;
  private readonly timeoutMs: number;
  private readonly log: Logger;
  private readonly queue = new SerialQueue();
  private connected = false;
  private closed = false;

  constructor(readonly serial: string, opts: AdbOptions = {}) {
    if (!/^[\w.:[\]-]{1,128}$/.test(serial)) {
      throw new FarmError('invalid_request', `IR transport "adb:${serial}": use adb:<serial> (as \`adb devices\` lists it) or adb:<host>:<port>`);
    }
    this.uri = `adb:${serial}`;
    this.net = networkDevice(serial);
    this.server = opts.server ?? adbServerFromEnv();
    // `bin` names no program: adbkit starts an adb server when none answers; farmhand leaves that to the system.
    this.client = Adb.createClient({ host: this.server.host, port: this.server.port, bin: 'farmhand-does-not-start-adb-servers' });
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.log = (opts.logger ?? silentLogger).child({ ir: this.uri });
  }

  send(_trains: readonly IrTrain[], _opts?: SendOptions): Promise<void> {
    return noTrains(this.uri);
  }

  /** `input keyevent <code>`; with `holdMs`, `input keyevent --longpress <code>`. */
  async sendKey(_remote: string, key: string, opts: SendKeyOptions = {}): Promise<void> {
    const code = androidKeyCode(resolveKey(this.keyMap, key));
    const cmd = holdMsOf(opts.holdMs) > 0 ? `input keyevent --longpress ${code}` : `input keyevent ${code}`;
    await this.queue.run(() => this.shell(cmd, opts.signal), opts.signal);
  }

  /** Runs a shell command on the device; resolves with its output. */
  async shell(cmd: string, signal?: AbortSignal): Promise<string> {
    if (this.closed) throw new FarmError('device_unavailable', `${this.uri} is closed`);
    try {
      if (this.net && !this.connected) await this.timed(this.connect(), `adb connect ${this.serial}`, signal);
      const out = await this.timed(this.run(cmd), `"${cmd}"`, signal);
      if (INPUT_FAILED.test(out)) throw new FarmError('device_unavailable', `${this.uri}: "${cmd}" failed: ${out.trim().split('\n')[0]}`);
      if (out.trim()) this.log.debug({ cmd, out: out.trim() }, 'adb shell output');
      return out;
    } catch (e) {
      this.connected = false;
      if (signal?.aborted) throw signal.reason;
      throw this.explain(e);
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue.idle();
  }

  private async connect(): Promise<void> {
    const net = this.net!;
    await (this.client.connect(net.host, net.port) as unknown as PromiseLike<string>);
    // `adb connect` answers before the device has said who it is: wait until the server lists it as a device.
    await (this.client.getDevice(this.serial).waitForDevice() as unknown as PromiseLike<string>);
    this.connected = true;
  }

  private async run(cmd: string): Promise<string> {
    // adbkit answers Bluebird promises, whose types are not installed: typed here as what they resolve to.
    const stream = await (this.client.getDevice(this.serial).shell(cmd) as unknown as PromiseLike<Duplex>);
    const out = await (Adb.util.readAll(stream) as unknown as PromiseLike<Buffer>);
    return out.toString('utf8');
  }

  /** `p`, or device_unavailable after timeoutMs (or the signal's reason). */
  private timed<T>(p: PromiseLike<T>, what: string, signal?: AbortSignal): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new FarmError('device_unavailable', `${this.uri}: no answer to ${what} within ${this.timeoutMs} ms`)), this.timeoutMs);
    });
    return abortable(Promise.race([Promise.resolve(p), late]), signal).finally(() => clearTimeout(timer));
  }

  /** adbkit's and the server's errors as device_unavailable with what to do. */
  private explain(e: unknown): FarmError {
    if (e instanceof FarmError) return e;
    const err = e as NodeJS.ErrnoException;
    const msg = err?.message ?? String(e);
    const where = `${this.server.host}:${this.server.port}`;
    if (err?.code === 'ECONNREFUSED' || err?.code === 'ENOENT' || /farmhand-does-not-start/.test(msg)) {
      return new FarmError('device_unavailable', `no adb server answers at ${where}: start one (adb start-server, or ADB_SERVER_SOCKET / ANDROID_ADB_SERVER_PORT to name another)`);
    }
    if (/unauthorized/i.test(msg)) {
      return new FarmError('device_unavailable', `${this.uri} has not authorized this computer: accept the "Allow USB debugging" prompt on the device (${msg})`);
    }
    this.log.warn({ err: msg }, 'adb press failed');
    return new FarmError('device_unavailable', `${this.uri} (adb server ${where}): ${msg}`);
  }
}
