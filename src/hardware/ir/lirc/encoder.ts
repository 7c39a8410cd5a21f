/**
 * Stateful LIRC encoder: turns button presses into the trains LIRC 0.10
 * sends (lib/transmit.c init_send_or_sim, plugins/file.c send_func).
 *
 * API:
 * - `new LircEncoder(remote, { session? })`: one per remote; remembers toggle
 *   state, the multi-code position of each button and the last button sent,
 *   so a sequence of presses over several calls toggles as LIRC does.
 * - `encoder.simsend(key, count)`: one press the way `irsimsend -c count`
 *   sends it: the toggle flips, the press is sent, then `count - 1` repeats;
 *   a press of the button pressed just before is itself sent as a repeat;
 *   `min_repeat` is ignored (irsimsend forces it to 0).
 * - `encoder.sendOnce(key, reps)`: what lircd sends for `SEND_ONCE remote key
 *   [reps]`: like simsend, but a press is never a repeat of the one before and
 *   `min_repeat` adds repeats (concatenated into the train below 10 ms gaps).
 * - `encode(remote, keys, { count })`: a key sequence with irsimsend's rules
 *   on a fresh (or given) encoder.
 *
 * Every train is `{ frequency, dutyCycle, durations (pulse first, ends on a
 * pulse), gap }`. What LIRC cannot send is refused with a FarmError
 * ('invalid_request'; 'not_found' for an unknown key) naming file and line.
 */
import { FarmError } from '../../../core/errors.js';
import { i32 } from './cint.js';
import { hasRepeat, sendCode, sendRepeat, type ToggleState } from './frame.js';
import { configError, isRaw } from './parse.js';
import { SendBuffer } from './sendBuffer.js';
import { Flag, PROTOCOL_MASK, type IrTrain, type LircCode, type LircRemote } from './types.js';

/** LIRCD_EXACT_GAP_THRESHOLD: shorter gaps are sent inside one train. */
const EXACT_GAP_THRESHOLD = 10000;
/** Durations with this bit make LIRC's file driver stop (LIRC_EOF). */
const LIRC_EOF = 0x08000000;
/** irsimsend remembers the last button name in a char[32]. */
const LAST_NAME_LEN = 32;
/** Bound on the concatenation loop (LIRC relies on its buffer filling up). */
const MAX_ROUNDS = 10000;

/**
 * State LIRC keeps globally rather than per remote: the send buffer (whose
 * read pointer survives between sends) and irsimsend's last button name.
 * Share one session between the encoders of one file to replay irsimsend
 * over a whole multi-remote file.
 */
export class LircSession {
  readonly buffer = new SendBuffer();
  lastName: string | null = null;

  /**
   * Note the button just pressed, as irsimsend does in a char[32]: a name of
   * 32 bytes or more is never seen as equal to the next one.
   */
  remember(name: string): void {
    this.lastName = Buffer.byteLength(name) < LAST_NAME_LEN ? name : null;
  }

  /** `remotes` in file order: loading leaves the buffer pointing at the last raw button. */
  constructor(remotes: readonly LircRemote[] = []) {
    const last = remotes[remotes.length - 1];
    const signals = last && isRaw(last) ? last.codes[last.codes.length - 1]?.signals : undefined;
    if (signals) this.buffer.data = signals;
  }
}

const UNSENDABLE: Record<number, string> = { [Flag.GRUNDIG]: 'GRUNDIG', [Flag.SERIAL]: 'SERIAL', [Flag.BO]: 'BO' };

/** Throw when LIRC cannot transmit this remote at all. */
export function assertTransmittable(r: LircRemote): void {
  const name = UNSENDABLE[r.flags & PROTOCOL_MASK];
  const where = `remote "${r.name}"`;
  if (name) throw configError(r.fileName, r.line, `${where} uses ${name}, which LIRC cannot transmit`);
  if (r.name === 'lirc') throw configError(r.fileName, r.line, `${where}: the name "lirc" is reserved by LIRC`);
  if (r.zero.pulse === 0 && r.zero.space === 0 && !(r.flags & Flag.RAW_CODES)) {
    throw configError(r.fileName, r.line, `${where} has no timings ("zero 0 0"): it only describes received codes`);
  }
}

