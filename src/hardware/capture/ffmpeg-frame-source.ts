/**
 * The capture device: ONE long-lived ffmpeg child per card (V4L2 lets only
 * one handle stream), supervised. It reads the reduced-rate raw preview into
 * a FrameRing, serves screenshots and thumbnails from the latest frame, and
 * restarts ffmpeg with back-off when it exits or stops producing frames.
 * The command is built from an input (testsrc, v4l2, a network stream, or raw frames on stdin
 * for the virtual set-top box) and a list of outputs: the preview, and when
 * recording is on the H.264 segments the Recorder cuts per-run video from.
 * Every preview frame is also checked for a black or frozen picture.
 */
import { access, constants, statfs } from 'node:fs/promises';
import { join } from 'node:path';
import type { Writable } from 'node:stream';
import { FarmError } from '../../core/errors.js';
import type { CaptureHealth, FrameSource, Logger } from '../../core/ports.js';
import { Backoff, CAPTURE_BACKOFF } from './backoff.js';
import { writeFileAtomic } from '../../storage/atomic.js';
import { encodePng, encodeThumbnail } from './encode.js';
import { MjpegSplitter } from './mjpeg-splitter.js';
import { ffmpegArgs, inputArgs, liveOutput, previewOutput, type InputSpec, type OutputSpec } from './ffmpeg-args.js';
import { describeExit, FfmpegChild, type ChildExit } from './ffmpeg-child.js';
import { isNetworkCaptureUri, NETWORK_BACKOFF, NETWORK_IO_TIMEOUT_MS, networkExitReason, redactCaptureUri } from './network-input.js';
import { FrameRing, type RawFrame } from './frame-ring.js';
import { NO_VIDEO_DISK_FULL, Recorder, type RecorderOptions } from './recorder.js';
import { SignalMonitor, signalOptionsFor, type SignalOptions, type SignalReport } from './signal-monitor.js';
import { CLOCK_TICKS_PER_SEC, cpuTicks } from './process-cpu.js';
import { DEFAULT_OVERLAY_FONT, drawtextFilter, TextOverlay } from './overlay.js';
import { silentLogger } from '../../logger.js';

/**
 * Feeds raw rgb24 frames of the configured size into ffmpeg's stdin (the
 * `virtual:` input). Called with the new stdin at every (re)start of ffmpeg;
 * returns a function that stops feeding that stdin.
 */
export type FrameFeed = (stdin: Writable) => () => void;

/** The `capture` section of the config, plus what the daemon wires in. */
export interface FfmpegFrameSourceOptions {
  uri: string;
  width: number;
  height: number;
  fps: number;
  preview_fps: number;
  /**
   * The rate of ffmpeg's preview output when higher than `preview_fps` (capped at `fps`): every frame goes to
   * the live view and screenshots, one in `rate / preview_fps` to the black/frozen check. Default: `preview_fps`.
   */
  live_fps?: number;
  /**
   * The live view's own picture width (height by the picture's aspect, even). When below `width` and `live_fps`
   * is above `preview_fps`, ffmpeg writes the live view's pictures at this size as JPEGs on a pipe of
   * their own (`liveOutput`, MJPEG: `latestLiveJpeg`) and the preview keeps `preview_fps` (screenshots, checks,
   * the stream clock) (docs/portal.md, "ffmpeg makes the live JPEG"). Otherwise the
   * live view gets the full-size preview at `live_fps`.
   */
  live_width?: number;
  input_format?: string | undefined;
  /** The ffmpeg binary: a name looked up in PATH, or a path. */
  ffmpeg: string;
  logger?: Logger;
  /** Required when the input reads frames from stdin (`virtual:`). */
  feed?: FrameFeed;
  /** Record H.264 segments for per-run video (`recorder()`); off when absent. */
  recording?: RecorderOptions;
  /** Black and frozen picture detection: `frozenSecs` (default 300; off for `virtual:`), `blackSecs` (default 2). */
  signal?: SignalOptions;
  /** Replaces the input the URI selects (tests and benchmarks: lavfi sources, replayed files). */
  input?: InputSpec;
  /**
   * `stbt.draw_text` (overlay.ts): the text file ffmpeg's drawtext reads on the recording and live outputs
   * (never the preview), and its font (default DEFAULT_OVERLAY_FONT). Off when absent, or when the font or the
   * file cannot be had at start (logged; draw_text then only logs).
   */
  overlay?: { file: string; font?: string };
}

