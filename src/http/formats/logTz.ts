/**
 * The run log in a client's time zone (`?tz=` on `<tool>.log`). The stored
 * log has lines `2026-11-23T09:19:15.123456+00:00 <message>`; each stamp is
 * rewritten local to the zone, microseconds kept:
 * `2026-11-23T10:19:15.123456+01:00 <message>`.
 *
 * Test output need not be UTF-8, so the work is done on bytes: only the
 * 32-byte stamp at the start of a line is read and replaced; everything else
 * is copied as is. With whole-minute offsets the local stamp has the same
 * length and the same `:SS.ffffff` tail as the UTC one, so only its first 16
 * bytes (`YYYY-MM-DDTHH:MM`) and the offset change, and lines of one minute
 * share one conversion.
 */
import { Transform, type TransformCallback } from 'node:stream';
import { offsetText, ZoneFormatter } from './zone.js';

const STAMP_LEN = 32; // 2026-11-23T09:19:15.123456+00:00
const MINUTE_LEN = 16; // 2026-11-23T09:19
const OFFSET_AT = 26;
const NL = 0x0a;
const UTC_OFFSET = Buffer.from('+00:00');

/** Rewrites the stamps of complete lines; stateful only to reuse the last minute's conversion. */
class StampRewriter {
  private readonly zone: ZoneFormatter;
  private readonly lastKey = Buffer.alloc(MINUTE_LEN);
  private lastLocal: Buffer | undefined; // 16 bytes of local minute + 6 bytes of offset

  constructor(tz: string) {
    this.zone = new ZoneFormatter(tz);
  }

  /** A copy of `buf` (which starts at the start of a line) with the stamp at the start of each line converted. */
  rewrite(buf: Buffer): Buffer {
    const out = Buffer.from(buf);
    for (let pos = 0; pos < buf.length; ) {
      this.rewriteAt(out, pos);
      const nl = buf.indexOf(NL, pos);
      if (nl < 0) break;
      pos = nl + 1;
    }
    return out;
  }

  private rewriteAt(out: Buffer, at: number): void {
    if (!isUtcStamp(out, at)) return;
    if (!this.lastLocal || out.compare(this.lastKey, 0, MINUTE_LEN, at, at + MINUTE_LEN) !== 0) {
      out.copy(this.lastKey, 0, at, at + MINUTE_LEN);
      this.lastLocal = this.localMinute(this.lastKey.toString('latin1'));
    }
    this.lastLocal.copy(out, at, 0, MINUTE_LEN);
    this.lastLocal.copy(out, at + OFFSET_AT, MINUTE_LEN);
  }

  /** `YYYY-MM-DDTHH:MM` (UTC) -> the local minute followed by its offset, 22 bytes. */
  private localMinute(utcMinute: string): Buffer {
    const ts = Date.parse(`${utcMinute}:00Z`);
    if (Number.isNaN(ts)) return Buffer.concat([Buffer.from(utcMinute, 'latin1'), UTC_OFFSET]);
    const off = this.zone.offsetMinutes(ts);
    const local = new Date(ts + off * 60_000).toISOString().slice(0, MINUTE_LEN);
    return Buffer.from(local + offsetText(off), 'latin1');
  }
}

const isDigit = (b: number | undefined) => b !== undefined && b >= 0x30 && b <= 0x39;
const DIGITS = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18, 20, 21, 22, 23, 24, 25];
const PUNCT: Array<[number, number]> = [
  [4, 0x2d], [7, 0x2d], [10, 0x54], [13, 0x3a], [16, 0x3a], [19, 0x2e], // - - T : : .
];

/** Whether `buf` holds `YYYY-MM-DDTHH:MM:SS.ffffff+00:00` at `at`, followed by a space or the end of the line. */
function isUtcStamp(buf: Buffer, at: number): boolean {
  if (buf.length < at + STAMP_LEN) return false;
  const after = buf[at + STAMP_LEN];
  if (after !== undefined && after !== 0x20 && after !== NL && after !== 0x0d) return false;
  if (buf.compare(UTC_OFFSET, 0, 6, at + OFFSET_AT, at + STAMP_LEN) !== 0) return false;
  for (const [i, c] of PUNCT) if (buf[at + i] !== c) return false;
  for (const i of DIGITS) if (!isDigit(buf[at + i])) return false;
  return true;
}

/**
 * The whole log with each line's `+00:00` stamp rewritten into `tz`. Lines
 * without such a stamp, and every byte after the stamp, pass through unchanged.
 * @throws FarmError `invalid_request` for an unknown `tz`.
 */
export function convertLogTz(text: Buffer, tz: string): Buffer {
  return new StampRewriter(tz).rewrite(text);
}

/**
 * The same conversion as a stream, for serving a large log without holding it
 * in memory; a line split across chunks is held back until its end arrives.
 * @throws FarmError `invalid_request` for an unknown `tz` (when created).
 */
export function createLogTzTransform(tz: string): Transform {
  const rewriter = new StampRewriter(tz);
  let carry: Buffer = Buffer.alloc(0);
  return new Transform({
    transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
      const data = carry.length > 0 ? Buffer.concat([carry, chunk]) : chunk;
      const end = data.lastIndexOf(NL) + 1; // up to and including the last newline
      carry = Buffer.from(data.subarray(end)); // a copy, so the chunk itself can be freed
      done(null, end > 0 ? rewriter.rewrite(data.subarray(0, end)) : undefined);
    },
    flush(done: TransformCallback) {
      done(null, carry.length > 0 ? rewriter.rewrite(carry) : undefined);
    },
  });
}
