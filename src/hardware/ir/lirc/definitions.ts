/**
 * The `key value [value2]` lines inside `begin remote` (LIRC's defineRemote()
 * and parseFlags()): which keys exist, how each value is parsed, and LIRC's
 * defaults for a new remote.
 */
import { parseCode, parseInt32, parseU32 } from './cint.js';
import { Flag, PROTOCOL_MASK, type LircRemote, type Pair } from './types.js';

/** LIRC's DEFAULT_FREQ. */
export const DEFAULT_FREQUENCY = 38000;

const FLAG_NAMES: Record<string, number> = {
  RAW_CODES: Flag.RAW_CODES,
  RC5: Flag.RC5,
  SHIFT_ENC: Flag.RC5,
  RC6: Flag.RC6,
  RCMM: Flag.RCMM,
  SPACE_ENC: Flag.SPACE_ENC,
  SPACE_FIRST: Flag.SPACE_FIRST,
  GRUNDIG: Flag.GRUNDIG,
  BO: Flag.BO,
  SERIAL: Flag.SERIAL,
  XMP: Flag.XMP,
  REVERSE: Flag.REVERSE,
  NO_HEAD_REP: Flag.NO_HEAD_REP,
  NO_FOOT_REP: Flag.NO_FOOT_REP,
  CONST_LENGTH: Flag.CONST_LENGTH,
  REPEAT_HEADER: Flag.REPEAT_HEADER,
};

const zeroPair = (): Pair => ({ pulse: 0, space: 0 });

/** A remote with LIRC's defaults (all zero, frequency 38 kHz). */
export function newRemote(fileName: string, line: number): LircRemote {
  return {
    name: '', fileName, line, flags: 0, bits: 0, preDataBits: 0, postDataBits: 0,
    preData: 0n, postData: 0n, header: zeroPair(), one: zeroPair(), zero: zeroPair(),
    two: zeroPair(), three: zeroPair(), foot: zeroPair(), repeat: zeroPair(),
    pre: zeroPair(), post: zeroPair(), plead: 0, ptrail: 0, gap: 0, gap2: 0, repeatGap: 0,
    repeatMask: 0n, toggleBitMask: 0n, toggleBitMaskState: 0n, toggleMask: 0n, rc6Mask: 0n,
    minRepeat: 0, frequency: DEFAULT_FREQUENCY, dutyCycle: 0, manualSort: false, codes: [],
  };
}

/** parseFlags(): `A|B|C`, case-insensitive, at most one protocol. */
function parseFlags(val: string): number | string {
  let flags = 0;
  for (const name of val.split('|')) {
    const flag = FLAG_NAMES[name.toUpperCase()];
    if (flag === undefined) return `unknown flag: "${name}"`;
    if (flag & PROTOCOL_MASK && flags & PROTOCOL_MASK) return `multiple protocols given in flags: "${name}"`;
    flags |= flag;
  }
  return flags;
}

type Setter = (r: LircRemote, v: string) => string | undefined;

const bad = (v: string, type: string) => `"${v}": must be a valid (${type}) number`;

/** A setter parsing with `parse` and storing with `set`; undefined = ok. */
function field<T>(parse: (v: string) => T | undefined, type: string, set: (r: LircRemote, x: T) => void): Setter {
  return (r, v) => {
    const x = parse(v);
    if (x === undefined) return bad(v, type);
    set(r, x);
    return undefined;
  };
}
const int = (set: (r: LircRemote, x: number) => void) => field(parseInt32, 'int', set);
const code = (set: (r: LircRemote, x: bigint) => void) => field(parseCode, 'uint64_t', set);
const u32 = (set: (r: LircRemote, x: number) => void) => field((v) => parseU32(v), 'uint32_t', set);
const lircT = (set: (r: LircRemote, x: number) => void) => field((v) => parseU32(v, true), 'lirc_t', set);
const ignoredInt = int(() => undefined);

