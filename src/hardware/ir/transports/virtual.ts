/**
 * `virtual:`: infrared for the virtual set-top box. Nothing is decoded or
 * timed here: each send is handed, as it is, to the listeners (the virtual
 * device), with the key label when the caller gave one. It still goes through
 * the encoder, like a press on real hardware, and checks the trains the same
 * way the real transports do.
 */
import { FarmError } from '../../../core/errors.js';
import type { Logger } from '../../../core/ports.js';
import { silentLogger } from '../../../logger.js';
import { heldUntil } from './async.js';
import { checkTrains } from './trains.js';
import type { HoldOptions, IrTrain, IrTransport, KeyLabel, SendOptions } from './types.js';

/** One send, as the virtual device sees it. */
export interface VirtualIrEvent {
  trains: readonly IrTrain[];
  /** The key the trains encode, when the sender said. */
  key?: KeyLabel;
  /** `performance.now()` when it was sent. */
  at: number;
  /**
   * A key held until released (`holdTrains`): `down` carries the press's
   * trains, `up` (no trains) says the key was let go.
   */
  hold?: 'down' | 'up';
}

export type VirtualIrListener = (event: VirtualIrEvent) => void;

export class VirtualTransport implements IrTransport {
  readonly uri = 'virtual:';
  private readonly listeners = new Set<VirtualIrListener>();
  private readonly log: Logger;
  private closed = false;

  constructor(listener?: VirtualIrListener, logger: Logger = silentLogger) {
    if (listener) this.listeners.add(listener);
    this.log = logger.child({ ir: this.uri });
  }

  /** Add a listener; returns the function that removes it. */
  subscribe(listener: VirtualIrListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async send(trains: readonly IrTrain[], opts: SendOptions = {}): Promise<void> {
    opts.signal?.throwIfAborted();
    if (this.closed) throw new FarmError('device_unavailable', 'the virtual IR transport is closed');
    checkTrains(trains);
    this.emit({ trains, at: performance.now(), ...(opts.key ? { key: opts.key } : {}) });
  }

  /**
   * Hold a key: a `down` event with the press's trains, then, on release (or
   * after `maxMs`), an `up` event. No repeat frames are sent in between: the
   * box sees one key down, then one key up.
   */
  async holdTrains(trains: readonly IrTrain[], opts: HoldOptions & { key?: KeyLabel }): Promise<void> {
    opts.signal?.throwIfAborted();
    if (this.closed) throw new FarmError('device_unavailable', 'the virtual IR transport is closed');
    checkTrains(trains);
    const key = opts.key ? { key: opts.key } : {};
    this.emit({ trains, at: performance.now(), hold: 'down', ...key });
    try {
      opts.onDown?.();
      await heldUntil(opts.maxMs, opts.signal);
    } finally {
      this.emit({ trains: [], at: performance.now(), hold: 'up', ...key });
    }
  }

  private emit(event: VirtualIrEvent): void {
    for (const l of this.listeners) {
      try {
        l(event);
      } catch (err) {
        // The listener is the virtual device; its bug must not look like an IR failure.
        this.log.error({ err }, 'virtual IR listener threw');
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.listeners.clear();
  }
}
