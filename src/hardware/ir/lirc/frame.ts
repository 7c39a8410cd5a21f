/**
 * How one frame becomes pulses and spaces (LIRC's send_code, send_data,
 * send_repeat and helpers in lib/transmit.c): header, lead, pre_data with
 * its pre pulse/space, data, post pulse/space with post_data, trail, foot;
 * bits most significant first, encoded per protocol.
 */
import { bit64, bitsSet, i32, reverseBits, u64 } from './cint.js';
import type { SendBuffer } from './sendBuffer.js';
import { Flag, PROTOCOL_MASK, type LircRemote } from './types.js';

/** The per-remote state bits a frame depends on. */
export interface ToggleState {
  /** Current toggle_bit_mask state: flipped before every new press. */
  toggleBitMaskState: bigint;
  /** Counts sends of a press 0, 1, 2, 3, 2, 3...; odd counts XOR toggle_mask. */
  toggleMaskState: number;
}

const protocol = (r: LircRemote) => r.flags & PROTOCOL_MASK;
/** is_rc6() also holds whenever an rc6_mask is set. */
const isRc6 = (r: LircRemote) => protocol(r) === Flag.RC6 || r.rc6Mask !== 0n;
const isBiphase = (r: LircRemote) => protocol(r) === Flag.RC5 || isRc6(r);
export const hasHeader = (r: LircRemote) => r.header.pulse > 0 && r.header.space > 0;
export const hasRepeat = (r: LircRemote) => r.repeat.pulse > 0 && r.repeat.space > 0;

function sendHeader(r: LircRemote, b: SendBuffer): void {
  if (!hasHeader(r)) return;
  b.pulse(r.header.pulse);
  b.space(r.header.space);
}

function sendFoot(r: LircRemote, b: SendBuffer): void {
  if (r.foot.pulse <= 0 || r.foot.space <= 0) return;
  b.space(r.foot.space);
  b.pulse(r.foot.pulse);
}

// plead/ptrail are tested with `!= 0`, not `> 0`, in LIRC.
const sendLead = (r: LircRemote, b: SendBuffer) => r.plead !== 0 && b.pulse(r.plead);
const sendTrail = (r: LircRemote, b: SendBuffer) => r.ptrail !== 0 && b.pulse(r.ptrail);

/** RC-MM: two bits per symbol; 00 zero, 01 one, 10 two, 11 three. */
function sendRcmm(r: LircRemote, b: SendBuffer, data: bigint, bits: number, done: number): void {
  if (bits % 2 || done % 2) return; // LIRC logs "invalid bit number." and sends nothing
  const symbols = [r.zero, r.two, r.one, r.three]; // indexed by the reversed pair
  for (let i = 0; i < bits; i += 2, data >>= 2n) {
    const s = symbols[Number(data & 3n)]!;
    b.pulse(s.pulse);
    b.space(s.space);
  }
}

/** XMP: a nibble n is a pulse `zero.pulse`, then a space `zero.space + n * one.space`. */
function sendXmp(r: LircRemote, b: SendBuffer, data: bigint, bits: number, done: number): void {
  if (bits % 4 || done % 4) return;
  for (let i = 0; i < bits; i += 4, data >>= 4n) {
    const nibble = Number(reverseBits(data & 0xfn, 4));
    b.pulse(r.zero.pulse);
    b.space(i32(r.zero.space + nibble * r.one.space));
  }
}

/** Toggle bits applied to the bit under `mask` (LSB of `data`). */
function applyToggles(r: LircRemote, st: ToggleState, data: bigint, mask: bigint, oneBitMask: boolean): bigint {
  let d = data;
  if (r.toggleBitMask > 0n && mask & r.toggleBitMask) {
    if (oneBitMask) {
      // "backwards compatibility": the state forces the bit
      d = (d & ~1n) | (st.toggleBitMaskState & mask ? 1n : 0n);
    } else if (st.toggleBitMaskState & mask) {
      d ^= 1n;
    }
  }
  if (r.toggleMask > 0n && mask & r.toggleMask && st.toggleMaskState % 2) d ^= 1n;
  return d;
}