/**
 * The preview output's rate: `live_fps` capped at the capture's `fps` (a higher rate would only repeat
 * frames), never below `preview_fps`.
 */
export function previewRate(o: { fps: number; preview_fps: number; live_fps?: number | undefined }): number {
  return Math.max(o.preview_fps, Math.min(o.fps, o.live_fps ?? 0));
}

/** The live view's own output's size, or undefined when the live view takes the preview (see `live_width`). */
export function liveSize(o: { width: number; height: number; fps: number; preview_fps: number; live_fps?: number | undefined; live_width?: number | undefined }): { width: number; height: number } | undefined {
  const w = Math.round((o.live_width ?? 0) / 2) * 2;
  if (w < 16 || w >= o.width || previewRate(o) <= o.preview_fps) return undefined;
  return { width: w, height: Math.max(2, Math.round((o.height * w) / o.width / 2) * 2) };
}

/** Between TERM and KILL when ffmpeg is ended. */
const KILL_GRACE_MS = 2000;
/** How long a starting ffmpeg may take to deliver its first frame (a V4L2 card can take seconds). */
const STARTUP_MS = 10_000;
/**
 * A watchdog timer that fires this much later than due means Node's event
 * loop was busy: frames may be waiting unread on stdout, and a `virtual:`
 * feed (which runs on this loop) could not write any. That is no stall of
 * ffmpeg, so the watchdog waits another full period instead.
 */
const LOOP_LAG_MS = 250;

/**
 * No frame within the staleness bound, and the event loop on time: before ffmpeg is ended for a stall, its CPU time is
 * read twice this far apart. An ffmpeg that used BUSY_TICKS or more meanwhile is working and only starved of CPU (a
 * loaded machine: its frames are late, not lost), so the watchdog waits another period, up to STARVED_MAX_MS without a
 * frame in all; one whose CPU time stands still is stuck (a card or stream that delivers nothing) and is ended.
 * Ending a starved ffmpeg only made it worse: the restart costs more CPU than the frames it was late with, and the node
 * is offline meanwhile (docs/capture.md, "Stalls").
 */
const PROBE_MS = 1000;
const BUSY_TICKS = 2;
const STARVED_MAX_MS = 10_000;

type Phase = 'idle' | 'starting' | 'running' | 'waiting' | 'stopped';

