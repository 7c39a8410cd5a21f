/**
 * Per-run video from the continuous recording, without restarting capture.
 * The capture's one ffmpeg has a second output: H.264 in 1 s MPEG-TS
 * segments (a keyframe at the start of each) in the recording folder, and it
 * reports every closed segment on a pipe (its segment list, CSV, on fd 3).
 * The Recorder keeps a bounded ring of those segments, maps their stream
 * time to Node's clock through the preview frames, and implements the
 * `VideoRecorder` port: `begin()` pins the segments from now on, `finish()`
 * waits for the segment holding the end to close and cuts `video.mp4`.
 */
import { constants } from 'node:fs';
import { mkdir, open, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger, VideoClip, VideoRecorder } from '../../core/ports.js';
import { cutClip } from './clip-cut.js';
import { recordOutput, type OutputSpec } from './ffmpeg-args.js';
import { SegmentRing, type Segment } from './segment-ring.js';
import { StreamClock } from './stream-clock.js';

export interface RecorderOptions {
  /** The recording folder (the daemon uses `<data_dir>/recording`); the recorder owns its `seg-*` files. */
  dir: string;
  /** Keep this much recording when no clip needs it. Default 600 s. */
  keepSecs?: number;
  /** A clip open longer than this no longer protects its segments. Default 4 h. */
  maxClipSecs?: number;
  /**
   * How long `finish()` waits for the segment holding the end to close once ffmpeg's output has passed the end,
   * and how long it waits for ffmpeg's output to move on while it is still short of the end. Default 4 s.
   */
  finishWaitMs?: number;
  /** The longest `finish()` waits for the end in all, however far behind ffmpeg's output is. Default 60 s. */
  finishMaxWaitMs?: number;
  /** After recording stopped on a full disk, it resumes once this much space is free. Default 64 MiB. */
  resumeFreeMb?: number;
  /** How often free space is checked while recording is stopped. Default 60 s. */
  resumeCheckMs?: number;
}

/** What a run's log and the capture health say when recording stopped because the disk is full. */
export const NO_VIDEO_DISK_FULL = 'no video: disk full';

export interface RecorderDeps {
  ffmpeg: string;
  width: number;
  height: number;
  fps: number;
  previewFps: number;
  /** Scale to width x height before encoding: the input's size may change mid-stream (network video). */
  scale?: boolean;
  logger: Logger;
}

/**
 * A clip starts this long before `begin()` and ends this long after
 * `finish()`: the stream clock is off by up to about a hundred ms either way
 * (see stream-clock.ts) and B-frames shift segment times by a few frames,
 * and a clip must never miss the start or the end of its run.
 */
const START_MARGIN_MS = 150;
const END_MARGIN_MS = 250;
const SEGMENT_FILE = /^seg-[0-9a-z]+-\d+\.ts$|^\.clip-[0-9a-f]+\.txt$/;

export class Recorder implements VideoRecorder {
  private readonly ring: SegmentRing;
  private readonly clock: StreamClock;
  /** `finish()` calls waiting for the end; called with `true` on a preview frame (ffmpeg's output moved on). */
  private readonly waiters = new Set<(moved: boolean) => void>();
  private run: string | undefined;
  private partial = '';
  /** Why recording is stopped (the capture goes on without it); undefined while it records. */
  private off: string | undefined;
  /** Counts stops, so a clip knows whether recording stopped during it. */
  private stops = 0;

  constructor(
    private readonly o: RecorderOptions,
    private readonly d: RecorderDeps,
  ) {
    this.ring = new SegmentRing({ keepMs: (o.keepSecs ?? 600) * 1000, maxClipMs: (o.maxClipSecs ?? 4 * 3600) * 1000 });
    this.clock = new StreamClock(d.previewFps, d.fps);
  }

  /** Create the folder and delete segments a previous process left (nothing maps them to time). */
  async prepare(): Promise<void> {
    await mkdir(this.o.dir, { recursive: true });
    const stale = (await readdir(this.o.dir)).filter((f) => SEGMENT_FILE.test(f));
    await Promise.all(stale.map((f) => rm(join(this.o.dir, f), { force: true })));
  }

  /** The recording output of the ffmpeg process `run`; the segment list goes to fd 3. `overlay`: a filter drawn on it (overlay.ts). */
  output(run: string, overlay?: string): OutputSpec {
    return recordOutput({ ...this.d, pattern: join(this.o.dir, `seg-${run}-%06d.ts`), list: 'pipe:3', overlay });
  }

  /** A new ffmpeg process `run` was spawned. */
  runStarted(run: string): void {
    this.run = run;
    this.partial = '';
    this.clock.reset();
  }

  /** A preview frame of the current process arrived. */
  previewFrame(nowMs: number): void {
    this.clock.frame(nowMs);
    for (const check of [...this.waiters]) check(true);
  }