/** Keys taking one value. `toggle_bit` is handled by the caller (it needs the draft). */
const SINGLE: Record<string, Setter> = {
  name: (r, v) => void (r.name = v),
  driver: () => undefined,
  bits: int((r, x) => (r.bits = x)),
  flags: (r, v) => {
    const f = parseFlags(v);
    if (typeof f === 'string') return f;
    r.flags |= f;
    return undefined;
  },
  eps: ignoredInt,
  aeps: ignoredInt,
  plead: lircT((r, x) => (r.plead = x)),
  ptrail: lircT((r, x) => (r.ptrail = x)),
  pre_data_bits: int((r, x) => (r.preDataBits = x)),
  pre_data: code((r, x) => (r.preData = x)),
  post_data_bits: int((r, x) => (r.postDataBits = x)),
  post_data: code((r, x) => (r.postData = x)),
  repeat_gap: u32((r, x) => (r.repeatGap = x)),
  repeat_mask: code((r, x) => (r.repeatMask = x)),
  toggle_bit_mask: code((r, x) => (r.toggleBitMask = x)),
  toggle_mask: code((r, x) => (r.toggleMask = x)),
  rc6_mask: code((r, x) => (r.rc6Mask = x)),
  ignore_mask: code(() => undefined),
  manual_sort: int((r, x) => (r.manualSort = x !== 0)),
  suppress_repeat: ignoredInt,
  min_repeat: int((r, x) => (r.minRepeat = x)),
  min_code_repeat: ignoredInt,
  frequency: u32((r, x) => (r.frequency = x)),
  duty_cycle: u32((r, x) => (r.dutyCycle = x)),
  baud: u32(() => undefined),
  serial_mode: (_r, v) => serialMode(v),
};

const PAIRS = ['header', 'three', 'two', 'one', 'zero', 'foot', 'repeat', 'pre', 'post'] as const;

/** serial_mode `<5-9><N|E|O><stop bits>`: only validated (SERIAL cannot be sent). */
function serialMode(v: string): string | undefined {
  if (!/^[5-9]/.test(v)) return 'bad bit count';
  if (!/^.[neoNEO]/.test(v)) return 'unsupported parity mode';
  const stop = v.slice(2);
  if (stop !== '1.5' && parseU32(stop) === undefined) return bad(stop, 'unsigned int');
  return undefined;
}

/**
 * Apply one definition line (`tokens` = key, value, [value2, ...]) to the
 * remote. Returns LIRC's error text, or undefined when the line is accepted.
 * Extra words after the values are ignored, as LIRC does (with a warning).
 */
export function applyDefinition(r: LircRemote, tokens: string[], setToggleBit: (bit: number) => void): string | undefined {
  const [key, val, val2] = tokens as [string, string, string | undefined];
  const k = key.toLowerCase();
  if (k === 'toggle_bit' || k === 'repeat_bit') {
    const bit = parseInt32(val);
    if (bit === undefined) return bad(val, 'int');
    setToggleBit(bit);
    return undefined;
  }
  if (k === 'gap') {
    const gap2 = val2 === undefined ? 0 : parseU32(val2);
    const gap = parseU32(val);
    if (gap2 === undefined) return bad(val2 ?? '', 'uint32_t');
    if (gap === undefined) return bad(val, 'uint32_t');
    r.gap = gap;
    if (val2 !== undefined) r.gap2 = gap2;
    return undefined;
  }
  // Own keys only: "constructor" and friends are not LIRC keywords.
  const single = Object.hasOwn(SINGLE, k) ? SINGLE[k] : undefined;
  if (single) return single(r, val);
  const pair = PAIRS.find((p) => p === k);
  if (pair && val2 !== undefined) {
    const pulse = parseU32(val, true);
    const space = parseU32(val2, true);
    if (pulse === undefined) return bad(val, 'lirc_t');
    if (space === undefined) return bad(val2, 'lirc_t');
    r[pair] = { pulse, space };
    return undefined;
  }
  return val2 === undefined
    ? `unknown definition or too few arguments: "${key} ${val}"`
    : `unknown definition: "${key} ${val} ${val2}"`;
}
