/**
 * IR transports: pick one by URI, the way the config names hardware.
 *
 *   irtoy:/dev/ttyACM0     USB IR Toy v2 / IRDroid (sample mode) on that serial port
 *   lircd:/run/lirc/lircd  a running lircd's socket; sends keys by name
 *   virtual:               the virtual set-top box (listeners get the trains)
 *   none                   no blaster: sends fail with device_unavailable
 */
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { IrToyTransport, type PortClass } from './irtoy.js';
import { LircdTransport } from './lircd.js';
import { NoTransport } from './none.js';
import type { IrTransport } from './types.js';
import { VirtualTransport, type VirtualIrListener } from './virtual.js';

export type { IrTrain, IrTransport, KeyLabel, SendKeyOptions, SendOptions } from './types.js';
export { IrToyTransport, type IrToyOptions, type PortClass } from './irtoy.js';
export { LircdTransport, type LircdOptions } from './lircd.js';
export { NoTransport } from './none.js';
export { VirtualTransport, type VirtualIrEvent, type VirtualIrListener } from './virtual.js';

export interface IrTransportOptions {
  logger?: Logger;
  /** Answer timeout: IR Toy default 1000 ms, lircd default 5000 ms. */
  timeoutMs?: number;
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
  throw new FarmError(
    'invalid_request',
    `unknown IR transport "${uri}": use irtoy:/dev/ttyACM0, lircd:/run/lirc/lircd, virtual: or none`,
  );
}
