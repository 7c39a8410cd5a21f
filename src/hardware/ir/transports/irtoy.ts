/**
 * `irtoy:/dev/ttyACM0`: a USB IR Toy v2 or IRDroid over its serial port, in
 * sample mode. The port is opened on the first send (so the daemon starts
 * without the blaster plugged in) and the device initialised: reset x5,
 * `v` -> `V2xx`, `s` -> `S01`. Each transmission then sets the carrier,
 * enables handshake, notify-on-complete and byte-count report, and writes
 * the samples in the chunks the device grants, as LIRC's irtoy driver does.
 *
 * Any failure - a missing or unplugged port, a device that does not answer
 * within the timeout, an `F` (underrun) or a wrong byte count - drops the
 * connection, so the next send starts from a fresh open and reset.
 */
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { silentLogger } from '../../../logger.js';
import { ByteReader, SerialQueue, abortable, sleep } from './async.js';
import {
  CMD, MIN_FIRMWARE, REPLY, RESET_BYTES, TERMINATOR, TX_START,
  carrierCommand, parseVersion, planTransmissions, type Transmission, type TransmissionPlan,
} from './irtoy-protocol.js';
import type { IrTrain, IrTransport, SendOptions } from './types.js';

/** The part of serialport's `SerialPort` the transport uses; `SerialPortMock` fits too. */
export interface PortLike {
  readonly isOpen: boolean;
  open(cb: (err: Error | null) => void): void;
  write(data: Buffer, cb: (err: Error | null | undefined) => void): boolean;
  close(cb?: (err: Error | null) => void): void;
  on(event: string, listener: (...args: never[]) => void): unknown;
  removeAllListeners(): unknown;
}

/** A serial port class: `SerialPort` in production, serialport's `SerialPortMock` in unit tests. */
export type PortClass = new (opts: { path: string; baudRate: number; autoOpen: false }) => PortLike;

export interface IrToyOptions {
  /** How long the device may take to answer a command (plus the signal's own length for transmits); default 1000 ms. */
  timeoutMs?: number;
  /** How long to collect and drop stray bytes after the reset; default 20 ms (LIRC's flush time). */
  flushMs?: number;
  /** The CDC-ACM device ignores it; LIRC uses 115200. */
  baudRate?: number;
  logger?: Logger;
}

/** Where a transmission stands, so an abort knows how to leave the device. */
type Phase = 'idle' | 'data' | 'report';

export class IrToyTransport implements IrTransport {
  readonly uri: string;
  /** Hardware and firmware version the device reported at the last initialisation. */
  version: { hardware: number; firmware: number } | undefined;
  private readonly timeoutMs: number;
  private readonly flushMs: number;
  private readonly baudRate: number;
  private readonly log: Logger;
  private readonly reader = new ByteReader();
  private readonly queue = new SerialQueue();
  private port: PortLike | undefined;
  private phase: Phase = 'idle';
  private quietUntil = 0;
  private closed = false;

  constructor(
    readonly path: string,
    opts: IrToyOptions = {},
    private readonly Port?: PortClass,
  ) {
    this.uri = `irtoy:${path}`;
    this.timeoutMs = opts.timeoutMs ?? 1000;
    this.flushMs = opts.flushMs ?? 20;
    this.baudRate = opts.baudRate ?? 115200;
    this.log = (opts.logger ?? silentLogger).child({ ir: this.uri });
  }

  async send(trains: readonly IrTrain[], opts: SendOptions = {}): Promise<void> {
    const plan = planTransmissions(trains);
    await this.queue.run(() => this.sendPlan(plan, opts.signal), opts.signal);
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.queue.idle();
    await this.drop();
  }

  private async sendPlan(plan: TransmissionPlan, signal?: AbortSignal): Promise<void> {
    if (this.closed) throw this.unavailable('is closed');
    try {
      const port = await this.ready(signal);
      await sleep(this.quietUntil - performance.now(), signal);
      for (const tx of plan.transmissions) {
        await sleep(tx.waitBeforeUs / 1000, signal);
        await this.transmit(port, tx, signal);
      }
      this.quietUntil = performance.now() + plan.trailingGapUs / 1000;
    } catch (e) {
      // An abort between transmissions leaves the device idle and usable;
      // anything else leaves it in an unknown state.
      if (this.phase !== 'idle' || !signal?.aborted) await this.drop();
      throw e;
    }
  }

  /** The open, initialised port; opens and initialises it when there is none. */
  private async ready(signal?: AbortSignal): Promise<PortLike> {
    if (this.port) return this.port;
    const port = await this.open();
    this.port = port;
    try {
      await this.init(port, signal);
    } catch (e) {
      await this.drop();
      throw e;
    }
    return port;
  }

  private async open(): Promise<PortLike> {
    // serialport is loaded on first use: ~16 MiB of resident memory a node without an IR Toy never needs.
    const Port = this.Port ?? (await import('serialport')).SerialPort;
    const port = new Port({ path: this.path, baudRate: this.baudRate, autoOpen: false });
    await new Promise<void>((resolve, reject) =>
      port.open((err) => (err ? reject(this.unavailable(`cannot be opened: ${err.message}`)) : resolve())),
    );
    this.reader.reset();
    port.on('data', (chunk: Buffer) => this.reader.push(chunk));
    port.on('error', (err: Error) => this.log.warn({ err: err.message }, 'serial port error'));
    port.on('close', () => {
      if (this.port !== port) return;
      this.port = undefined;
      this.reader.fail(this.unavailable('was disconnected'));
      this.log.warn('IR Toy disconnected');
    });
    return port;
  }