export class FfmpegFrameSource implements FrameSource {
  private readonly ring: FrameRing;
  /** The live view's JPEGs when it has an output of its own (`live_width`, MJPEG from ffmpeg); undefined when it takes the preview. */
  private readonly liveSplitter: MjpegSplitter | undefined;
  /** The live output's latest JPEG and its number (counted across runs). */
  private liveLatest: { jpeg: Buffer; seq: number } | undefined;
  /** The live output's size when it has one (`live_width`). */
  private readonly liveDims: { width: number; height: number } | undefined;
  /** draw_text's texts (overlay.ts); undefined when the options have no `overlay`. */
  private readonly overlay: TextOverlay | undefined;
  /** The overlay's file is there and its font readable: the drawtext filter is on the outputs. */
  private overlayOn = false;
  /** Frames a second the live view gets (`live_fps` capped, or the preview's rate). */
  private readonly liveRate: number;
  private liveFramesReceived = 0;
  private readonly input: InputSpec;
  /** The preview at a constant rate (recording: the stream clock counts its frames) and without (see previewOutput). */
  private readonly preview: { cfr: OutputSpec; vfr: OutputSpec };
  private readonly video: Recorder | undefined;
  private readonly monitor: SignalMonitor;
  private args: string[];
  private runs = 0;
  private lastSignal: SignalReport['signal'] = 'ok';
  private readonly log: Logger;
  /** No frame for this long means stalled: 2 s plus two preview intervals. */
  private readonly staleMs: number;
  private readonly backoff: Backoff;
  /** A network stream (network-input.ts): its own restart schedule and exit reasons. */
  private readonly network: boolean;
  private phase: Phase = 'idle';
  private child: FfmpegChild | undefined;
  private failure: string | undefined;
  private stallReason: string | undefined;
  private healthySince: number | undefined;
  private watchdog: NodeJS.Timeout | undefined;
  /** When the watchdog is due (performance.now), to tell a stall from a busy event loop. */
  private watchdogDue = 0;
  private restartTimer: NodeJS.Timeout | undefined;
  private restartAt = 0;
  private detachFeed: (() => void) | undefined;
  /** The running ffmpeg wrote "No space left on device": its recording output cannot write. */
  private diskFull = false;
  /** While recording is stopped on a full disk: the timer that checks for space to resume. */
  private resumeTimer: NodeJS.Timeout | undefined;
  /** The next ffmpeg exit was asked for (recording resumes): restart at once, not as a failure. */
  private restartNow = false;
  /** Preview frames received since construction, every ffmpeg run added up (metrics). */
  private framesReceived = 0;
  /** Waiting for capture to come online (`online()`). */
  private onlineWaiters: Array<() => void> = [];
  /** Called after each batch of new preview frames (the live view); see `onFrames`. */
  private readonly frameListeners = new Set<() => void>();
  /** Frames a second of ffmpeg's preview output (previewRate). */
  private readonly rate: number;
  /** The frame ring keeps one preview frame in this many while nobody watches the live view (at least `preview_fps` a second). */
  private readonly checkEvery: number;
  /** Counts the frames at about `preview_fps` (the check's), across runs: test scripts' frames (latestPreviewFrame). */
  private previewSeq = 0;
  private readonly previewListeners = new Set<() => void>();
  /** How many checks are due (preview_fps / rate a frame), less those made: a check when it reaches 1. */
  private sinceCheck = 0;
  /** Times the picture was lost (ffmpeg ended or stalled, the picture froze), and the last reason. */
  private lost = { count: 0, reason: null as string | null };

  /** Builds the command; does no I/O. Throws for a URI ffmpeg cannot read, or `virtual:` without a feed. */
  constructor(private readonly o: FfmpegFrameSourceOptions) {
    this.ring = new FrameRing(o.width, o.height);
    this.input = o.input ?? inputArgs(o.uri, o);
    this.network = isNetworkCaptureUri(o.uri);
    this.backoff = new Backoff(this.network ? NETWORK_BACKOFF : CAPTURE_BACKOFF);
    if (this.input.stdin === 'frames' && o.feed === undefined) {
      throw new Error(`capture uri ${o.uri} reads frames from stdin: a frame feed is required`);
    }
    const live = liveSize(o);
    this.liveRate = previewRate(o);
    this.rate = live ? o.preview_fps : this.liveRate;
    if (live) {
      this.liveSplitter = new MjpegSplitter();
      this.liveDims = live;
    }
    if (o.overlay) {
      this.overlay = new TextOverlay({ file: o.overlay.file, onError: (e) => this.log.warn({ err: e, file: o.overlay!.file }, 'draw_text: could not write the overlay text file') });
    }
    // The ring keeps at least preview_fps frames a second (25 / 10: one in 2); the check takes preview_fps of them.
    this.checkEvery = Math.max(1, Math.floor(this.rate / o.preview_fps));
    this.ring.keepOneIn = this.checkEvery;
    this.preview = {
      cfr: previewOutput({ ...o, previewFps: this.rate, constantRate: true }),
      vfr: previewOutput({ ...o, previewFps: this.rate, constantRate: false }),
    };
    // A network stream's own I/O timeout ends ffmpeg first, with the stream's reason (network-input.ts).
    this.staleMs = Math.max(2000 + 2000 / this.rate, this.network ? NETWORK_IO_TIMEOUT_MS + 1000 : 0);
    this.log = (o.logger ?? silentLogger).child({ uri: redactCaptureUri(o.uri) });
    this.monitor = new SignalMonitor(signalOptionsFor(o.uri, o.signal));
    const deps = { ffmpeg: o.ffmpeg, width: o.width, height: o.height, fps: o.fps, previewFps: this.rate, scale: this.input.resizes === true };
    this.video = o.recording && new Recorder(o.recording, { ...deps, logger: this.log.child({ part: 'recorder' }) });
    this.args = this.buildArgs('0');
  }

