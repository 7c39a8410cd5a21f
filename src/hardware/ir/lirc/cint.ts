/**
 * C integer semantics the LIRC encoder depends on.
 *
 * LIRC parses numbers with strtoul/strtol/strtoull (base 0: `0x` hex, leading
 * `0` octal), keeps durations in a 32-bit signed `lirc_t` and codes in a 64-bit
 * unsigned `ir_code`. Reproducing its output bit for bit means reproducing
 * those widths, wrap-arounds included, so the helpers here are deliberately
 * literal rather than "clean".
 */

/** 2^64 - 1: every ir_code is masked to this. */
export const U64_MAX = (1n << 64n) - 1n;

/** Wrap a number to C `int` (32-bit signed), as assigning to lirc_t does. */
export const i32 = (n: number): number => n | 0;

/** Wrap a bigint to uint64_t. */
export const u64 = (n: bigint): bigint => n & U64_MAX;

/** Result of a C strto* call: the value, and whether it overflowed (ERANGE). */
interface Parsed {
  value: bigint;
  overflow: boolean;
  negative: boolean;
}

const DIGITS = '0123456789abcdefghijklmnopqrstuvwxyz';

/**
 * strtoul/strtoull with base 0 on a whole token. Returns undefined when the
 * token is not entirely a number (C would leave `*endptr` non-empty), which
 * every LIRC caller treats as a parse error.
 */
function strtou64(token: string): Parsed | undefined {
  // strtoul skips C isspace() first; space and tab never reach here (they
  // split tokens) but \r, \v and \f can.
  let s = token.replace(/^[\n\v\f\r]+/, '');
  let negative = false;
  if (s.startsWith('+') || s.startsWith('-')) {
    negative = s.startsWith('-');
    s = s.slice(1);
  }
  let base = 10;
  if (/^0[xX][0-9a-fA-F]/.test(s)) {
    base = 16;
    s = s.slice(2);
  } else if (s.startsWith('0')) {
    base = 8;
  }
  if (s.length === 0) return undefined;
  let value = 0n;
  let overflow = false;
  for (const ch of s.toLowerCase()) {
    const d = DIGITS.indexOf(ch);
    if (d < 0 || d >= base) return undefined;
    value = value * BigInt(base) + BigInt(d);
    if (value > U64_MAX) overflow = true;
  }
  if (overflow) return { value: U64_MAX, overflow, negative };
  return { value: negative ? u64(-value) : value, overflow, negative };
}

/** `strtoull(val, &end, 0)` as s_strtocode uses it; undefined = LIRC parse error. */
export function parseCode(token: string): bigint | undefined {
  const p = strtou64(token);
  if (p === undefined || p.overflow) return undefined;
  return p.value;
}

/**
 * `strtoul` truncated to 32 bits, as s_strtou32/s_strtoui/s_strtolirc_t do
 * (they store into a uint32_t). `signed` reinterprets as lirc_t.
 */
export function parseU32(token: string, signed = false): number | undefined {
  const p = strtou64(token);
  if (p === undefined) return undefined;
  const v = Number(p.value & 0xffffffffn);
  return signed ? i32(v) : v;
}

/** `strtol` then a range check against `int`, as s_strtoi does. */
export function parseInt32(token: string): number | undefined {
  const p = strtou64(token);
  if (p === undefined) return undefined;
  // Reinterpret the unsigned parse as C's signed long, saturating like strtol.
  let v: bigint;
  if (p.overflow) v = p.negative ? -(1n << 63n) : (1n << 63n) - 1n;
  else v = p.value >= 1n << 63n ? p.value - (1n << 64n) : p.value;
  if (v < -(1n << 31n) || v >= 1n << 31n) return undefined;
  return Number(v);
}

/** LIRC's reverse(): mirror the low `bits` bits. */
export function reverseBits(data: bigint, bits: number): bigint {
  let c = 0n;
  for (let i = 0; i < bits; i++) {
    if ((data >> BigInt(i)) & 1n) c |= 1n << BigInt(bits - 1 - i);
  }
  return u64(c);
}

/** LIRC's gen_mask(): the low `bits` bits set (all 64 for bits >= 64). */
export function genMask(bits: number): bigint {
  if (bits <= 0) return 0n;
  return bits >= 64 ? U64_MAX : (1n << BigInt(bits)) - 1n;
}

/** `((ir_code)1) << n` as x86-64 executes it: the count is taken modulo 64. */
export function bit64(n: number): bigint {
  return 1n << BigInt(((n % 64) + 64) % 64);
}

/** Population count of a 64-bit code. */
export function bitsSet(data: bigint): number {
  let n = 0;
  for (let d = data; d > 0n; d >>= 1n) if (d & 1n) n++;
  return n;
}
