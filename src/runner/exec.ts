/**
 * Running short-lived helper commands (git) without a shell: arguments go to
 * the program as an array, so nothing a client sends is ever parsed by a
 * shell. Output is collected as bytes; a timeout ends the command's whole
 * process group (git starts ssh and remote helpers of its own).
 */
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { terminateGroup } from './processGroup.js';

export interface ExecOptions {
  cwd?: string;
  env?: NodeJS.ProcessEnv;
  /** Written to the command's stdin, which is then closed. */
  input?: string | Buffer;
  /** End the command after this long; the result then has `timedOut: true`. */
  timeoutMs?: number;
  /** Stop collecting stdout past this many bytes (the command still runs to the end). */
  maxStdoutBytes?: number;
}

export interface ExecResult {
  /** Exit status; signals as 128+N; null when the command could not start. */
  code: number | null;
  stdout: Buffer;
  stderr: string;
  timedOut: boolean;
  /** Set when the program could not be started (ENOENT, EACCES ...). */
  spawnError?: Error;
}

/** Exit status as a shell reports it: the code, or 128+N for signal N. */
export function exitStatusOf(code: number | null, signal: NodeJS.Signals | null): number | null {
  if (code !== null) return code;
  if (signal) return 128 + (signalNumber(signal) ?? 0);
  return null;
}

function signalNumber(signal: NodeJS.Signals): number | undefined {
  return (constants.signals as Record<string, number | undefined>)[signal];
}

/** Run a command to completion. Never rejects for the command's own failure. */
export function execCommand(cmd: string, args: readonly string[], opts: ExecOptions = {}): Promise<ExecResult> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env ?? process.env,
      detached: true,
      stdio: [opts.input === undefined ? 'ignore' : 'pipe', 'pipe', 'pipe'],
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outBytes = 0;
    let timedOut = false;
    let exited = false;
    const max = opts.maxStdoutBytes ?? Infinity;
    child.stdout?.on('data', (b: Buffer) => {
      if (outBytes < max) out.push(b.length + outBytes > max ? b.subarray(0, max - outBytes) : b);
      outBytes += b.length;
    });
    child.stderr?.on('data', (b: Buffer) => err.push(b));
    const timer =
      opts.timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            if (child.pid) void terminateGroup(child.pid, { graceMs: 1000, leaderExited: () => exited });
          }, opts.timeoutMs);
    child.on('exit', () => (exited = true));
    child.on('error', (e) => {
      clearTimeout(timer);
      resolve({ code: null, stdout: Buffer.alloc(0), stderr: '', timedOut: false, spawnError: e });
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: exitStatusOf(code, signal), stdout: Buffer.concat(out), stderr: Buffer.concat(err).toString('utf8'), timedOut });
    });
    if (opts.input !== undefined && child.stdin) {
      // EPIPE when the command exits without reading all of its input: its exit status tells the story.
      child.stdin.on('error', () => undefined);
      child.stdin.end(opts.input);
    }
  });
}