  /**
   * Spawn ffmpeg; resolves at once (frames and failures are reported by
   * `health()`). With recording on it first creates the recording folder
   * and empties it of old segments; that failing rejects.
   */
  async start(): Promise<void> {
    if (this.phase !== 'idle' && this.phase !== 'stopped') return;
    this.phase = 'starting';
    this.failure = undefined;
    try {
      await this.video?.prepare();
    } catch (e) {
      this.phase = 'idle';
      throw e;
    }
    await this.prepareOverlay();
    if (this.phase === 'starting') this.spawnChild();
  }

  /**
   * The overlay's file, written before ffmpeg first reads it (drawtext fails without it), and its font. Either
   * missing leaves the filter off: capture and recording go on, draw_text only logs.
   */
  private async prepareOverlay(): Promise<void> {
    if (!this.overlay || this.overlayOn) return;
    const font = this.o.overlay!.font ?? DEFAULT_OVERLAY_FONT;
    try {
      await access(font, constants.R_OK);
      await this.overlay.prepare();
      this.overlayOn = true;
    } catch (e) {
      this.log.warn({ err: e, font, file: this.overlay.file }, 'draw_text: no overlay on the video (font or text file missing); draw_text only logs');
    }
  }

  /**
   * `stbt.draw_text`: draw `text` on the recording and the live view for `durationSecs`, stacked under the
   * texts already shown. Resolves true once ffmpeg reads it (from its next frame), false when there is no
   * overlay (no `overlay` option, or its font or file were missing at start); never rejects.
   */
  async drawText(text: string, durationSecs: number, owner?: unknown): Promise<boolean> {
    if (!this.overlay || !this.overlayOn) return false;
    await this.overlay.show(text, durationSecs, owner);
    return true;
  }

  /** Take away the texts `owner` drew with `drawText` (its run ended). */
  async clearText(owner: unknown): Promise<void> {
    await this.overlay?.clear(owner);
  }

  /** The texts drawn now, top to bottom (tests, diagnostics). */
  overlayLines(): string[] {
    return this.overlayOn ? (this.overlay?.lines() ?? []) : [];
  }

  /** The per-run video recorder; undefined when recording is off. */
  recorder(): Recorder | undefined {
    return this.video;
  }

  /**
   * What the picture shows: `none` with health's reason when offline (the
   * node is offline too); `black` or `frozen` with a reason while frames
   * arrive (the node stays online and screenshots are served: a set-top box
   * may legitimately show a black or still picture); `ok` otherwise.
   */
  signal(): SignalReport {
    const offline = this.offlineReason();
    if (offline !== null) return { signal: 'none', reason: offline };
    return this.monitor.report(performance.now());
  }

  /** End ffmpeg (TERM, then KILL) and stop restarting it; resolves once it is gone. */
  async stop(): Promise<void> {
    this.phase = 'stopped';
    clearTimeout(this.restartTimer);
    clearTimeout(this.watchdog);
    clearInterval(this.resumeTimer);
    this.restartTimer = this.watchdog = this.resumeTimer = undefined;
    const child = this.child;
    if (child) await child.terminate(KILL_GRACE_MS);
  }

  health(): CaptureHealth {
    const reason = this.offlineReason();
    const video = this.video?.stopped();
    return { online: reason === null, reason, ...(video !== undefined && { video }) };
  }

  /**
   * Resolves once a frame has arrived since the last (re)start, at once when
   * online now; never rejects (a start-up bound is the caller's).
   */
  online(): Promise<void> {
    if (this.offlineReason() === null) return Promise.resolve();
    return new Promise((resolve) => this.onlineWaiters.push(resolve));
  }

  /** Counters and the latest frame's age, for metrics. */
  stats(): { framesReceived: number; liveFramesReceived: number; frameAgeSecs: number | undefined; restarts: number; signal: SignalReport['signal'] } {
    const last = this.ring.latestMonotonic();
    return {
      framesReceived: this.framesReceived,
      liveFramesReceived: this.liveSplitter ? this.liveFramesReceived : this.framesReceived,
      frameAgeSecs: last === undefined ? undefined : Math.max(0, performance.now() - last) / 1000,
      restarts: Math.max(0, this.runs - 1),
      signal: this.signal().signal,
    };
  }

