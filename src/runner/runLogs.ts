/**
 * The log files of one test run. The child's output is kept as bytes end to
 * end (never decoded, so output that is not UTF-8 cannot break anything):
 * `stdout.log` and `stderr.log` get the raw bytes, `combined.log` both
 * streams as timestamped lines, and `farmhand.log` those lines plus the
 * tool's own and the test's actions (key presses, matches). A line is
 * `<ISO 8601 time with microseconds, +00:00> <text>`.
 *
 * The output cap is on what reaches the disk: every byte the test causes in
 * any of the four files (its output written three times over, with the
 * stamps, and its action lines) counts against it. Past the cap the rest is
 * dropped and a note says so; only farmhand's own few lines are written after.
 */
import { closeSync, createWriteStream } from 'node:fs';
import path from 'node:path';
import { Writable } from 'node:stream';
import { openForWriteSync, restoreName } from '../storage/safeFile.js';

/** Wall-clock time with microseconds: anchored to Date.now() once, advanced by the monotonic clock. */
export class RunClock {
  private readonly wallMicros = BigInt(Date.now()) * 1000n;
  private readonly mono = process.hrtime.bigint();

  /** Microseconds since the epoch. */
  nowMicros(): bigint {
    return this.wallMicros + (process.hrtime.bigint() - this.mono) / 1000n;
  }

  /** `2026-11-23T09:19:15.123456+00:00` */
  stamp(micros = this.nowMicros()): string {
    return formatMicros(micros);
  }
}

export function formatMicros(micros: bigint): string {
  const ms = Number(micros / 1000n);
  const frac = (micros % 1_000_000n).toString().padStart(6, '0');
  return `${new Date(ms).toISOString().slice(0, 19)}.${frac}+00:00`;
}

export type StreamName = 'stdout' | 'stderr';

/** Lines longer than this are cut into pieces in the timestamped logs. */
export const MAX_LINE_BYTES = 64 * 1024;

const NL = Buffer.from('\n');

/** The unfinished line of a stream; `cut` when its start was already written for being too long. */
interface Partial {
  chunks: Buffer[];
  bytes: number;
  stamp: string;
  cut: boolean;
}
const newPartial = (): Partial => ({ chunks: [], bytes: 0, stamp: '', cut: false });

/** Bytes a timestamped line adds to its text: the stamp, a space and the newline. */
const LINE_OVERHEAD = formatMicros(0n).length + 2;
/** A test action line (key press, match) longer than this is cut. */
export const MAX_EVENT_BYTES = 4096;

type FileName = 'stdout' | 'stderr' | 'combined' | 'tool';

export class RunLogs {
  private readonly files: Record<FileName, Writable>;
  private readonly partial: Record<StreamName, Partial> = { stdout: newPartial(), stderr: newPartial() };
  /** Bytes written to the four files together. */
  private written = 0;
  /** Bytes the test may still cause on disk; farmhand's own lines do not draw from it. */
  private room: number;
  private capped = false;
  /** Whether a stream has an unfinished line whose stamp was already counted. */
  private readonly lineOpen: Record<StreamName, boolean> = { stdout: false, stderr: false };
  private dropped = 0;
  private error: Error | undefined;
  private ended = false;
  /** The descriptors behind the files, closed by close() after the names are checked. */
  private readonly opened: Array<{ fd: number; file: string }> = [];

  /**
   * @param dir the result folder
   * @param maxOutputBytes cap on what the test's output and actions put on disk, all log files together
   * @param toolLog file name of the tool's log (`farmhand.log`)
   */
  constructor(
    dir: string,
    private readonly maxOutputBytes: number,
    readonly clock = new RunClock(),
    toolLog = 'farmhand.log',
  ) {
    this.room = maxOutputBytes;
    const open = (name: string): Writable => {
      let s: Writable;
      try {
        // Never through a FIFO or symlink that took the name: a blocking open would tie up a libuv thread.
        const file = path.join(dir, name);
        const fd = openForWriteSync(file);
        this.opened.push({ fd, file });
        s = createWriteStream(file, { fd, autoClose: false });
      } catch (e) {
        this.error ??= e as Error; // reported by close(); the run goes on
        s = new Writable({ write: (_chunk, _enc, cb) => cb() });
      }
      s.on('error', (e) => (this.error ??= e)); // reported by close(); the run goes on
      return s;
    };
    this.files = { stdout: open('stdout.log'), stderr: open('stderr.log'), combined: open('combined.log'), tool: open(toolLog) };
  }

