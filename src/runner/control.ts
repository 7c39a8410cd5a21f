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
 *   {"id":4,"op":"next_frame","after_seq":41,"timeout_ms":10000}
 *                              -> like get_frame, for the first frame whose seq is above
 *                                 after_seq (at once when there is one; without after_seq, the
 *                                 next frame captured), or {"id":4,"ok":true,"none":true}
 *                                 when none came within timeout_ms (at most 60000)
 *   {"id":5,"op":"press","key":"KEY_UP","hold_ms":60000,"hold_id":"h1"}, then from another
 *   connection {"id":1,"op":"held","hold_id":"h1"} -> {"id":1,"ok":true,"down":true} once the
 *   key is down (down false: the hold ended first, or did not start within timeout_ms), and
 *   {"id":2,"op":"release","hold_id":"h1"} -> the hold ends early and both answer ok
 *   {"id":6,"op":"power"}  -> {"id":6,"ok":true,"on":true}  the node's outlet (power.uri), stbt.PDU
 *   {"id":7,"op":"power","on":false}  -> {"id":7,"ok":true,"on":false} once the outlet reads off;
 *                                 "outlet":"<name>" picks an outlet of power.outlets instead; no
 *                                 such outlet (or none configured) -> not_found
 *   {"id":8,"op":"power","cycle":true,"off_secs":5}  -> {"id":8,"ok":true,"on":true} once the outlet
 *                                 was switched off, left off off_secs (default: power.uri's) and is on again
 *   {"id":9,"op":"draw_text","text":"tuning","duration_secs":3}  -> {"id":9,"ok":true,"drawn":true}
 *                                 stbt.draw_text: a line `draw_text: tuning (for 3 s)` in the run's log, and
 *                                 the text on the recorded video and the live view for duration_secs (drawn
 *                                 false: this capture has no overlay, the line only); taken away when the run ends
 *   failures                   -> {"id":..,"ok":false,"error":"<code>","message":"..."}
 *
 * A connection is read only while no request of it is being answered, and an
 * answer waits for the client to drain the previous one, so a client that
 * pipelines garbage or stops reading only stalls itself. Nothing a client
 * sends can throw out of here.
 */
import { chmod, chown, mkdtemp, rm } from 'node:fs/promises';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { FarmError, isFarmError } from '../core/errors.js';
import type { InfrastructureFault } from '../core/infrastructure.js';
import type { Logger, RunControl, RunControlChannel } from '../core/ports.js';
import type { PressOptions } from '../hardware/ir/keys.js';
import type { PowerOutlet } from '../hardware/power/index.js';

/** The environment variable that names the socket in the test process. */
export const CONTROL_SOCKET_ENV = 'FARMHAND_CONTROL_SOCKET';
/** Longest request line; longer ones end the connection (there is no way to find the next request). */
export const MAX_REQUEST_BYTES = 64 * 1024;
/** Connections one run may hold at once (a test and the programs it starts). */
const MAX_CONNECTIONS = 16;
/** sockaddr_un.sun_path holds 108 bytes with the final NUL. */
const MAX_SOCKET_PATH = 107;
/** Frames kept for a `next_frame` reader that falls behind: 8 frames, 320 ms at 25 fps (22 MB at 720p). */
const KEPT_FRAMES = 8;
/** Frames stop being kept this long after the last `next_frame` answer. */
const KEEP_IDLE_MS = 2000;
/** Releases remembered for presses that have not arrived yet. */
const MAX_EARLY_RELEASES = 64;
/** Holds whose key-down a `held` may still ask about. */
const MAX_DOWN_WATCHES = 64;
/** Longest wait of one `held` request, by default and at most. */
const HELD_WAIT_MS = 10_000;
/** Longest wait of one `next_frame` request (the client asks again). */
const MAX_NEXT_FRAME_WAIT_MS = 60_000;
/** How often `next_frame` looks for a frame when the source cannot say when one arrives. */
const NEXT_FRAME_POLL_MS = 5;

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
  /**
   * Calls `listener` whenever new frames were captured; returns the function that stops the calls
   * (FfmpegFrameSource.onFrames). Lets `next_frame` answer as a frame arrives; without it, it polls.
   */
  onFrames?: (listener: () => void) => () => void;
  logger?: Logger;
  /** The outlet feeding the device under test (`power.uri`); absent: `power` requests are refused. */
  power?: PowerOutlet;
  /** Other outlets by name (`power.outlets`): a `power` request with `"outlet"`. */
  outlets?: ReadonlyMap<string, PowerOutlet>;
  /** Where the per-run socket folders go; default os.tmpdir(). */
  tmpDir?: string;
  /**
   * Tests run as another user (`runner.run_tests_as`): the socket's folder and
   * the socket are given to this group (the test user's), so that user can
   * connect, and no one else but the daemon.
   */
  group?: number;
  /**
   * `draw_text`'s overlay (FfmpegFrameSource.drawText / clearText): `show` resolves true once the text is on
   * the video, false when the capture has none; `clear` takes away a run's texts when it ends. Absent (`none:`):
   * draw_text only logs.
   */
  overlay?: { show(text: string, durationSecs: number, owner: unknown): Promise<boolean>; clear(owner: unknown): Promise<void> };
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
  /** Holds that a `release` may end early, by the client's `hold_id`. */
  private readonly holds = new Map<string, AbortController>();
  /** Frames kept for `next_frame` readers, oldest first (see keepFrames). */
  private kept: ControlFrame[] = [];
  private stopKeeping: (() => void) | undefined;
  private lastNextFrame = 0;
  /** Releases that came before their press (the client sends both at once from two connections). */
  private readonly releasedEarly = new Set<string>();
  /** By hold_id: settles when that hold's key is down (true) or the hold ended without it (false). */
  private readonly downs = new Map<string, { promise: Promise<boolean>; settle: (down: boolean) => void }>();

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
    if (this.o.group === undefined) {
      await chmod(this.socketPath, 0o600);
      return;
    }
    // Connecting needs search on the folder and write on the socket; listing the folder is not needed.
    await chown(this.socketPath, -1, this.o.group);
    await chmod(this.socketPath, 0o660);
    await chown(this.dir, -1, this.o.group);
    await chmod(this.dir, 0o710);
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
      this.stopKeeping?.();
      for (const s of this.sockets) s.destroy();
      // The run's texts leave the video with it (the next run's video must not show them).
      await this.o.overlay?.clear(this).catch((err: unknown) => this.log?.warn({ err }, 'draw_text: could not take the run\'s texts away'));
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
      if (r.op === 'next_frame') return await this.nextFrame(id, r);
      if (r.op === 'release') return this.release(id, r);
      if (r.op === 'held') return await this.held(id, r);
      if (r.op === 'power') return await this.power(id, r);
      if (r.op === 'draw_text') return await this.drawText(id, r);
      throw new FarmError('invalid_request', `unknown op ${JSON.stringify(r.op)}; use "press", "get_frame", "next_frame", "held", "release", "power", "draw_text" or "log"`);
    } catch (e) {
      if (!isFarmError(e)) this.log?.error({ err: e }, 'control request failed');
      return failure(id, e);
    }
  }

  private async press(id: number | string | null, r: Record<string, unknown>): Promise<Answer> {
    if (typeof r.key !== 'string') throw new FarmError('invalid_request', 'press needs "key": a key name such as "KEY_OK"');
    const holdMs = r.hold_ms ?? 0;
    if (typeof holdMs !== 'number') throw new FarmError('invalid_request', '"hold_ms" must be a number of milliseconds');
    let hold: number = holdMs;
    if (this.run.remote === null) {
      throw new FarmError('invalid_request', 'this run has no remote control: the test pack has no config/remote-control/*.lircd.conf');
    }
    // Logged as it starts, so the line's time is when the IR goes out (to read the video against the log).
    const holdId = r.hold_id;
    if (holdId !== undefined && (typeof holdId !== 'string' || holdId === '' || holdId.length > 100)) {
      throw new FarmError('invalid_request', '"hold_id" must be a string of 1 to 100 characters');
    }
    if (holdId !== undefined && this.holds.has(holdId)) throw new FarmError('invalid_request', `hold_id ${JSON.stringify(holdId)} is already held`);
    if (holdId !== undefined && this.releasedEarly.delete(holdId)) hold = 0; // released before it began: a plain press
    const held = holdId === undefined ? undefined : new AbortController();
    const signal = held ? AbortSignal.any([this.abort.signal, held.signal]) : this.abort.signal;
    if (held) this.holds.set(holdId as string, held);
    const down = holdId === undefined ? undefined : this.downOf(holdId);
    const what = `press ${r.key}${hold > 0 ? ` (hold ${holdId === undefined ? `${hold} ms` : 'until released'})` : ''} remote=${this.run.remote} transport=${this.o.keys.transportUri ?? 'unknown'}`;
    this.event(what);
    try {
      await this.o.keys.press(r.key, {
        remote: this.run.remote,
        testPackSha: this.run.testPackSha,
        holdMs: hold,
        signal,
        ...(held && { untilReleased: true }),
        ...(down && { onDown: () => down.settle(true) }),
      });
      // A transport that holds for real resolves once the key is up again.
      if (held?.signal.aborted && !this.abort.signal.aborted) {
        this.event(`release ${r.key}`);
        return { header: { id, ok: true, released: true } };
      }
    } catch (e) {
      if (held?.signal.aborted && !this.abort.signal.aborted) {
        this.event(`release ${r.key}`);
        return { header: { id, ok: true, released: true } };
      }
      this.event(`${what}: failed: ${isFarmError(e) ? `${e.code}: ${e.message}` : 'internal error'}`);
      // The transport could not send (blaster unplugged or silent): the node's fault, unless the run is ending anyway.
      if (isFarmError(e) && e.code === 'device_unavailable' && !this.abort.signal.aborted) {
        this.seen.push({ kind: 'ir_transport', detail: `IR transport failed during a key press (${r.key}): ${e.message}` });
      }
      throw e;
    } finally {
      if (holdId !== undefined) this.holds.delete(holdId);
      down?.settle(false); // no-op once the key was down
    }
    return { header: { id, ok: true } };
  }

  /** Read or switch the node's outlet (stbt.PDU); a switch is in the run's log, as a press is. */
  private async power(id: number | string | null, r: Record<string, unknown>): Promise<Answer> {
    if (r.on !== undefined && typeof r.on !== 'boolean') throw new FarmError('invalid_request', '"on" must be true or false');
    if (r.outlet !== undefined && typeof r.outlet !== 'string') throw new FarmError('invalid_request', '"outlet" must be an outlet\'s name');
    const outlet = r.outlet === undefined ? this.o.power : this.namedOutlet(r.outlet);
    if (!outlet) throw new FarmError('not_found', 'this node has no power outlet (power.uri is "none" in its configuration)');
    if (r.cycle !== undefined) return this.powerCycle(id, r, outlet);
    if (r.on === undefined) return { header: { id, ok: true, on: await outlet.get() } };
    const want = r.on;
    const on = await this.powerLogged(`power ${want ? 'on' : 'off'} outlet=${outlet.uri}`, () => outlet.set(want));
    if (on !== want) throw new FarmError('device_unavailable', `the outlet (${outlet.uri}) still reads ${on ? 'on' : 'off'}`);
    return { header: { id, ok: true, on } };
  }

  /** An outlet of `power.outlets` by name; not_found naming the ones there are. */
  private namedOutlet(name: string): PowerOutlet {
    const outlet = this.o.outlets?.get(name);
    if (outlet) return outlet;
    const names = [...(this.o.outlets?.keys() ?? [])].map((n) => JSON.stringify(n));
    throw new FarmError('not_found', `no outlet ${JSON.stringify(name)} on this node: ${names.length ? `its named outlets (power.outlets) are ${names.join(', ')}` : 'it has no named outlets (power.outlets)'}`);
  }

  /** Off, `off_secs`, on (PowerOutlet.cycle); one line in the run's log. */
  private async powerCycle(id: number | string | null, r: Record<string, unknown>, outlet: PowerOutlet): Promise<Answer> {
    if (r.cycle !== true || r.on !== undefined) throw new FarmError('invalid_request', '"cycle" must be true, without "on"');
    const offSecs = r.off_secs ?? outlet.offSecs;
    if (typeof offSecs !== 'number' || !(offSecs >= 0 && offSecs <= 600)) throw new FarmError('invalid_request', '"off_secs" must be a number of seconds from 0 to 600');
    const on = await this.powerLogged(`power cycle (off ${offSecs} s) outlet=${outlet.uri}`, () => outlet.cycle(offSecs));
    if (!on) throw new FarmError('device_unavailable', `the outlet (${outlet.uri}) still reads off after the cycle`);
    return { header: { id, ok: true, on } };
  }

  /** A switch of the outlet, logged as it starts, and its failure logged too. */
  private async powerLogged(what: string, fn: () => Promise<boolean>): Promise<boolean> {
    this.event(what);
    try {
      return await fn();
    } catch (e) {
      this.event(`${what}: failed: ${isFarmError(e) ? `${e.code}: ${e.message}` : 'internal error'}`);
      throw e;
    }
  }

  /** The key-down watch of a hold, made by its press or by a `held` that came first. */
  private downOf(holdId: string): { promise: Promise<boolean>; settle: (down: boolean) => void } {
    let d = this.downs.get(holdId);
    if (!d) {
      let settle!: (down: boolean) => void;
      const promise = new Promise<boolean>((resolve) => (settle = resolve));
      d = { promise, settle };
      // A client that never asks `held` leaves its watches behind: the oldest go first.
      if (this.downs.size >= MAX_DOWN_WATCHES) this.downs.delete(this.downs.keys().next().value!);
      this.downs.set(holdId, d);
    }
    return d;
  }

  /** Answer once the hold's key is down (`pressing()` starts its block then), or when it ended without. */
  private async held(id: number | string | null, r: Record<string, unknown>): Promise<Answer> {
    if (typeof r.hold_id !== 'string' || r.hold_id === '' || r.hold_id.length > 100) {
      throw new FarmError('invalid_request', 'held needs "hold_id": the one given to press');
    }
    const t = r.timeout_ms ?? HELD_WAIT_MS;
    if (typeof t !== 'number' || !(t >= 0)) throw new FarmError('invalid_request', '"timeout_ms" must be a number of milliseconds');
    const d = this.downOf(r.hold_id);
    let timer: NodeJS.Timeout | undefined;
    let onEnd: (() => void) | undefined;
    const down = await Promise.race([
      d.promise,
      new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), Math.min(t, HELD_WAIT_MS));
        onEnd = () => resolve(false);
        this.abort.signal.addEventListener('abort', onEnd, { once: true });
      }),
    ]).finally(() => {
      clearTimeout(timer);
      if (onEnd) this.abort.signal.removeEventListener('abort', onEnd);
    });
    this.downs.delete(r.hold_id);
    return { header: { id, ok: true, down } };
  }

  /** End a hold started with `hold_id` (pressing() in Python); releasing one that has ended is not an error. */
  private release(id: number | string | null, r: Record<string, unknown>): Answer {
    if (typeof r.hold_id !== 'string') throw new FarmError('invalid_request', 'release needs "hold_id": the one given to press');
    const held = this.holds.get(r.hold_id);
    if (held) held.abort(new FarmError('invalid_request', 'released'));
    else if (this.releasedEarly.size < MAX_EARLY_RELEASES) this.releasedEarly.add(r.hold_id);
    return { header: { id, ok: true } };
  }

  /** The first frame newer than `after_seq`, waiting up to `timeout_ms` for it. */
  private async nextFrame(id: number | string | null, r: Record<string, unknown>): Promise<Answer> {
    const after = r.after_seq;
    if (after !== undefined && (typeof after !== 'number' || !Number.isFinite(after))) throw new FarmError('invalid_request', '"after_seq" must be a number: the seq of the last frame you have');
    const t = r.timeout_ms ?? 10_000;
    if (typeof t !== 'number' || !(t >= 0)) throw new FarmError('invalid_request', '"timeout_ms" must be a number of milliseconds');
    const timeoutMs = Math.min(t, MAX_NEXT_FRAME_WAIT_MS);
    let floor = after;
    if (floor === undefined) {
      const now = this.o.latestFrame();
      if (!now) throw new FarmError('device_unavailable', 'capture is offline: no frame to give');
      floor = now.seq ?? -1;
    }
    this.keepFrames();
    const newer = (): ControlFrame | undefined => {
      // The oldest kept frame after the floor first: a client that fell behind for a moment catches up.
      const kept = this.kept.find((k) => k.seq !== undefined && k.seq > (floor));
      if (kept) return kept;
      const f = this.o.latestFrame();
      return f && (f.seq === undefined || f.seq > (floor)) ? f : undefined;
    };
    let f = newer();
    if (!f && timeoutMs > 0) {
      f = await new Promise<ControlFrame | undefined>((resolve) => {
        let stop = (): void => undefined;
        const finish = (frame: ControlFrame | undefined) => {
          clearTimeout(timer);
          stop();
          this.abort.signal.removeEventListener('abort', onAbort);
          resolve(frame);
        };
        const check = () => {
          const frame = newer();
          if (frame) finish(frame);
        };
        const onAbort = () => finish(undefined);
        const timer = setTimeout(() => finish(undefined), timeoutMs);
        this.abort.signal.addEventListener('abort', onAbort, { once: true });
        if (this.o.onFrames) stop = this.o.onFrames(check);
        else {
          const poll = setInterval(check, NEXT_FRAME_POLL_MS);
          stop = () => clearInterval(poll);
        }
      });
    }
    if (this.abort.signal.aborted) throw new FarmError('device_unavailable', 'the test run has ended');
    if (!f) return { header: { id, ok: true, none: true } };
    // What the client has now is no longer needed.
    const given = f.seq;
    if (given !== undefined) this.kept = this.kept.filter((k) => k.seq !== undefined && k.seq > given);
    this.lastNextFrame = performance.now();
    return this.frameAnswer(id, f);
  }

  /**
   * While a client reads frames one after another (`next_frame`), keep copies of the last
   * KEPT_FRAMES frames, so a client that is late for a moment (a busy machine, a slow check) gets
   * the frames in between instead of skipping to the newest. Stops KEEP_IDLE_MS after the last
   * `next_frame` answer; only with a source that says when frames arrive.
   */
  private keepFrames(): void {
    this.lastNextFrame = performance.now();
    if (this.stopKeeping || !this.o.onFrames || this.abort.signal.aborted) return;
    const unsubscribe = this.o.onFrames(() => {
      const f = this.o.latestFrame();
      const last = this.kept[this.kept.length - 1];
      if (!f || f.seq === undefined || (last?.seq !== undefined && f.seq <= last.seq)) return;
      this.kept.push(f);
      if (this.kept.length > KEPT_FRAMES) this.kept.shift();
    });
    const idle = setInterval(() => {
      if (performance.now() - this.lastNextFrame > KEEP_IDLE_MS) this.stopKeeping?.();
    }, KEEP_IDLE_MS / 2);
    idle.unref();
    this.stopKeeping = () => {
      unsubscribe();
      clearInterval(idle);
      this.kept = [];
      this.stopKeeping = undefined;
    };
  }

  private logLine(id: number | string | null, r: Record<string, unknown>): Answer {
    if (typeof r.text !== 'string') throw new FarmError('invalid_request', 'log needs "text": the line to write');
    this.event(r.text);
    return { header: { id, ok: true } };
  }

  /**
   * stbt.draw_text: the line in the run's log first (its time is when the text appears), then the text on the
   * video. `text` is only ever the content of the overlay's file (overlay.ts): never a path or a filter option.
   */
  private async drawText(id: number | string | null, r: Record<string, unknown>): Promise<Answer> {
    if (typeof r.text !== 'string') throw new FarmError('invalid_request', 'draw_text needs "text": the text to draw');
    const secs = r.duration_secs ?? 3;
    if (typeof secs !== 'number' || !Number.isFinite(secs)) throw new FarmError('invalid_request', '"duration_secs" must be a number of seconds');
    this.event(`draw_text: ${r.text} (for ${secs} s)`);
    const drawn = this.closing || !this.o.overlay ? false : await this.o.overlay.show(r.text, secs, this);
    return { header: { id, ok: true, drawn } };
  }

  private frame(id: number | string | null): Answer {
    const f = this.o.latestFrame();
    if (!f) throw new FarmError('device_unavailable', 'capture is offline: no frame to give');
    return this.frameAnswer(id, f);
  }

  private frameAnswer(id: number | string | null, f: ControlFrame): Answer {
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