  losses(): { count: number; reason: string | null } {
    return { ...this.lost };
  }

  /**
   * Call `listener` (synchronously, on the reading tick) whenever new preview
   * frames were published; read them with `withLatestFrame`. Returns the
   * function that stops the calls. The live view uses it to encode a frame
   * as soon as it arrives instead of polling.
   */
  onFrames(listener: () => void): () => void {
    this.frameListeners.add(listener);
    this.ring.keepOneIn = 1;
    return () => {
      this.frameListeners.delete(listener);
      // Nobody wants every frame: copy only the ones the checks and test scripts look at.
      if (this.frameListeners.size === 0) this.ring.keepOneIn = this.checkEvery;
    };
  }

  /** True when ffmpeg makes the live view's JPEGs itself (`live_width`): read them with `latestLiveJpeg`. */
  get liveIsJpeg(): boolean {
    return this.liveSplitter !== undefined;
  }

  /**
   * The live output's latest JPEG (ffmpeg's MJPEG, `live_width` wide) and its number; call on `onFrames`.
   * FarmError `device_unavailable` when offline or when there is no live output (`liveIsJpeg` false).
   */
  latestLiveJpeg(): { jpeg: Buffer; seq: number } {
    const reason = this.liveSplitter ? this.offlineReason() : 'no live output';
    if (reason !== null || this.liveLatest === undefined) throw new FarmError('device_unavailable', `capture is offline: ${reason ?? 'no frame yet'}`);
    return this.liveLatest;
  }

  /**
   * Like `onFrames`, but at about `preview_fps` (one frame in `live_fps / preview_fps`): a test script's
   * frames keep the rate its pack was written for, whatever the live view gets.
   */
  onPreviewFrames(listener: () => void): () => void {
    this.previewListeners.add(listener);
    return () => this.previewListeners.delete(listener);
  }

  /**
   * A copy of the latest frame (the caller owns it) numbered at `preview_fps`: `seq` moves on only when
   * `onPreviewFrames` listeners are called, so a reader waiting for a newer seq gets `preview_fps` frames a
   * second. Undefined when offline.
   */
  latestPreviewFrame(): RawFrame | undefined {
    const f = this.latestFrame();
    return f && { ...f, seq: this.previewSeq };
  }

  /** Frames a second the live view can show (ffmpeg's preview output's rate, or its live output's). */
  previewRate(): number {
    return this.liveRate;
  }

  /** Process id of the running ffmpeg, if any (tests and diagnostics). */
  pid(): number | undefined {
    return this.child?.pid;
  }

  /** The ffmpeg arguments (without the binary), for logs and diagnostics; a URI's credentials are `***`. */
  commandArgs(): readonly string[] {
    return this.args.map(redactCaptureUri);
  }

  /** A copy of the latest live frame, which the caller owns; undefined when offline. */
  latestFrame(): RawFrame | undefined {
    return this.offlineReason() === null ? this.ring.latestCopy() : undefined;
  }

  /**
   * Run `fn` on the latest live frame without copying it (the ring will not
   * overwrite it until `fn` settles; `fn` must not keep `frame.data`).
   * FarmError `device_unavailable` when offline.
   */
  async withLatestFrame<T>(fn: (frame: RawFrame) => Promise<T>): Promise<T> {
    const reason = this.offlineReason();
    const out = reason === null ? await this.ring.withLatest(fn) : undefined;
    if (out === undefined) throw new FarmError('device_unavailable', `capture is offline: ${reason ?? 'no frame yet'}`);
    return out;
  }

  screenshotPng(): Promise<Buffer> {
    return this.withLatestFrame(encodePng);
  }

  thumbnailJpeg(): Promise<Buffer> {
    return this.withLatestFrame(encodeThumbnail);
  }

  /** Both files from the same frame, each written atomically; false when offline. */
  async saveScreenshot(dir: string): Promise<boolean> {
    if (this.offlineReason() !== null) return false;
    const files = await this.ring.withLatest((f) => Promise.all([encodePng(f), encodeThumbnail(f)]));
    if (files === undefined) return false;
    await Promise.all([writeFileAtomic(join(dir, 'screenshot.png'), files[0]), writeFileAtomic(join(dir, 'thumbnail.jpg'), files[1])]);
    return true;
  }

