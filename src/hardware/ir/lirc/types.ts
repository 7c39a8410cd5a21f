/**
 * Types of the LIRC encoder: a parsed `lircd.conf` remote and the pulse/space
 * train a transport (IR Toy, lircd, the virtual device) sends.
 */

/** One transmission: what LIRC's file driver writes for one send. */
export interface IrTrain {
  /** Carrier frequency in Hz (the remote's `frequency`; 38000 when unset or 0). */
  frequency: number;
  /** Carrier duty cycle in percent (the remote's `duty_cycle`; 50 when unset or 0). */
  dutyCycle: number;
  /** Microseconds, alternating pulse, space, ..., pulse: always odd length. */
  durations: number[];
  /** Trailing space in microseconds before the next train may start. */
  gap: number;
}

/** Flag bits, with LIRC's values (ir_remote_types.h). */
export const Flag = {
  RAW_CODES: 0x0001,
  RC5: 0x0002, // SHIFT_ENC is the same bit
  RC6: 0x0004,
  RCMM: 0x0008,
  SPACE_ENC: 0x0010,
  SPACE_FIRST: 0x0020,
  GRUNDIG: 0x0080,
  BO: 0x0100,
  SERIAL: 0x0200,
  XMP: 0x0400,
  REVERSE: 0x0800,
  NO_HEAD_REP: 0x1000,
  NO_FOOT_REP: 0x2000,
  CONST_LENGTH: 0x4000,
  REPEAT_HEADER: 0x8000,
} as const;

/** The protocol bits: at most one may be set. */
export const PROTOCOL_MASK = 0x07ff;

/** One button of a remote. */
export interface LircCode {
  name: string;
  /** 1-based line of the button in its file. */
  line: number;
  /**
   * The code values of the line, first one first. More than one makes a
   * multi-code button (sent in turn, XMP style). Empty for raw buttons.
   */
  codes: bigint[];
  /** Raw buttons: the pulse/space durations as written (lirc_t). */
  signals?: number[];
}

/** Pulse/space pair of a timing directive (`header 9000 4500`). */
export interface Pair {
  pulse: number;
  space: number;
}

/**
 * A remote as LIRC holds it after reading the file: REVERSE already applied
 * to the codes, `toggle_bit` turned into `toggleBitMask`, the RC6 mask
 * derived. Durations are lirc_t (32-bit signed) values.
 */
export interface LircRemote {
  name: string;
  fileName: string;
  /** 1-based line of `begin remote`. */
  line: number;
  flags: number;
  bits: number;
  preDataBits: number;
  postDataBits: number;
  preData: bigint;
  postData: bigint;
  header: Pair;
  one: Pair;
  zero: Pair;
  two: Pair;
  three: Pair;
  foot: Pair;
  repeat: Pair;
  pre: Pair;
  post: Pair;
  plead: number;
  ptrail: number;
  gap: number;
  gap2: number;
  repeatGap: number;
  repeatMask: bigint;
  toggleBitMask: bigint;
  /** toggle_bit_mask_state as read_config leaves it (before any press). */
  toggleBitMaskState: bigint;
  toggleMask: bigint;
  rc6Mask: bigint;
  minRepeat: number;
  /** Hz as written; LIRC's default is 38000. */
  frequency: number;
  /** Percent as written; 0 means unset. */
  dutyCycle: number;
  manualSort: boolean;
  codes: LircCode[];
}
