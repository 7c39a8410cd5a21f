/**
 * Splits ffmpeg's MJPEG byte stream (`-f mjpeg`: plain JFIF pictures back to
 * back) into whole JPEGs. The marker segments before the scan are skipped by
 * their lengths (a table may hold the bytes 0xFF 0xD9); in the entropy-coded
 * data a 0xFF is always followed by 0x00 (byte stuffing) or a restart marker,
 * so the first other marker after it ends the scan, and EOI (0xFFD9) ends the
 * picture. Bytes before an SOI (0xFFD8) are dropped (a resync).
 */

/** A picture larger than this is not a live-view picture: the bytes are dropped and the splitter resyncs. */
const MAX_JPEG_BYTES = 16 * 1024 * 1024;

export class MjpegSplitter {
  private buf: Buffer = Buffer.alloc(0);

  /** Forget a partial picture (a new ffmpeg run). */
  reset(): void {
    this.buf = Buffer.alloc(0);
  }

  /** Add bytes; returns the pictures completed by them (each its own Buffer), oldest first. */
  push(chunk: Buffer): Buffer[] {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: Buffer[] = [];
    for (;;) {
      const start = this.buf.indexOf(SOI);
      if (start < 0) {
        // Keep a last 0xFF: it may be the first byte of the next SOI.
        this.buf = this.buf.length > 0 && this.buf[this.buf.length - 1] === 0xff ? this.buf.subarray(this.buf.length - 1) : Buffer.alloc(0);
        break;
      }
      if (start > 0) this.buf = this.buf.subarray(start);
      const end = jpegEnd(this.buf);
      if (end === 'bad') {
        this.buf = this.buf.subarray(2); // not a picture after all: look for the next SOI
        continue;
      }
      if (end === undefined) {
        if (this.buf.length > MAX_JPEG_BYTES) this.buf = this.buf.subarray(2);
        else {
          // Own the partial picture's bytes (the chunk's buffer may be reused by the stream).
          if (this.buf === chunk || this.buf.buffer === chunk.buffer) this.buf = Buffer.from(this.buf);
          break;
        }
        continue;
      }
      out.push(Buffer.from(this.buf.subarray(0, end)));
      this.buf = this.buf.subarray(end);
    }
    return out;
  }
}

const SOI = Buffer.from([0xff, 0xd8]);

/** The byte after the EOI of the picture starting at 0, undefined when incomplete, 'bad' when not a JPEG. */
export function jpegEnd(b: Buffer): number | 'bad' | undefined {
  let p = 2;
  for (;;) {
    if (p + 1 >= b.length) return undefined;
    if (b[p] !== 0xff) return 'bad';
    const m = b[p + 1]!;
    if (m === 0xff) {
      p++; // fill byte
      continue;
    }
    if (m === 0xd9) return p + 2;
    if (m === 0xd8 || m === 0x00) return 'bad';
    if (m >= 0xd0 && m <= 0xd7) {
      p += 2;
      continue;
    }
    if (p + 3 >= b.length) return undefined;
    const len = b.readUInt16BE(p + 2);
    if (len < 2) return 'bad';
    p += 2 + len;
    if (m !== 0xda) continue;
    // Entropy-coded data: up to the first marker that is not stuffing (FF00) or a restart (FFD0-FFD7).
    for (;;) {
      const ff = b.indexOf(0xff, p);
      if (ff < 0 || ff + 1 >= b.length) return undefined;
      const n = b[ff + 1]!;
      if (n === 0x00 || (n >= 0xd0 && n <= 0xd7)) {
        p = ff + 2;
        continue;
      }
      p = ff;
      break;
    }
  }
}