  private offlineReason(): string | null {
    switch (this.phase) {
      case 'idle':
        return 'capture not started';
      case 'stopped':
        return 'capture stopped';
      case 'waiting': {
        const secs = Math.max(0, (this.restartAt - performance.now()) / 1000);
        return `${this.failure}; restarting in ${secs.toFixed(1)} s`;
      }
      case 'starting':
        return this.failure === undefined ? 'starting: waiting for the first frame' : `${this.failure}; restarting`;
      case 'running':
        // Only the watchdog decides a stall (it tells a stuck ffmpeg from a busy event loop); until ffmpeg
        // has exited after it, its reason stands. A frame a moment old is still the picture on screen.
        return this.stallReason ?? null;
    }
  }

  /** The command of ffmpeg process `run` (segment names carry the run, so restarts never collide). */
  private buildArgs(run: string): string[] {
    const recording = this.video !== undefined && this.video.stopped() === undefined;
    const draw = (height: number) => (this.overlayOn ? drawtextFilter({ file: this.overlay!.file, font: this.o.overlay!.font ?? DEFAULT_OVERLAY_FONT, height }) : undefined);
    const live = this.liveDims ? [liveOutput({ ...this.liveDims, rate: this.liveRate, pipe: 'pipe:4', overlay: draw(this.liveDims.height) })] : [];
    // The preview (test scripts' frames, screenshots, the checks) never gets the overlay.
    return ffmpegArgs(this.input, recording ? [this.preview.cfr, this.video.output(run, draw(this.o.height)), ...live] : [this.preview.vfr, ...live]);
  }

  /**
   * ffmpeg ended because its recording output hit a full disk: the preview
   * is not at fault, so capture restarts at once without recording (runs get
   * "no video: disk full" in their log, health carries it too) and recording
   * resumes once there is space again.
   */
  private stopRecordingOnFullDisk(): void {
    const video = this.video!;
    video.disable(NO_VIDEO_DISK_FULL);
    this.log.error({ dir: this.o.recording!.dir }, 'recording stopped: the disk is full; capture goes on without video');
    const freeMb = this.o.recording!.resumeFreeMb ?? 64;
    this.resumeTimer = setInterval(() => {
      void statfs(this.o.recording!.dir)
        .then((st) => {
          if ((st.bavail * st.bsize) / 2 ** 20 < freeMb || this.phase === 'stopped' || this.resumeTimer === undefined) return;
          clearInterval(this.resumeTimer);
          this.resumeTimer = undefined;
          video.enable();
          this.log.info({ free_mb_min: freeMb }, 'space on the disk again: recording resumes');
          this.restartNow = true;
          void this.child?.terminate(KILL_GRACE_MS);
        })
        .catch(() => undefined);
    }, this.o.recording!.resumeCheckMs ?? 60_000);
    this.resumeTimer.unref();
  }

  private spawnChild(): void {
    this.ring.resetPartial();
    this.liveSplitter?.reset();
    this.monitor.reset();
    this.sinceCheck = 1; // the first frame of a run is checked
    this.phase = 'starting';
    this.healthySince = this.stallReason = undefined;
    this.diskFull = false;
    // Unique across restarts and daemon restarts: time in base 36 plus a counter.
    const run = `${Date.now().toString(36)}${(this.runs++).toString(36)}`;
    this.args = this.buildArgs(run);
    this.video?.runStarted(run);
    const video = this.video;
    const child: FfmpegChild = new FfmpegChild({
      binary: this.o.ffmpeg,
      args: this.args,
      stdinPipe: this.input.stdin === 'frames',
      logger: this.stderrWatch(),
      redact: redactCaptureUri,
      onStdout: (chunk) => this.onData(child, chunk),
      ...(video && { onFd3: (chunk: Buffer) => video.listData(run, chunk) }),
      ...(this.liveSplitter && { onFd4: (chunk: Buffer) => this.onLiveData(child, chunk) }),
    });
    this.child = child;
    void child.closed.then((exit) => {
      this.onChildClosed(child, exit);
      video?.runEnded(run).catch((e: unknown) => this.log.warn({ err: e }, 'could not delete an unfinished segment'));
    });
    if (this.o.feed && child.stdin) this.detachFeed = this.o.feed(child.stdin);
    this.armWatchdog(STARTUP_MS);
    this.log.info({ pid: child.pid, args: this.commandArgs().join(' ') }, 'ffmpeg started');
  }

