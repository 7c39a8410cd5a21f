/**
 * IR transports: pick one by URI, the way the config names hardware.
 *
 *   irtoy:/dev/ttyACM0     USB IR Toy v2 / IRDroid (sample mode) on that serial port
 *   lircd:/run/lirc/lircd  a running lircd's socket; sends keys by name
 *   virtual:               the virtual set-top box (listeners get the trains)
 *   none                   no blaster: sends fail with device_unavailable
 *   cec:/dev/cec0[?to=4]   HDMI-CEC through a resident python3 helper (cec-ctl configures); keys by name (docs/remotes.md)
 *   roku:http://<ip>:8060  Roku External Control Protocol; keys by name
 *   adb:<serial|host:port> Android over an adb server; keys by name
 */
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { AdbTransport, type AdbServerAddress } from './adb.js';
import { CecTransport } from './cec.js';
import { IrToyTransport, type PortClass } from './irtoy.js';
import { LircdTransport } from './lircd.js';
import { NoTransport } from './none.js';
import { RokuTransport } from './roku.js';
import type { IrTransport } from './types.js';
import { VirtualTransport, type VirtualIrListener } from './virtual.js';

export type { IrTrain, IrTransport, KeyLabel, KeyMap, SendKeyOptions, SendOptions } from './types.js';
export { AdbTransport, type AdbOptions, type AdbServerAddress } from './adb.js';
export { CecTransport, type CecOptions } from './cec.js';
export { RokuTransport } from './roku.js';
export { ADB_KEYS, CEC_KEYS, ROKU_KEYS, resolveKey } from './keymaps.js';
export { IrToyTransport, type IrToyOptions, type PortClass } from './irtoy.js';
export { LircdTransport, type LircdOptions } from './lircd.js';
export { NoTransport } from './none.js';
export { VirtualTransport, type VirtualIrEvent, type VirtualIrListener } from './virtual.js';

export interface IrTransportOptions {
  logger?: Logger;
  /** Answer timeout: IR Toy default 1000 ms, lircd, CEC, Roku and ADB default 5000 ms. */
  timeoutMs?: number;
  /** `cec:`: the cec-ctl program (a path, or a name looked up on PATH); default `cec-ctl`. */
  cecCtl?: string;
  /** `cec:`: the python3 that runs the resident helper (the daemon passes `runner.python`); default `/usr/bin/python3`. */
  python?: string;
  /** `adb:`: the adb server; default from ADB_SERVER_SOCKET / ANDROID_ADB_SERVER_PORT, else 127.0.0.1:5037. */
  adbServer?: AdbServerAddress;
  /** Serial port class for `irtoy:` (tests pass serialport's SerialPortMock). */
  portClass?: PortClass;
  /** First listener of a `virtual:` transport (the virtual device). */
  onVirtualEvent?: VirtualIrListener;
}

export const DEFAULT_IRTOY_PORT = '/dev/ttyACM0';
export const DEFAULT_LIRCD_SOCKET = '/run/lirc/lircd';

/** The path part of `scheme:path`, or the default when it is empty; must be absolute. */
function pathOf(uri: string, scheme: string, fallback: string): string {
  const path = uri.slice(scheme.length) || fallback;
  if (!path.startsWith('/')) {
    throw new FarmError('invalid_request', `IR transport "${uri}": the path must be absolute, e.g. ${scheme}${fallback}`);
  }
  return path;
}

/**
 * The transport a URI names. Nothing is opened here: `irtoy:` opens its port
 * on the first send and `lircd:` connects per command, so a daemon starts
 * (and reports the blaster as unavailable) when the hardware is missing.
 * Throws `invalid_request` for a URI it does not know.
 */
export function createIrTransport(uri: string, opts: IrTransportOptions = {}): IrTransport {
  const { logger, timeoutMs } = opts;
  if (uri.startsWith('irtoy:')) {
    const path = pathOf(uri, 'irtoy:', DEFAULT_IRTOY_PORT);
    return new IrToyTransport(path, { ...(logger && { logger }), ...(timeoutMs && { timeoutMs }) }, opts.portClass);
  }
  if (uri.startsWith('lircd:')) {
    const path = pathOf(uri, 'lircd:', DEFAULT_LIRCD_SOCKET);
    return new LircdTransport(path, { ...(logger && { logger }), ...(timeoutMs && { timeoutMs }) });
  }
  if (uri === 'virtual:') return new VirtualTransport(opts.onVirtualEvent, logger);
  if (uri === 'none' || uri === 'none:') return new NoTransport();
  const named = namedKeyTransport(uri, opts);
  if (named) return named;
  throw new FarmError(
    'invalid_request',
    `unknown IR transport "${uri}": use irtoy:/dev/ttyACM0, lircd:/run/lirc/lircd, cec:/dev/cec0, roku:http://<ip>:8060, adb:<serial>, virtual: or none`,
  );
}

/** The transports that press keys by name over a control protocol; undefined for another scheme. */
function namedKeyTransport(uri: string, opts: IrTransportOptions): IrTransport | undefined {
  const common = { ...(opts.logger && { logger: opts.logger }), ...(opts.timeoutMs && { timeoutMs: opts.timeoutMs }) };
  if (uri.startsWith('cec:')) return new CecTransport(uri.slice(4), { ...common, ...(opts.cecCtl && { cecCtl: opts.cecCtl }), ...(opts.python && { python: opts.python }) });
  if (uri.startsWith('roku:')) return new RokuTransport(uri.slice(5), common);
  if (uri.startsWith('adb:')) return new AdbTransport(uri.slice(4), { ...common, ...(opts.adbServer && { server: opts.adbServer }) });
  return undefined;
}