  private async init(port: PortLike, signal?: AbortSignal): Promise<void> {
    await this.write(port, RESET_BYTES);
    await sleep(this.flushMs, signal);
    this.reader.clear(); // whatever the device said before the reset is stale
    await this.write(port, Buffer.from([CMD.version]));
    const answer = await this.read(4, 'the version command (v)', this.timeoutMs, signal);
    const version = parseVersion(answer);
    if (!version) throw this.unavailable(`answered ${show(answer)} to the version command: not an IR Toy`);
    if (version.firmware < MIN_FIRMWARE) {
      throw this.unavailable(`has firmware v${version.firmware}; v${MIN_FIRMWARE} or later is needed to transmit`);
    }
    await this.write(port, Buffer.from([CMD.sampleMode]));
    const mode = await this.read(3, 'the sample mode command (s)', this.timeoutMs, signal);
    if (mode[0] !== REPLY.sampleMode) throw this.unavailable(`answered ${show(mode)} to the sample mode command`);
    this.version = version;
    this.log.info({ ...version, protocol: mode.toString('latin1') }, 'IR Toy ready');
  }

  /** One transmit command: carrier, start, granted chunks, then the device's report. */
  private async transmit(port: PortLike, tx: Transmission, signal?: AbortSignal): Promise<void> {
    const waitMs = this.timeoutMs + tx.emitUs / 1000; // the device may hold grants while it emits
    await this.write(port, Buffer.concat([carrierCommand(tx.frequency), TX_START]));
    this.phase = 'data';
    let grant = await this.readGrant(waitMs, signal);
    let sent = 0;
    let reportStarted = false;
    while (sent < tx.data.length) {
      const n = Math.min(grant, tx.data.length - sent);
      await this.write(port, tx.data.subarray(sent, sent + n));
      sent += n;
      if (sent === tx.data.length) this.phase = 'report';
      const next = (await this.read(1, 'with a transmit handshake', waitMs, signal))[0] ?? 0;
      // LIRC reads a grant after the last chunk too; accept a device that
      // skips it. A report in mid-stream means the device gave up (underrun).
      if (next === REPLY.byteCount) {
        reportStarted = true;
        this.phase = 'report';
        break;
      }
      if (sent < tx.data.length) grant = this.checkGrant(next);
    }
    await this.readReport(tx.data.length, reportStarted, waitMs, signal);
    this.phase = 'idle';
  }

  private async readGrant(waitMs: number, signal?: AbortSignal): Promise<number> {
    const b = await this.read(1, 'the transmit command', waitMs, signal);
    return this.checkGrant(b[0] ?? 0);
  }

  private checkGrant(n: number): number {
    if (n === 0 || n === REPLY.byteCount || n === REPLY.complete || n === REPLY.failed) {
      throw this.unavailable(`sent ${show(Buffer.from([n]))} where a transmit handshake was expected`);
    }
    return n;
  }

  /** `t`, the 16-bit count of bytes received, then `C` or `F`. */
  private async readReport(expected: number, tRead: boolean, waitMs: number, signal?: AbortSignal): Promise<void> {
    const what = 'with a transmit report';
    const report = await this.read(tRead ? 3 : 4, what, waitMs, signal);
    const full = tRead ? Buffer.concat([Buffer.from([REPLY.byteCount]), report]) : report;
    if (full[0] !== REPLY.byteCount) throw this.unavailable(`sent ${show(full)} where a transmit report was expected`);
    const count = full.readUInt16BE(1);
    if (full[3] === REPLY.failed) throw this.unavailable('reported a failed transmission (buffer underrun)');
    if (full[3] !== REPLY.complete) throw this.unavailable(`ended a transmission with ${show(full.subarray(3))}`);
    if (count !== expected) throw this.unavailable(`received ${count} of the ${expected} bytes sent`);
  }

  private read(n: number, what: string, ms: number, signal?: AbortSignal): Promise<Buffer> {
    return this.reader.read(n, ms, () => this.unavailable(`did not answer ${what} within ${Math.round(ms)} ms`), signal);
  }

  private write(port: PortLike, data: Buffer): Promise<void> {
    return new Promise((resolve, reject) => {
      port.write(data, (err) => (err ? reject(this.unavailable(`write failed: ${err.message}`)) : resolve()));
    });
  }

  /**
   * Forget the port. Best effort, never throws: end a half-sent data block
   * with the terminator, reset the device (LIRC: leaving it in sample mode
   * upsets the cdc_acm driver on the next open), then close.
   */
  private async drop(): Promise<void> {
    const port = this.port;
    const phase = this.phase;
    this.port = undefined;
    this.phase = 'idle';
    this.quietUntil = 0;
    this.reader.fail(this.unavailable('was reset after an error'));
    if (!port?.isOpen) return;
    const bytes = phase === 'data' ? Buffer.concat([TERMINATOR, RESET_BYTES]) : RESET_BYTES;
    await abortable(this.write(port, bytes), AbortSignal.timeout(200)).catch(() => undefined);
    await new Promise<void>((resolve) => port.close(() => resolve()));
    port.removeAllListeners();
  }

  private unavailable(what: string): FarmError {
    return new FarmError('device_unavailable', `IR Toy on ${this.path} ${what}`, { port: this.path });
  }
}

/** Bytes as text a person can read in an error message. */
const show = (b: Buffer): string =>
  JSON.stringify([...b].map((c) => (c >= 0x20 && c < 0x7f ? String.fromCharCode(c) : `0x${c.toString(16)}`)).join(''));