  /** The child's logger: it sees every stderr line, and notes a full disk among them. */
  private stderrWatch(): Logger {
    const watch = (obj: object | string, msg?: string) => {
      const line = typeof obj === 'object' ? (obj as { stderr?: unknown }).stderr : undefined;
      if (typeof line === 'string' && /No space left on device/i.test(line)) this.diskFull = true;
      this.log.debug(obj, msg);
    };
    return { ...this.log, debug: watch, info: this.log.info.bind(this.log), warn: this.log.warn.bind(this.log), error: this.log.error.bind(this.log), child: this.log.child.bind(this.log) };
  }

  private onData(child: FfmpegChild, chunk: Buffer): void {
    if (child !== this.child) return;
    const frames = this.ring.push(chunk);
    if (frames === 0) return;
    this.framesReceived += frames;
    this.checkPicture(frames);
    if (this.phase === 'starting') {
      this.phase = 'running';
      this.failure = undefined;
      this.healthySince = performance.now();
      this.armWatchdog(this.staleMs);
      this.log.info({ pid: child.pid }, 'capture online');
      for (const resolve of this.onlineWaiters.splice(0)) resolve();
    } else if (this.stallReason === undefined) {
      this.watchdogDue = performance.now() + this.staleMs;
      this.watchdog?.refresh();
    }
    if (this.liveSplitter === undefined) for (const listener of this.frameListeners) listener();
  }

  /** Bytes of the live view's own output: its frames go to the live view (`onFrames`), nothing else. */
  private onLiveData(child: FfmpegChild, chunk: Buffer): void {
    if (child !== this.child) return;
    const jpegs = this.liveSplitter!.push(chunk);
    if (jpegs.length === 0) return;
    this.liveFramesReceived += jpegs.length;
    this.liveLatest = { jpeg: jpegs[jpegs.length - 1]!, seq: this.liveFramesReceived };
    for (const listener of this.frameListeners) listener();
  }

  /** Feed the stream clock and the black/frozen check (at about `preview_fps`); log when the picture's state changes. */
  private checkPicture(frames: number): void {
    const now = performance.now();
    for (let i = 0; i < frames; i++) this.video?.previewFrame(now);
    // preview_fps of every `rate` frames, also when they do not divide (10 of 25: 2 frames in 5).
    this.sinceCheck += (frames * this.o.preview_fps) / this.rate;
    if (this.sinceCheck < 1 - 1e-9) return;
    this.sinceCheck = Math.min(this.sinceCheck - 1, 1);
    this.previewSeq++;
    for (const listener of this.previewListeners) listener();
    const data = this.ring.latestData();
    if (data === undefined) return;
    this.monitor.observe(data, now);
    const report = this.monitor.report(now);
    if (report.signal === this.lastSignal) return;
    this.lastSignal = report.signal;
    if (report.signal === 'frozen') this.lost = { count: this.lost.count + 1, reason: report.reason };
    if (report.signal === 'ok') this.log.info({ signal: 'ok' }, 'picture is back');
    else this.log.warn({ signal: report.signal, reason: report.reason }, 'no signal; still online');
  }

  /** (Re)start the no-frame timer; when it fires ffmpeg is ended and restarted. */
  private armWatchdog(ms: number): void {
    clearTimeout(this.watchdog);
    this.watchdogDue = performance.now() + ms;
    this.watchdog = setTimeout(() => this.onWatchdog(ms), ms);
  }

