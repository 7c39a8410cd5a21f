/**
 * The log files of one test run. The child's output is kept as bytes end to
 * end (never decoded, so output that is not UTF-8 cannot break anything):
 * `stdout.log` and `stderr.log` get the raw bytes, `combined.log` both
 * streams as timestamped lines, and `farmhand.log` those lines plus the
 * tool's own. A line is `<ISO 8601 time with microseconds, +00:00> <text>`.
 */
import { createWriteStream, type WriteStream } from 'node:fs';
import path from 'node:path';

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

export class RunLogs {
  private readonly files: Record<'stdout' | 'stderr' | 'combined' | 'tool', WriteStream>;
  private readonly partial: Record<StreamName, Partial> = { stdout: newPartial(), stderr: newPartial() };
  private used = 0;
  private dropped = 0;
  private error: Error | undefined;
  private ended = false;

  /**
   * @param dir the result folder
   * @param maxOutputBytes cap on stdout+stderr together; the rest is counted and dropped
   * @param toolLog file name of the tool's log (`farmhand.log`)
   */
  constructor(
    dir: string,
    private readonly maxOutputBytes: number,
    readonly clock = new RunClock(),
    toolLog = 'farmhand.log',
  ) {
    const open = (name: string) => {
      const s = createWriteStream(path.join(dir, name), { flags: 'w' });
      s.on('error', (e) => (this.error ??= e)); // reported by close(); the run goes on
      return s;
    };
    this.files = { stdout: open('stdout.log'), stderr: open('stderr.log'), combined: open('combined.log'), tool: open(toolLog) };
  }

  /** Bytes of output dropped past the cap. */
  get droppedBytes(): number {
    return this.dropped;
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
    const stamp = this.clock.stamp();
    const room = this.maxOutputBytes - this.used;
    if (room <= 0) {
      this.dropped += chunk.length;
      return;
    }
    const kept = chunk.length > room ? chunk.subarray(0, room) : chunk;
    this.used += kept.length;
    this.files[stream].write(kept);
    this.splitLines(stream, kept, stamp);
    if (kept.length < chunk.length) {
      this.dropped += chunk.length - kept.length;
      this.flushPartial(stream);
      const note = `farmhand: output exceeded ${this.maxOutputBytes} bytes; the rest of the test's output is dropped`;
      this.files[stream].write(`\n${note}\n`);
      this.line('combined', stamp, Buffer.from(note));
      this.line('tool', stamp, Buffer.from(note));
    }
  }

  /** One of the tool's own lines, to `farmhand.log` only. */
  tool(text: string): void {
    this.line('tool', this.clock.stamp(), Buffer.from(text));
  }

  /** The child's output has ended: write out unfinished last lines, and say how much was dropped. */
  endOfOutput(): void {
    if (this.ended) return;
    this.ended = true;
    this.flushPartial('stdout');
    this.flushPartial('stderr');
    if (this.dropped > 0) this.tool(`${this.dropped} bytes of output were dropped (over the ${this.maxOutputBytes}-byte cap)`);
  }

  /** End the output (if not done yet) and close every file. Rejects if a file could not be written. */
  async close(): Promise<void> {
    this.endOfOutput();
    await Promise.all(Object.values(this.files).map((f) => new Promise<void>((resolve) => (f.closed ? resolve() : f.end(resolve)))));
    if (this.error) throw this.error;
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
    this.files[file].write(Buffer.concat([Buffer.from(`${stamp} `), text, NL]));
  }
}

function waitForDrain(f: WriteStream): Promise<void> | undefined {
  if (!f.writableNeedDrain || f.destroyed) return undefined;
  return new Promise<void>((resolve) => {
    const done = () => {
      f.off('drain', done).off('close', done);
      resolve();
    };
    f.on('drain', done).on('close', done);
  });
}