  /** Bytes of output dropped past the cap. */
  get droppedBytes(): number {
    return this.dropped;
  }

  /** Bytes written to the log files so far (all of them). */
  get bytesWritten(): number {
    return this.written;
  }

  /** False while a file has more buffered than it wants; see `drained()`. */
  get writable(): boolean {
    return Object.values(this.files).every((f) => !f.writableNeedDrain);
  }

  /** Resolves once every file has flushed its buffer (or was closed by an error). */
  async drained(): Promise<void> {
    await Promise.all(Object.values(this.files).map((f) => waitForDrain(f) ?? Promise.resolve()));
  }

  /** A chunk of the child's output, as it arrived. */
  output(stream: StreamName, chunk: Buffer): void {
    if (this.ended) return;
    if (this.capped) {
      this.dropped += chunk.length;
      return;
    }
    const stamp = this.clock.stamp();
    const kept = this.fit(stream, chunk);
    const cost = costOf(kept, this.lineOpen[stream]);
    this.room -= cost.bytes;
    this.lineOpen[stream] = cost.open;
    this.put(stream, kept);
    this.splitLines(stream, kept, stamp);
    if (kept.length < chunk.length) {
      this.dropped += chunk.length - kept.length;
      this.flushPartial('stdout');
      this.flushPartial('stderr');
      this.hitCap(stamp);
    }
  }

  /** One of the tool's own lines, to `farmhand.log` only. */
  tool(text: string): void {
    this.line('tool', this.clock.stamp(), Buffer.from(text));
  }

  /**
   * A line about something the test did (a key press, a match), to
   * `farmhand.log`; it counts against the cap like the test's output.
   */
  event(text: string): void {
    if (this.ended) return;
    let buf = Buffer.from(text.replace(/[\r\n]+/g, ' '));
    if (buf.length > MAX_EVENT_BYTES) buf = buf.subarray(0, MAX_EVENT_BYTES);
    if (this.capped) {
      this.dropped += buf.length;
      return;
    }
    const stamp = this.clock.stamp();
    if (buf.length + LINE_OVERHEAD > this.room) {
      this.dropped += buf.length;
      this.hitCap(stamp);
      return;
    }
    this.room -= buf.length + LINE_OVERHEAD;
    this.line('tool', stamp, buf);
  }

  /** The child's output has ended: write out unfinished last lines, and say how much was dropped. */
  endOfOutput(): void {
    if (this.ended) return;
    this.ended = true;
    this.flushPartial('stdout');
    this.flushPartial('stderr');
    if (this.dropped > 0) this.tool(`${this.dropped} bytes of output were dropped (over the ${this.maxOutputBytes}-byte cap on the run's logs)`);
  }

  /**
   * End the output (if not done yet) and close every file; a log whose name
   * the test took over (deleted, or a FIFO put there) is written back under
   * it. Rejects if a file could not be written.
   */
  async close(): Promise<void> {
    this.endOfOutput();
    await Promise.all(Object.values(this.files).map((f) => new Promise<void>((resolve) => (f.writableFinished || f.destroyed ? resolve() : f.end(resolve)))));
    for (const { fd, file } of this.opened.splice(0)) {
      await restoreName(fd, file).catch((e: unknown) => (this.error ??= e as Error));
      closeSync(fd);
    }
    if (this.error) throw this.error;
  }