export class LircEncoder {
  private readonly st: ToggleState;
  private readonly transmitState = new Map<LircCode, number | null>();
  private repeatCountdown = 0;
  private readonly buf: SendBuffer;
  private readonly session: LircSession;

  constructor(
    readonly remote: LircRemote,
    opts: { session?: LircSession } = {},
  ) {
    assertTransmittable(remote);
    this.session = opts.session ?? new LircSession([remote]);
    this.buf = this.session.buffer;
    this.st = { toggleBitMaskState: remote.toggleBitMaskState, toggleMaskState: 0 };
  }

  /** The button named `key` (case-insensitive, first match, as LIRC looks it up). */
  code(key: string): LircCode {
    const k = key.toLowerCase();
    const code = this.remote.codes.find((c) => c.name.toLowerCase() === k);
    if (code) return code;
    throw new FarmError(
      'not_found',
      `${this.remote.fileName}:${this.remote.line}: remote "${this.remote.name}" has no key "${key}"`,
      { file: this.remote.fileName, line: this.remote.line, key },
    );
  }

  /** A new press: what irsimsend and lircd do before sending. */
  private startPress(code: LircCode): void {
    this.transmitState.set(code, null);
    if (this.remote.toggleMask > 0n) this.st.toggleMaskState = 0;
    if (this.remote.toggleBitMask > 0n) this.st.toggleBitMaskState ^= this.remote.toggleBitMask;
  }

  /** One press as `irsimsend -c count -k key` sends it (see the module header). */
  simsend(key: string | LircCode, count = 1): IrTrain[] {
    const trains: IrTrain[] = [];
    this.simsendEach(typeof key === 'string' ? this.code(key) : key, count, (t) => {
      if (t instanceof FarmError) throw t;
      trains.push(t);
    });
    return trains;
  }

  /**
   * simsend() that reports each send to `sink` and, like irsimsend, goes on
   * after a send LIRC refuses (the refusal is passed to `sink` instead of a
   * train; a sink that throws stops the press there).
   */
  simsendEach(code: LircCode, count: number, sink: (t: IrTrain | FarmError) => void): void {
    this.startPress(code);
    const repeatOfLast = code.name === this.session.lastName;
    for (let i = 0; i < Math.max(count, 1); i++) sink(this.trySend(code, repeatOfLast || i > 0));
    this.session.remember(code.name);
  }

  private trySend(code: LircCode, repeat: boolean): IrTrain | FarmError {
    try {
      return this.send(code, repeat, 0);
    } catch (e) {
      if (e instanceof FarmError) return e;
      throw e;
    }
  }

  /** One press as lircd sends `SEND_ONCE remote key reps` (see the module header). */
  sendOnce(key: string, reps = 0): IrTrain[] {
    const code = this.code(key);
    this.startPress(code);
    const trains = [this.send(code, false, this.remote.minRepeat)];
    this.repeatCountdown = Math.max(this.repeatCountdown, reps);
    if (this.repeatCountdown <= 0 && code.codes.length <= 1) return trains;
    for (let round = 0; round < MAX_ROUNDS; round++) {
      const ts = this.transmitState.get(code) ?? null;
      if (code.codes.length <= 1 || (ts !== null && ts + 1 >= code.codes.length)) this.repeatCountdown--;
      trains.push(this.send(code, true, 0));
      if (this.repeatCountdown <= 0) return trains;
    }
    return this.refuse(code, 'repeats never end');
  }

  private refuse(code: LircCode, why: string): never {
    const r = this.remote;
    throw configError(r.fileName, code.line, `LIRC cannot transmit key "${code.name}" of remote "${r.name}": ${why}`);
  }

