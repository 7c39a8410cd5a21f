/**
 * LIRC's transmit buffer (lib/transmit.c `struct sbuf`), whose merging rules
 * shape every train: adjacent pulses merge, adjacent spaces merge, a space
 * before the first pulse is dropped, and a pending final space is never
 * written (the gap follows the last pulse instead).
 *
 * `data` is the pointer the driver reads through. It is not always `own`: a
 * raw button points it at the button's own signals, and a repeat built from
 * `repeat` timings writes `own` while `data` still points at the last raw
 * button sent. LIRC transmits exactly that, so it is kept.
 */
import { i32 } from './cint.js';

/** LIRC's WBUF_SIZE: at most this many durations per send. */
export const WBUF_SIZE = 256;

export class SendBuffer {
  /** LIRC's `_data`. */
  readonly own: number[] = [];
  /** LIRC's `data`: `own`, or a raw button's signals. */
  data: readonly number[] = this.own;
  wptr = 0;
  tooLong = false;
  pendingp = 0;
  pendings = 0;
  /** Sum of the durations written, as lirc_t (used by CONST_LENGTH). */
  sum = 0;

  /** clear_send_buffer(): note that `data` is left where it was. */
  clear(): void {
    this.wptr = 0;
    this.tooLong = false;
    this.pendingp = 0;
    this.pendings = 0;
    this.sum = 0;
  }

  add(d: number): void {
    if (this.wptr < WBUF_SIZE) {
      this.sum = i32(this.sum + d);
      this.own[this.wptr++] = d;
    } else {
      this.tooLong = true;
    }
  }

  pulse(d: number): void {
    const v = i32(d);
    if (this.pendingp > 0) {
      this.pendingp = i32(this.pendingp + v);
      return;
    }
    if (this.pendings > 0) {
      this.add(this.pendings);
      this.pendings = 0;
    }
    this.pendingp = v;
  }

  space(d: number): void {
    const v = i32(d);
    if (this.wptr === 0 && this.pendingp === 0) return; // "first signal is a space!"
    if (this.pendings > 0) {
      this.pendings = i32(this.pendings + v);
      return;
    }
    if (this.pendingp > 0) {
      this.add(this.pendingp);
      this.pendingp = 0;
    }
    this.pendings = v;
  }

  /** Write both pending durations (used before a concatenated repeat). */
  flush(): void {
    if (this.pendingp > 0) this.add(this.pendingp);
    this.pendingp = 0;
    if (this.pendings > 0) this.add(this.pendings);
    this.pendings = 0;
  }

  /** End on a pulse: write a pending pulse, drop a trailing written space. */
  sync(): void {
    if (this.pendingp > 0) {
      this.add(this.pendingp);
      this.pendingp = 0;
    }
    if (this.wptr > 0 && this.wptr % 2 === 0) this.wptr--;
  }

  /** bad_send_buffer(): more than WBUF_SIZE durations. */
  overflowed(): boolean {
    return this.tooLong || (this.wptr === WBUF_SIZE && this.pendingp > 0);
  }

  /** Raw send into an empty buffer: point at the signals instead of copying. */
  pointAt(signals: readonly number[]): void {
    this.data = signals;
    this.wptr = signals.length;
    for (const s of signals) this.sum = i32(this.sum + s);
  }

  /**
   * Copy what `data` points at into `own` ("unrolling raw signal
   * optimisation"). False when that read would be undefined behaviour.
   */
  unroll(): boolean {
    if (this.data === this.own) return true;
    const copy = this.read();
    if (!copy) return false;
    this.data = this.own;
    this.wptr = 0;
    for (const s of copy) this.add(s);
    return true;
  }

  /**
   * The `wptr` durations the driver reads. Undefined when LIRC would read
   * past the array `data` points at (undefined behaviour in C).
   */
  read(): number[] | undefined {
    if (this.wptr > this.data.length) return undefined;
    return this.data.slice(0, this.wptr);
  }
}
