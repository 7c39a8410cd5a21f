/**
 * The USB IR Toy v2 / IRDroid "sample mode" protocol as bytes, with no I/O:
 * command constants, the carrier setting, and the planning that turns pulse
 * trains into transmissions of 16-bit sample counts. The transport and the
 * fake device of the tests both build on it.
 *
 * Sources: Dangerous Prototypes' "USB IR Toy: Sampling mode" page and LIRC's
 * `plugins/irtoy.c`, whose byte sequence this follows.
 */
import { FarmError } from '../../../core/errors.js';
import { checkTrains } from './trains.js';
import { carrierOf, type IrTrain } from './types.js';

/** One sample count: the device's timer runs at 46875 Hz, so 21.333 us. */
export const SAMPLE_US = 1e6 / 46875;
/** The longest pulse or space one count can hold; 0xFFFF ends the data. */
export const MAX_COUNT = 0xfffe;
/** LIRC's irtoy driver refuses firmware older than v20 (no transmit handshake). */
export const MIN_FIRMWARE = 20;

export const CMD = {
  reset: 0x00,
  transmit: 0x03,
  setCarrier: 0x06,
  byteCountReport: 0x24,
  notifyOnComplete: 0x25,
  handshake: 0x26,
  version: 0x76, // 'v'
  sampleMode: 0x73, // 's'
} as const;

export const REPLY = {
  version: 0x56, // 'V' + 3 digits: hardware, firmware (V222: hw 2, fw 22)
  sampleMode: 0x53, // 'S' + 2 digits: protocol version
  byteCount: 0x74, // 't' + 16-bit big-endian count of data bytes received
  complete: 0x43, // 'C'
  failed: 0x46, // 'F': buffer underrun, the signal went out broken
} as const;

/** Five resets leave any mode, SUMP included (the protocol page recommends it). */
export const RESET_BYTES = Buffer.alloc(5, CMD.reset);
/** Byte count report, notify on complete, handshake, then transmit: LIRC's order. */
export const TX_START = Buffer.from([CMD.byteCountReport, CMD.notifyOnComplete, CMD.handshake, CMD.transmit]);
export const TERMINATOR = Buffer.from([0xff, 0xff]);

/** PR2 of the PIC's PWM timer for a carrier: round(48 MHz / (16 f) - 1). */
export function pr2For(frequencyHz: number): number {
  const pr2 = Math.round(48e6 / (16 * frequencyHz) - 1);
  if (!Number.isFinite(pr2) || pr2 < 1 || pr2 > 255) {
    throw new FarmError('invalid_request', `the IR Toy cannot make a ${frequencyHz} Hz carrier (about 12 kHz to 1.5 MHz)`);
  }
  return pr2;
}

/** `0x06 PR2 0x00`: the duty-cycle byte is not used by the firmware. */
export const carrierCommand = (frequencyHz: number): Buffer =>
  Buffer.from([CMD.setCarrier, pr2For(frequencyHz), 0x00]);

/** A version answer: `V222` -> hardware 2, firmware 22. */
export function parseVersion(answer: Buffer): { hardware: number; firmware: number } | undefined {
  const text = answer.toString('latin1');
  const m = /^V(\d)(\d\d)$/.exec(text);
  if (!m) return undefined;
  return { hardware: Number(m[1]), firmware: Number(m[2]) };
}

/** One transmit command's worth of IR: one carrier, data ending in 0xFFFF. */
export interface Transmission {
  frequency: number;
  /** 16-bit big-endian counts, pulse first, then the terminator. */
  data: Buffer;
  /** How long the device takes to emit it, in microseconds. */
  emitUs: number;
  /** Silence owed before it starts, after the previous transmission ended. */
  waitBeforeUs: number;
}

export interface TransmissionPlan {
  transmissions: Transmission[];
  /** Silence owed after the last transmission before the next send may start. */
  trailingGapUs: number;
}

function countOf(us: number): number {
  const count = Math.max(1, Math.round(us / SAMPLE_US));
  if (count > MAX_COUNT) {
    const maxMs = Math.floor((MAX_COUNT * SAMPLE_US) / 1000);
    throw new FarmError('invalid_request', `a pulse or space of ${us} us is longer than the IR Toy's ${maxMs} ms`);
  }
  return count;
}

/** Fold a trailing space (an even-length train) into the train's gap. */
function normalise(t: IrTrain): { durations: number[]; gap: number } {
  const durations = [...t.durations];
  let gap = t.gap;
  if (durations.length % 2 === 0 && durations.length > 0) gap += durations.pop() ?? 0;
  return { durations, gap };
}

interface Building {
  frequency: number;
  counts: number[];
  emitUs: number;
  waitBeforeUs: number;
}

const finish = (b: Building): Transmission => {
  const data = Buffer.alloc(b.counts.length * 2 + 2);
  b.counts.forEach((c, i) => data.writeUInt16BE(c, i * 2));
  TERMINATOR.copy(data, b.counts.length * 2);
  return { frequency: b.frequency, data, emitUs: b.emitUs, waitBeforeUs: b.waitBeforeUs };
};

/**
 * Turn trains into as few transmissions as possible: consecutive trains with
 * the same carrier go out in one transmission, the gap between them sent as
 * a space, so repeats keep their timing exactly. A new carrier, or a gap too
 * long for one count, starts a new transmission after a timed wait.
 * Throws `invalid_request` for what the IR Toy cannot send.
 */
export function planTransmissions(trains: readonly IrTrain[]): TransmissionPlan {
  checkTrains(trains);
  const out: Transmission[] = [];
  let cur: Building | undefined;
  let owedUs = 0; // silence owed before the next pulse
  for (const t of trains) {
    const { durations, gap } = normalise(t);
    if (durations.length > 0) {
      const frequency = carrierOf(t);
      pr2For(frequency); // reject an impossible carrier before anything is sent
      const counts = durations.map(countOf);
      if (cur && cur.frequency === frequency && Math.round(owedUs / SAMPLE_US) <= MAX_COUNT) {
        cur.counts.push(countOf(owedUs), ...counts);
        cur.emitUs += owedUs;
      } else {
        if (cur) out.push(finish(cur));
        cur = { frequency, counts, emitUs: 0, waitBeforeUs: owedUs };
      }
      cur.emitUs += durations.reduce((a, b) => a + b, 0);
      owedUs = 0;
    }
    owedUs += gap;
  }
  if (cur) out.push(finish(cur));
  return { transmissions: out, trailingGapUs: owedUs };
}

/** Sample counts back to microseconds (the data of one transmission, terminator excluded). */
export function decodeCounts(data: Buffer): number[] {
  const out: number[] = [];
  for (let i = 0; i + 1 < data.length; i += 2) out.push(data.readUInt16BE(i) * SAMPLE_US);
  return out;
}