  /**
   * The no-frame timer fired. Frames that queued on stdout while the loop
   * was busy are read first (setImmediate runs after the poll phase); a
   * timer that fired late, or a frame that arrived meanwhile, re-arms it.
   */
  private onWatchdog(ms: number): void {
    this.watchdog = undefined;
    const late = performance.now() - this.watchdogDue;
    const child = this.child;
    setImmediate(() => {
      if (child === undefined || child !== this.child || this.watchdog !== undefined || this.phase === 'stopped') return;
      if (this.watchdogDue > performance.now()) {
        this.armWatchdog(this.watchdogDue - performance.now()); // a frame arrived meanwhile
        return;
      }
      if (late > LOOP_LAG_MS) {
        this.log.debug({ late_ms: Math.round(late) }, 'capture watchdog fired late: the event loop was busy; waiting again');
        this.armWatchdog(ms);
        return;
      }
      this.probeOrStall(child, ms);
    });
  }

  /**
   * No frame for `ms`: end ffmpeg unless it is working (its CPU time grows over PROBE_MS) on a loaded machine, for
   * at most STARVED_MAX_MS without a frame. Only while running: the first frame has its own bound (STARTUP_MS).
   */
  private probeOrStall(child: FfmpegChild, ms: number): void {
    const pid = child.pid;
    const last = this.ring.latestMonotonic();
    const silentMs = this.phase === 'running' && last !== undefined ? performance.now() - last : Infinity;
    const before = pid === undefined || silentMs >= STARVED_MAX_MS ? undefined : cpuTicks(pid);
    if (pid === undefined || before === undefined) {
      this.onStall(ms);
      return;
    }
    // Armed like the watchdog: a frame meanwhile refreshes it (onData), and then it re-arms for the time left.
    this.watchdogDue = performance.now() + PROBE_MS;
    this.watchdog = setTimeout(() => {
      this.watchdog = undefined;
      if (child !== this.child || this.phase === 'stopped') return;
      if (this.watchdogDue > performance.now()) {
        this.armWatchdog(this.watchdogDue - performance.now()); // a frame arrived meanwhile
        return;
      }
      const used = (cpuTicks(pid) ?? before) - before;
      if (used >= BUSY_TICKS) {
        const cpuMs = (used * 1000) / CLOCK_TICKS_PER_SEC;
        this.log.debug({ pid, cpu_ms: cpuMs, silent_ms: Math.round(silentMs + PROBE_MS) }, 'ffmpeg is working but its frames are late (the machine is loaded); waiting again');
        this.armWatchdog(ms);
        return;
      }
      this.onStall(ms);
    }, PROBE_MS);
  }

  private onStall(ms: number): void {
    const child = this.child;
    if (!child) return;
    const last = this.ring.latestMonotonic();
    const secs = ((this.phase === 'running' && last !== undefined ? performance.now() - last : ms) / 1000).toFixed(1);
    this.stallReason =
      this.phase === 'starting' ? `no frame within ${secs} s of starting ffmpeg` : `stalled: no frames for ${secs} s`;
    this.log.warn({ pid: child.pid, reason: this.stallReason }, 'ffmpeg stalled; ending it');
    void child.terminate(KILL_GRACE_MS);
  }

  private onChildClosed(child: FfmpegChild, exit: ChildExit): void {
    if (child !== this.child) return;
    this.child = undefined;
    this.detachFeed?.();
    this.detachFeed = undefined;
    clearTimeout(this.watchdog);
    this.watchdog = undefined;
    if (this.phase === 'stopped') return;
    const recording = this.video !== undefined && this.video.stopped() === undefined && !this.restartNow;
    if (this.restartNow || (recording && (this.diskFull || /No space left on device/i.test(child.lastStderrLine() ?? '')))) {
      if (!this.restartNow) this.stopRecordingOnFullDisk();
      this.restartNow = false;
      this.spawnChild();
      return;
    }
    const stream = this.network ? networkExitReason(this.o.uri, exit, child.stderrTail()) : undefined;
    this.failure = this.stallReason ?? stream ?? describeExit(this.o.ffmpeg, exit, child.lastStderrLine());
    this.lost = { count: this.lost.count + 1, reason: this.failure };
    const now = performance.now();
    const delay = this.backoff.failed(now, this.healthySince);
    this.phase = 'waiting';
    this.restartAt = now + delay;
    this.log.warn({ reason: this.failure, restart_in_ms: delay }, 'capture offline');
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      this.spawnChild();
    }, delay);
  }
}
