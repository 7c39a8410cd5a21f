/**
 * The control socket of a test run: how the `farmhand` Python module in the
 * test process asks the daemon to press keys and hand over frames.
 *
 * One Unix socket per run, in a private folder (mode 0700) that is removed
 * when the run ends; its path goes to the child as FARMHAND_CONTROL_SOCKET.
 * Protocol: newline-delimited JSON requests, one answer per request, in
 * order, on the same connection:
 *
 *   {"id":1,"op":"press","key":"KEY_OK","hold_ms":0}  -> {"id":1,"ok":true}
 *   {"id":2,"op":"get_frame"}  -> {"id":2,"ok":true,"width":1280,"height":720,
 *                                  "format":"rgb24","bytes":N,"seq":..,"at":..}
 *                                 followed by exactly N raw bytes
 *   {"id":3,"op":"log","text":"match images/ok.png: ..."}  -> {"id":3,"ok":true}
 *                                 a line for the run's log (matches, from Python)
 *   failures                   -> {"id":..,"ok":false,"error":"<code>","message":"..."}
 *
 * A connection is read only while no request of it is being answered, and an
 * answer waits for the client to drain the previous one, so a client that
 * pipelines garbage or stops reading only stalls itself. Nothing a client
 * sends can throw out of here.
 */
import { chmod, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FarmError, isFarmError } from '../core/errors.js';
import type { InfrastructureFault } from '../core/infrastructure.js';
import type { Logger, RunControl, RunControlChannel } from '../core/ports.js';
import type { PressOptions } from '../hardware/ir/keys.js';

/** The environment variable that names the socket in the test process. */
export const CONTROL_SOCKET_ENV = 'FARMHAND_CONTROL_SOCKET';
/** Longest request line; longer ones end the connection (there is no way to find the next request). */
export const MAX_REQUEST_BYTES = 64 * 1024;
/** Connections one run may hold at once (a test and the programs it starts). */
const MAX_CONNECTIONS = 16;
/** sockaddr_un.sun_path holds 108 bytes with the final NUL. */
const MAX_SOCKET_PATH = 107;

/** A raw frame: rgb24, `width * height * 3` bytes, row by row (capture's RawFrame fits). */
export interface ControlFrame {
  data: Buffer;
  width: number;
  height: number;
  /** Counts frames; lets a client see that a frame is the one it already has. */
  seq?: number;
  /** When the frame was captured, ms since the epoch. */
  at?: number;
}

export interface ControlServerOptions {
  /** Presses keys (the daemon passes its KeyPresser); `transportUri` names the IR transport in the run log. */
  keys: { press(key: string, opts: PressOptions): Promise<void>; readonly transportUri?: string };
  /** A frame the caller may keep, or undefined when capture is offline (FfmpegFrameSource.latestFrame). */
  latestFrame: () => ControlFrame | undefined;
  logger?: Logger;
  /** Where the per-run socket folders go; default os.tmpdir(). */
  tmpDir?: string;
  /** The name of each run's folder there, before mkdtemp's 6 characters; default `farmhand-ctl-` (the daemon adds its data directory's tag: storage/sweep.ts). */
  tmpPrefix?: string;
}

interface RunInfo {
  resultDir: string;
  testPackSha: string;
  remote: string | null;
}

type Answer = { header: Record<string, unknown>; body?: Buffer };

export class ControlServer implements RunControl {
  private readonly channels = new Set<ControlChannel>();

  constructor(private readonly o: ControlServerOptions) {}

  /** Listen on a new socket for one run; `close()` the channel when the run ends. */
  async open(run: RunInfo): Promise<RunControlChannel> {
    const dir = await mkdtemp(path.join(this.o.tmpDir ?? tmpdir(), this.o.tmpPrefix ?? 'farmhand-ctl-'));
    const socketPath = path.join(dir, 'control.sock');
    const channel = new ControlChannel(this.o, run, dir, socketPath, () => this.channels.delete(channel));
    try {
      if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) throw new Error(`control socket path too long: ${socketPath}`);
      await channel.listen();
    } catch (e) {
      await channel.close();
      throw e;
    }
    this.channels.add(channel);
    return channel;
  }

  /** Close every open channel (daemon shutdown). */
  async close(): Promise<void> {
    await Promise.all([...this.channels].map((c) => c.close()));
  }
}

