/**
 * One ffmpeg process: spawned in its own process group, stdout handed to a
 * callback, stderr logged line by line at debug level with the last lines
 * kept (they explain an exit), ended with TERM and then KILL. Supervision
 * (restarts, stall detection) is the frame source's job, not this one's.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import type { Logger } from '../../core/ports.js';

/** How the process ended; `error` is set when it could not be started at all. */
export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
  error?: NodeJS.ErrnoException;
}

const TAIL_LINES = 20;
const MAX_LINE = 2000;

export interface SpawnOptions {
  binary: string;
  args: string[];
  /** Give the child a stdin pipe (raw frames for `virtual:`); otherwise stdin is /dev/null. */
  stdinPipe: boolean;
  logger: Logger;
  onStdout: (chunk: Buffer) => void;
  /** When set, the child gets a pipe on fd 3 (the recording's segment list) and its bytes go here. */
  onFd3?: (chunk: Buffer) => void;
  /** When set, the child gets a pipe on fd 4 (the live view's frames) and its bytes go here. */
  onFd4?: (chunk: Buffer) => void;
  /** Applied to every stderr line before it is logged or kept (ffmpeg writes its input URL, credentials and all). */
  redact?: (line: string) => string;
}

export class FfmpegChild {
  /** Settles once the process is gone and its pipes are closed. */
  readonly closed: Promise<ChildExit>;
  private readonly proc: ChildProcess;
  private readonly tail: string[] = [];
  private partial = '';
  private spawnError: NodeJS.ErrnoException | undefined;
  private exited = false;

  constructor(private readonly o: SpawnOptions) {
    // Own process group: a Ctrl-C meant for the daemon does not reach ffmpeg
    // behind the supervisor's back, and stop() can signal the whole group.
    this.proc = spawn(o.binary, o.args, {
      detached: true,
      stdio: [o.stdinPipe ? 'pipe' : 'ignore', 'pipe', 'pipe', o.onFd3 ? 'pipe' : 'ignore', ...(o.onFd4 ? ['pipe' as const] : [])],
    });
    this.proc.stdout!.on('data', o.onStdout);
    if (o.onFd3) (this.proc.stdio[3] as Readable | null)?.on('data', o.onFd3);
    if (o.onFd4) (this.proc.stdio[4] as Readable | null)?.on('data', o.onFd4);
    this.proc.stderr!.setEncoding('utf8').on('data', (s: string) => this.onStderr(s));
    // A child that dies while frames are written to it raises EPIPE here; its exit is handled below.
    this.proc.stdin?.on('error', (e) => o.logger.debug({ err: e.message }, 'ffmpeg stdin closed'));
    this.proc.on('error', (e: NodeJS.ErrnoException) => {
      this.spawnError ??= e;
    });
    this.closed = new Promise((resolve) => {
      this.proc.on('close', (code, signal) => {
        this.exited = true;
        if (this.partial !== '') this.keepLine(this.partial);
        resolve({ code, signal, ...(this.spawnError && { error: this.spawnError }) });
      });
    });
  }

  /** Process id; undefined when the spawn failed. */
  get pid(): number | undefined {
    return this.proc.pid;
  }

  /** The pipe into ffmpeg's stdin when `stdinPipe` was asked for. */
  get stdin(): Writable | null {
    return this.proc.stdin;
  }

  /** The last non-empty line ffmpeg wrote to stderr. */
  lastStderrLine(): string | undefined {
    return this.tail.at(-1);
  }

  /** The last (up to 20) non-empty stderr lines, oldest first. */
  stderrTail(): readonly string[] {
    return [...this.tail];
  }

  /** End the process: TERM to its group, KILL after `graceMs`; resolves when it is gone. */
  async terminate(graceMs: number): Promise<ChildExit> {
    if (!this.exited) {
      this.signal('SIGTERM');
      const timer = setTimeout(() => this.signal('SIGKILL'), graceMs);
      try {
        return await this.closed;
      } finally {
        clearTimeout(timer);
      }
    }
    return this.closed;
  }

  private signal(sig: NodeJS.Signals): void {
    const pid = this.proc.pid;
    if (pid === undefined || this.exited) return;
    try {
      process.kill(-pid, sig);
      // A stopped process acts on TERM only once continued (as a shell's kill does for stopped jobs).
      if (sig === 'SIGTERM') process.kill(-pid, 'SIGCONT');
    } catch {
      // ESRCH: it is already gone; 'close' follows.
    }
  }

  private onStderr(s: string): void {
    const lines = (this.partial + s).split(/\r?\n|\r/);
    this.partial = (lines.pop() ?? '').slice(-MAX_LINE);
    for (const line of lines) this.keepLine(line);
  }

  private keepLine(line: string): void {
    const text = (this.o.redact ?? ((l: string) => l))(line.trim());
    if (text === '') return;
    this.o.logger.debug({ stderr: text }, 'ffmpeg');
    this.tail.push(text.slice(0, MAX_LINE));
    if (this.tail.length > TAIL_LINES) this.tail.shift();
  }
}

/** A one-line reason for a child's end, for the health report. */
export function describeExit(binary: string, exit: ChildExit, lastLine: string | undefined): string {
  if (exit.error?.code === 'ENOENT') return `ffmpeg not found: ${binary}`;
  if (exit.error) return `cannot run ffmpeg (${binary}): ${exit.error.message}`;
  const how = exit.signal !== null ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
  return lastLine === undefined ? `ffmpeg ${how}` : `ffmpeg ${how}: ${lastLine}`;
}