  /** Bytes of the segment list of process `run`: `name,start,end` lines, one per closed segment. */
  listData(run: string, chunk: Buffer): void {
    if (run !== this.run) return;
    const lines = (this.partial + chunk.toString('utf8')).split('\n');
    this.partial = lines.pop() ?? '';
    for (const line of lines) this.segmentClosed(run, line.trim());
  }

  /** Process `run` is gone: delete its segment that never closed. */
  async runEnded(run: string): Promise<void> {
    const mine = (await readdir(this.o.dir)).filter((f) => f.startsWith(`seg-${run}-`));
    const orphans = mine.map((f) => join(this.o.dir, f)).filter((p) => !this.ring.has(p));
    await Promise.all(orphans.map((p) => rm(p, { force: true })));
  }

  /** The segments held now, oldest first (diagnostics, tests, the benchmark). */
  segments(): Segment[] {
    return this.ring.list();
  }

  /** Why recording is stopped, or undefined while it records. */
  stopped(): string | undefined {
    return this.off;
  }

  /** Recording cannot go on (the disk is full): clips say so in their run's log instead of cutting a video. */
  disable(reason: string): void {
    if (this.off === undefined) this.stops++;
    this.off = reason;
  }

  enable(): void {
    this.off = undefined;
  }

  begin(): VideoClip {
    const stopsAtBegin = this.stops;
    const from = performance.now() - START_MARGIN_MS;
    const unpin = this.ring.pin(from);
    let open = true;
    const close = () => {
      open = false;
      unpin();
    };
    return {
      finish: async (dir) => {
        if (!open) return false;
        try {
          const reason = this.off ?? (this.stops !== stopsAtBegin ? `${NO_VIDEO_DISK_FULL} (recording stopped during the run)` : undefined);
          if (reason !== undefined) {
            await noteInRunLog(dir, `farmhand: ${reason}; the screenshots and the run's logs are unaffected\n`);
            if (this.off !== undefined) return false;
          }
          return await this.cut(from, performance.now() + END_MARGIN_MS, dir);
        } finally {
          close();
        }
      },
      discard: close,
    };
  }

  private async cut(from: number, until: number, dir: string): Promise<boolean> {
    await this.waitForEnd(until);
    const segments = this.ring.covering(from, until);
    if (segments.length === 0) {
      this.d.logger.warn({ from, until }, 'no recording covers the run; no video');
      return false;
    }
    if (this.ring.latestEnd() < until) this.d.logger.warn({ dir }, 'the recording stops before the run ended');
    await cutClip({ ffmpeg: this.d.ffmpeg, workDir: this.o.dir, dir, segments, until });
    return true;
  }

  /**
   * Resolves once a segment ending at or after `until` closed. Gives up after `finishWaitMs` without one, but
   * while ffmpeg's output is still short of `until` and moving (a preview frame came), that wait starts again:
   * ffmpeg that has fallen behind (its preview's reader too slow, or itself) writes the end later, not never.
   * At most `finishMaxWaitMs` in all.
   */
  private waitForEnd(until: number): Promise<void> {
    if (this.ring.latestEnd() >= until) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(quiet);
        clearTimeout(cap);
        this.waiters.delete(check);
        resolve();
      };
      const check = (moved: boolean) => {
        if (this.ring.latestEnd() >= until) done();
        else if (moved && (this.clock.position() ?? Infinity) < until) quiet.refresh();
      };
      const quiet = setTimeout(done, this.o.finishWaitMs ?? 4000);
      const cap = setTimeout(done, this.o.finishMaxWaitMs ?? 60_000);
      this.waiters.add(check);
    });
  }

  private segmentClosed(run: string, line: string): void {
    const m = /^"?(.+?)"?,(-?[\d.]+),(-?[\d.]+)$/.exec(line);
    if (!m) return;
    const [startSecs, endSecs] = [Number(m[2]), Number(m[3])];
    const now = performance.now();
    const duration = Math.max(0, endSecs - startSecs);
    const end = this.clock.toMonotonic(endSecs) ?? now;
    this.ring.add({ path: join(this.o.dir, m[1]!), run, duration, start: end - duration * 1000, end, closedAt: now });
    for (const check of [...this.waiters]) check(false);
    const expired = this.ring.expire(now);
    if (expired.length > 0) void this.remove(expired);
  }

  private async remove(segments: Segment[]): Promise<void> {
    try {
      await Promise.all(segments.map((s) => rm(s.path, { force: true })));
    } catch (e) {
      this.d.logger.warn({ err: e }, 'could not delete an old recording segment');
    }
  }
}

/**
 * Append a line to the run's `farmhand.log`. The test could have left
 * anything under that name: no symlink is followed, a FIFO does not block,
 * and only a regular file is written.
 */
async function noteInRunLog(dir: string, line: string): Promise<void> {
  const fh = await open(join(dir, 'farmhand.log'), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW | constants.O_NONBLOCK, 0o644).catch(() => undefined);
  if (!fh) return;
  try {
    if ((await fh.stat()).isFile()) await fh.write(line);
  } catch {
    // the disk is full: the log line is lost, the run is not
  } finally {
    await fh.close();
  }
}