/**
 * One bit. A 1 is space-then-pulse on biphase (RC5, RC6) and SPACE_FIRST
 * remotes, pulse-then-space otherwise; a 0 is pulse-then-space except on
 * SPACE_FIRST. Bits under rc6_mask last twice as long.
 */
function sendBit(r: LircRemote, b: SendBuffer, one: boolean, mask: bigint): void {
  const wide = (mask & r.rc6Mask) !== 0n;
  const spaceFirst = protocol(r) === Flag.SPACE_FIRST;
  if (one) {
    const k = isBiphase(r) && wide ? 2 : 1;
    if (isBiphase(r) || spaceFirst) {
      b.space(k * r.one.space);
      b.pulse(k * r.one.pulse);
    } else {
      b.pulse(r.one.pulse);
      b.space(r.one.space);
    }
  } else if (wide) {
    b.pulse(2 * r.zero.pulse);
    b.space(2 * r.zero.space);
  } else if (spaceFirst) {
    b.space(r.zero.space);
    b.pulse(r.zero.pulse);
  } else {
    b.pulse(r.zero.pulse);
    b.space(r.zero.space);
  }
}

/** send_data(): `bits` bits of `data`, `done` bits of the frame already sent. */
function sendData(r: LircRemote, st: ToggleState, b: SendBuffer, value: bigint, bits: number, done: number): void {
  let data = reverseBits(value, bits);
  if (protocol(r) === Flag.RCMM) return sendRcmm(r, b, data, bits, done);
  if (protocol(r) === Flag.XMP) return sendXmp(r, b, data, bits, done);
  const allBits = r.preDataBits + r.bits + r.postDataBits;
  const oneBitMask = bitsSet(r.toggleBitMask) === 1;
  let mask = u64(bit64(allBits - 1 - done));
  for (let i = 0; i < bits; i++, mask >>= 1n, data >>= 1n) {
    data = applyToggles(r, st, data, mask, oneBitMask);
    sendBit(r, b, (data & 1n) === 1n, mask);
  }
}

/** send_code(): a full frame for `code`; `repeat` drops header/foot per NO_*_REP. */
export function sendCode(r: LircRemote, st: ToggleState, b: SendBuffer, code: bigint, repeat: boolean): void {
  if (!repeat || !(r.flags & Flag.NO_HEAD_REP)) sendHeader(r, b);
  sendLead(r, b);
  if (r.preDataBits > 0) {
    sendData(r, st, b, r.preData, r.preDataBits, 0);
    if (r.pre.pulse > 0 && r.pre.space > 0) {
      b.pulse(r.pre.pulse);
      b.space(r.pre.space);
    }
  }
  sendData(r, st, b, code, r.bits, r.preDataBits);
  if (r.postDataBits > 0) {
    if (r.post.pulse > 0 && r.post.space > 0) {
      b.pulse(r.post.pulse);
      b.space(r.post.space);
    }
    sendData(r, st, b, r.postData, r.postDataBits, r.preDataBits + r.bits);
  }
  sendTrail(r, b);
  if (!repeat || !(r.flags & Flag.NO_FOOT_REP)) sendFoot(r, b);
  // The header does not count against CONST_LENGTH's frame length here.
  if (!repeat && r.flags & Flag.NO_HEAD_REP && r.flags & Flag.CONST_LENGTH) {
    b.sum = i32(b.sum - (r.header.pulse + r.header.space));
  }
}

/** A repeat frame from `repeat` timings (header first only under REPEAT_HEADER). */
export function sendRepeat(r: LircRemote, b: SendBuffer): void {
  if (r.flags & Flag.REPEAT_HEADER && hasHeader(r)) sendHeader(r, b);
  sendLead(r, b);
  b.pulse(r.repeat.pulse);
  b.space(r.repeat.space);
  sendTrail(r, b);
}
