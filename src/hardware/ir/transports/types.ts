/**
 * What every IR transport (the thing that puts infrared light on the device
 * under test) promises, and the pulse train it sends. The LIRC encoder turns
 * a key of a `lircd.conf` remote into `IrTrain`s; a transport emits them.
 *
 * `IrTrain` is the encoder's type (one shape for both sides); a `frequency`
 * of 0 means 38000 Hz to every transport.
 */
import type { IrTrain } from '../lirc/types.js';

export type { IrTrain };

/** The remote and key a train encodes, when the caller knows it. */
export interface KeyLabel {
  remote: string;
  key: string;
}

export interface SendOptions {
  /** Aborting stops the transmission as soon as the transport can; `send` then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** The key the trains encode. Only for listeners (the virtual transport passes it on); never changes what is sent. */
  key?: KeyLabel;
}

export interface SendKeyOptions {
  /** Repeat frames after the first one (lircd's `SEND_ONCE remote key <repeats>`); default 0. */
  repeats?: number;
  /** Transports with a `keyMap` (CEC, Roku, ADB): keep the key down this long, in ms; default 0 (a tap). */
  holdMs?: number;
  signal?: AbortSignal;
}

/**
 * The key names a transport that presses keys by name over a control protocol
 * (HDMI-CEC, Roku ECP, ADB) understands: farmhand's (LIRC's `KEY_OK`) and the
 * protocol's own. Such a transport needs no remote file and no trains.
 */
export interface KeyMap {
  /** `cec`, `roku` or `adb`: for messages. */
  readonly protocol: string;
  /** The protocol's key for a farmhand name or a native one; undefined when it has none. */
  lookup(key: string): string | undefined;
  /** A few names the map knows, for the message that refuses an unknown one. */
  readonly examples: readonly string[];
}

/** A key held until released: `holdKey` / `holdTrains`. */
export interface HoldOptions {
  /** The hold ends by itself after this long (the press API's cap). */
  maxMs: number;
  /** Aborting releases the key; the hold then resolves (it does not reject) once the key is up. */
  signal?: AbortSignal;
  /** Called once the key is down (the device has started sending it). */
  onDown?: () => void;
}

/**
 * A way to send infrared. Sends are serialised: a second `send` waits for the
 * first, so frames never interleave. Every failure the device or its absence
 * causes is a `FarmError` (`device_unavailable`; `invalid_request` for a train
 * or key the transport cannot send).
 */
export interface IrTransport {
  /** What this transport drives, for logs and status (`irtoy:/dev/ttyACM0`). */
  readonly uri: string;
  /** Emit the trains one after another, honouring each train's gap. Resolves when the device reports them sent. */
  send(trains: readonly IrTrain[], opts?: SendOptions): Promise<void>;
  /**
   * Present on transports that encode keys themselves (lircd): send a key by
   * remote and key name. Callers prefer it over `send` when it exists.
   */
  sendKey?(remote: string, key: string, opts?: SendKeyOptions): Promise<void>;
  /**
   * Present on transports that can hold a key down for as long as the caller
   * wants, by name (lircd: `SEND_START`, then `SEND_STOP` on release).
   * Resolves once the key is up again.
   */
  holdKey?(remote: string, key: string, opts: HoldOptions): Promise<void>;
  /**
   * Present on transports that can hold a key down for as long as the caller
   * wants, from the trains of one press (the virtual set-top box: key down,
   * then key up on release). Resolves once the key is up again.
   */
  holdTrains?(trains: readonly IrTrain[], opts: HoldOptions & { key?: KeyLabel }): Promise<void>;
  /**
   * Present on transports that press keys by name over a control protocol
   * (CEC, Roku ECP, ADB): the key names they take. The KeyPresser then reads
   * no remote file: it checks the key here (`invalid_request` for one the map
   * lacks) and calls `sendKey` / `holdKey` with the key as given; the remote
   * name is passed on and ignored.
   */
  readonly keyMap?: KeyMap;
  /** Finish the send in progress, release the device; later sends fail with `device_unavailable`. */
  close(): Promise<void>;
}

/** The carrier LIRC assumes when a remote names none. */
export const DEFAULT_CARRIER_HZ = 38000;

/** The carrier of a train, with LIRC's default applied. */
export const carrierOf = (t: IrTrain): number => (t.frequency > 0 ? t.frequency : DEFAULT_CARRIER_HZ);