  /** The longest start of a chunk whose bytes on disk (see `costOf`) fit in the room left. */
  private fit(stream: StreamName, chunk: Buffer): Buffer {
    const open = this.lineOpen[stream];
    if (costOf(chunk, open).bytes <= this.room) return chunk;
    let lo = 0; // fits
    let hi = chunk.length; // does not fit
    while (hi - lo > 1) {
      const mid = (lo + hi) >>> 1;
      if (costOf(chunk.subarray(0, mid), open).bytes <= this.room) lo = mid;
      else hi = mid;
    }
    return chunk.subarray(0, lo);
  }

  private hitCap(stamp: string): void {
    this.capped = true;
    const note = `farmhand: the test's output and actions reached the ${this.maxOutputBytes}-byte cap on the run's logs; the rest is dropped`;
    for (const s of ['stdout', 'stderr'] as const) this.put(s, Buffer.from(`\n${note}\n`));
    this.line('combined', stamp, Buffer.from(note));
    this.line('tool', stamp, Buffer.from(note));
  }

  private splitLines(stream: StreamName, chunk: Buffer, stamp: string): void {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      const end = nl < 0 ? chunk.length : nl;
      this.append(stream, chunk.subarray(start, end), stamp);
      if (nl < 0) return;
      const p = this.partial[stream];
      if (p.bytes === 0) p.stamp = stamp;
      this.flushPartial(stream, !p.cut);
      p.cut = false;
      start = nl + 1;
    }
  }

  /** Add text (no newline in it) to a stream's unfinished line, writing out pieces of MAX_LINE_BYTES. */
  private append(stream: StreamName, text: Buffer, stamp: string): void {
    const p = this.partial[stream];
    let rest = text;
    while (rest.length > 0) {
      if (p.bytes === 0) p.stamp = stamp; // a line is stamped with the arrival of its first byte
      const take = Math.min(rest.length, MAX_LINE_BYTES - p.bytes);
      p.chunks.push(rest.subarray(0, take));
      p.bytes += take;
      rest = rest.subarray(take);
      if (p.bytes === MAX_LINE_BYTES) {
        this.flushPartial(stream);
        p.cut = true;
      }
    }
  }

  /** Emit the buffered line of a stream; `empty` also emits a line with no text (a bare newline). */
  private flushPartial(stream: StreamName, empty = false): void {
    const p = this.partial[stream];
    if (p.bytes === 0 && !empty) return;
    const text = Buffer.concat(p.chunks, p.bytes);
    this.line('combined', p.stamp, text);
    this.line('tool', p.stamp, text);
    p.chunks = [];
    p.bytes = 0;
  }

  private line(file: 'combined' | 'tool', stamp: string, text: Buffer): void {
    this.put(file, Buffer.concat([Buffer.from(`${stamp} `), text, NL]));
  }

  private put(file: FileName, data: Buffer): void {
    if (data.length === 0) return;
    this.written += data.length;
    this.files[file].write(data);
  }
}

/**
 * An upper bound of the bytes a chunk of output puts on disk: itself in its
 * stream's file, and in combined.log and farmhand.log with a stamp for each
 * line it starts (a line's stamp is counted with its first byte, or its bare
 * newline) and each MAX_LINE_BYTES piece. `open`: the stream's unfinished
 * line was already counted; the result says the same after the chunk.
 */
function costOf(chunk: Buffer, open: boolean): { bytes: number; open: boolean } {
  let lines = Math.floor(chunk.length / MAX_LINE_BYTES);
  let start = 0;
  for (;;) {
    const nl = chunk.indexOf(0x0a, start);
    const end = nl < 0 ? chunk.length : nl;
    if (end > start && !open) {
      lines++;
      open = true;
    }
    if (nl < 0) break;
    if (!open) lines++; // a bare newline: an empty line
    open = false;
    start = nl + 1;
  }
  return { bytes: 3 * chunk.length + 2 * LINE_OVERHEAD * lines, open };
}

function waitForDrain(f: Writable): Promise<void> | undefined {
  if (!f.writableNeedDrain || f.destroyed) return undefined;
  return new Promise<void>((resolve) => {
    const done = () => {
      f.off('drain', done).off('close', done);
      resolve();
    };
    f.on('drain', done).on('close', done);
  });
}