class ControlChannel implements RunControlChannel {
  readonly env: Record<string, string>;
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly abort = new AbortController();
  private readonly log: Logger | undefined;
  private closing: Promise<void> | undefined;
  private listener: ((text: string) => void) | undefined;
  private readonly seen: InfrastructureFault[] = [];

  constructor(
    private readonly o: ControlServerOptions,
    private readonly run: RunInfo,
    private readonly dir: string,
    private readonly socketPath: string,
    private readonly onClosed: () => void,
  ) {
    this.env = { [CONTROL_SOCKET_ENV]: socketPath };
    this.log = o.logger?.child({ module: 'control', run: run.resultDir });
    this.server = createServer((s) => this.accept(s));
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.socketPath, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.server.on('error', (err) => this.log?.error({ err }, 'control socket error'));
    await chmod(this.socketPath, 0o600);
  }

  onEvent(listener: ((text: string) => void) | undefined): void {
    this.listener = listener;
  }

  faults(): InfrastructureFault[] {
    return [...this.seen];
  }

  /** A line for the run's log; a listener's failure is not the test's problem. */
  private event(text: string): void {
    try {
      this.listener?.(text);
    } catch (err) {
      this.log?.warn({ err }, 'run log listener failed');
    }
  }

  /** Stop listening, cut every connection, end pending presses, remove the folder. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.abort.abort(new FarmError('device_unavailable', 'the test run has ended'));
      for (const s of this.sockets) s.destroy();
      await new Promise<void>((resolve) => this.server.close(() => resolve()));
      await rm(this.dir, { recursive: true, force: true });
      this.onClosed();
    })();
    return this.closing;
  }

  private accept(socket: Socket): void {
    if (this.closing || this.sockets.size >= MAX_CONNECTIONS) {
      socket.destroy();
      return;
    }
    this.sockets.add(socket);
    socket.on('error', (err) => this.log?.debug({ err }, 'control connection error'));
    socket.once('close', () => this.sockets.delete(socket));
    void this.serve(socket).catch((err: unknown) => {
      this.log?.warn({ err }, 'control connection ended with an error');
      socket.destroy();
    });
  }

  /** Read requests line by line and answer each before reading on. */
  private async serve(socket: Socket): Promise<void> {
    try {
      await this.readRequests(socket);
    } catch (err) {
      // A client that resets the connection, or the run's end cutting it, is not the daemon's problem.
      if (!socket.destroyed) throw err;
    }
  }

  private async readRequests(socket: Socket): Promise<void> {
    let pending: Buffer = Buffer.alloc(0);
    for await (const chunk of socket as AsyncIterable<Buffer>) {
      pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
      let nl: number;
      while ((nl = pending.indexOf(0x0a)) >= 0) {
        const line = pending.subarray(0, nl);
        pending = pending.subarray(nl + 1);
        if (line.length > MAX_REQUEST_BYTES) return this.tooLong(socket);
        if (line.toString('latin1').trim() === '') continue;
        if (!(await write(socket, await this.answer(line)))) return;
      }
      if (pending.length > MAX_REQUEST_BYTES) return this.tooLong(socket);
    }
  }

  private async tooLong(socket: Socket): Promise<void> {
    const a = failure(null, new FarmError('invalid_request', `request longer than ${MAX_REQUEST_BYTES} bytes; closing the connection`));
    await write(socket, a);
    socket.end();
  }