  /**
   * send_ir_ncode(): one send. `repeatOfLast` is LIRC's `repeat_remote != NULL`;
   * `minRepeat` seeds the repeat countdown of a non-repeat send.
   */
  private send(code: LircCode, repeatOfLast: boolean, minRepeat: number): IrTrain {
    const b = this.buf;
    b.clear();
    let repeat = repeatOfLast;
    if (!repeatOfLast) this.repeatCountdown = minRepeat;
    let gap = 0;
    for (let round = 0; ; round++) {
      if (round > MAX_ROUNDS) this.refuse(code, 'the send never ends');
      this.buildFrame(code, repeat);
      b.sync();
      if (b.overflowed()) this.refuse(code, 'more than 256 durations in one send');
      gap = this.remainingGap(code, repeat);
      const ts = this.advance(code);
      if (!((this.repeatCountdown > 0 || ts !== null) && gap < EXACT_GAP_THRESHOLD)) break;
      // A short gap: LIRC sends the next frame, as a repeat, in the same train.
      if (!b.unroll()) this.refuse(code, 'LIRC would read past the button\'s signals');
      if (code.codes.length <= 1 || ts === null) this.repeatCountdown--;
      b.space(gap);
      b.flush();
      b.sum = 0;
      repeat = true;
    }
    return this.train(code, gap);
  }

  private buildFrame(code: LircCode, repeat: boolean): void {
    const r = this.remote;
    const b = this.buf;
    if (repeat && hasRepeat(r)) return sendRepeat(r, b);
    if (!isRaw(r)) {
      const ts = this.transmitState.get(code) ?? null;
      let value = code.codes[ts ?? 0] ?? 0n;
      if (repeat && r.repeatMask > 0n) value ^= r.repeatMask;
      sendCode(r, this.st, b, value, repeat);
      if (r.toggleMask > 0n && ++this.st.toggleMaskState === 4) this.st.toggleMaskState = 2;
      b.data = b.own;
      return;
    }
    if (!code.signals) this.refuse(code, 'no signals for raw send');
    if (b.wptr > 0) for (const s of code.signals) b.add(s);
    else b.pointAt(code.signals);
  }

  /** The gap after the train: repeat_gap, CONST_LENGTH padding, or gap. */
  private remainingGap(code: LircCode, repeat: boolean): number {
    const r = this.remote;
    const minGap = i32(r.gap2 !== 0 && r.gap2 < r.gap ? r.gap2 : r.gap);
    if (r.repeatGap > 0 && repeat && hasRepeat(r)) return i32(r.repeatGap);
    if (!(r.flags & Flag.CONST_LENGTH)) return minGap;
    if (minGap > this.buf.sum) return i32(minGap - this.buf.sum);
    return this.refuse(code, `too short gap: ${r.gap} us is less than the frame (${this.buf.sum} us) with CONST_LENGTH`);
  }

  /** Step a multi-code button to its next code; returns the new position. */
  private advance(code: LircCode): number | null {
    if (code.codes.length <= 1) return this.transmitState.get(code) ?? null;
    const ts = this.transmitState.get(code) ?? null;
    let next: number | null = ts === null ? 1 : ts + 1 < code.codes.length ? ts + 1 : null;
    if (next === null && ts !== null && (this.remote.flags & PROTOCOL_MASK) === Flag.XMP) next = 1;
    this.transmitState.set(code, next);
    return next;
  }

  private train(code: LircCode, gap: number): IrTrain {
    const durations = this.buf.read();
    if (!durations) return this.refuse(code, 'LIRC would read past the button\'s signals');
    if (durations.length === 0) this.refuse(code, 'nothing to send');
    const zero = durations.indexOf(0);
    if (zero >= 0) this.refuse(code, `a ${zero % 2 ? 'space' : 'pulse'} of 0 us at position ${zero}`);
    if ([...durations, gap].some((d) => d & LIRC_EOF)) this.refuse(code, 'a duration of 134 s or more');
    const r = this.remote;
    return { frequency: r.frequency || 38000, dutyCycle: r.dutyCycle || 50, durations, gap };
  }
}

/**
 * Encode a key sequence with irsimsend's rules (`irsimsend -c count` over a
 * list of keys): each key a press plus `count - 1` repeats, a key equal to
 * the one before sent as a repeat. Pass `encoder` to carry toggle state
 * across calls.
 */
export function encode(
  remote: LircRemote,
  keys: readonly string[],
  opts: { count?: number; encoder?: LircEncoder } = {},
): IrTrain[] {
  const enc = opts.encoder ?? new LircEncoder(remote);
  return keys.flatMap((k) => enc.simsend(k, opts.count ?? 1));
}