  private async answer(line: Buffer): Promise<Answer> {
    let req: unknown;
    try {
      req = JSON.parse(line.toString('utf8'));
    } catch {
      return failure(null, new FarmError('invalid_request', 'request is not valid JSON'));
    }
    if (typeof req !== 'object' || req === null || Array.isArray(req)) {
      return failure(null, new FarmError('invalid_request', 'request must be a JSON object with "op"'));
    }
    const r = req as Record<string, unknown>;
    const id = typeof r.id === 'number' || typeof r.id === 'string' ? r.id : null;
    try {
      if (r.op === 'press') return await this.press(id, r);
      if (r.op === 'get_frame') return this.frame(id);
      if (r.op === 'log') return this.logLine(id, r);
      throw new FarmError('invalid_request', `unknown op ${JSON.stringify(r.op)}; use "press", "get_frame" or "log"`);
    } catch (e) {
      if (!isFarmError(e)) this.log?.error({ err: e }, 'control request failed');
      return failure(id, e);
    }
  }

  private async press(id: number | string | null, r: Record<string, unknown>): Promise<Answer> {
    if (typeof r.key !== 'string') throw new FarmError('invalid_request', 'press needs "key": a key name such as "KEY_OK"');
    const hold = r.hold_ms ?? 0;
    if (typeof hold !== 'number') throw new FarmError('invalid_request', '"hold_ms" must be a number of milliseconds');
    if (this.run.remote === null) {
      throw new FarmError('invalid_request', 'this run has no remote control: the test pack has no config/remote-control/*.lircd.conf');
    }
    // Logged as it starts, so the line's time is when the IR goes out (to read the video against the log).
    const what = `press ${r.key}${hold > 0 ? ` (hold ${hold} ms)` : ''} remote=${this.run.remote} transport=${this.o.keys.transportUri ?? 'unknown'}`;
    this.event(what);
    try {
      await this.o.keys.press(r.key, { remote: this.run.remote, testPackSha: this.run.testPackSha, holdMs: hold, signal: this.abort.signal });
    } catch (e) {
      this.event(`${what}: failed: ${isFarmError(e) ? `${e.code}: ${e.message}` : 'internal error'}`);
      // The transport could not send (blaster unplugged or silent): the node's fault, unless the run is ending anyway.
      if (isFarmError(e) && e.code === 'device_unavailable' && !this.abort.signal.aborted) {
        this.seen.push({ kind: 'ir_transport', detail: `IR transport failed during a key press (${r.key}): ${e.message}` });
      }
      throw e;
    }
    return { header: { id, ok: true } };
  }

  private logLine(id: number | string | null, r: Record<string, unknown>): Answer {
    if (typeof r.text !== 'string') throw new FarmError('invalid_request', 'log needs "text": the line to write');
    this.event(r.text);
    return { header: { id, ok: true } };
  }

  private frame(id: number | string | null): Answer {
    const f = this.o.latestFrame();
    if (!f) throw new FarmError('device_unavailable', 'capture is offline: no frame to give');
    const bytes = f.width * f.height * 3;
    if (f.data.length !== bytes) throw new Error(`frame of ${f.width}x${f.height} has ${f.data.length} bytes, not ${bytes}`);
    const extra = { ...(f.seq !== undefined && { seq: f.seq }), ...(f.at !== undefined && { at: f.at }) };
    return { header: { id, ok: true, width: f.width, height: f.height, format: 'rgb24', bytes, ...extra }, body: f.data };
  }
}

function failure(id: number | string | null, e: unknown): Answer {
  const known = isFarmError(e);
  return { header: { id, ok: false, error: known ? e.code : 'internal', message: known ? e.message : 'internal error in the daemon' } };
}

/** Write an answer; resolves once the socket can take more, false when the client has gone. */
async function write(socket: Socket, a: Answer): Promise<boolean> {
  if (socket.destroyed || !socket.writable) return false;
  const headerTaken = socket.write(`${JSON.stringify(a.header)}\n`);
  if (a.body ? socket.write(a.body) : headerTaken) return true;
  return new Promise<boolean>((resolve) => {
    const done = (ok: boolean) => () => {
      socket.off('drain', onDrain);
      socket.off('close', onClose);
      resolve(ok);
    };
    const onDrain = done(true);
    const onClose = done(false);
    socket.once('drain', onDrain);
    socket.once('close', onClose);
  });
}
