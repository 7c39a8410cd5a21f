/**
 * Cutting a clip out of the recording: the closed segments that cover the
 * run are joined with ffmpeg's concat demuxer (each segment's duration from
 * the segment list, so timestamps are exact and a gap left by a capture
 * restart is closed), trimmed at the end, and remuxed without re-encoding
 * into an MP4 with the index at the front (`+faststart`), written as a
 * hidden temporary file and renamed to `video.mp4`. Beside it, `video.json`
 * says when the video's first frame was shown (wall-clock ISO time), so the
 * result page maps the run log's timestamps to video time (docs/portal.md).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Segment } from './segment-ring.js';

/** A remux copies bytes; even hours of video take seconds. Past this something hangs. */
const REMUX_TIMEOUT_MS = 300_000;

export interface CutOptions {
  ffmpeg: string;
  /** Where the concat list is written (the recording folder). */
  workDir: string;
  /** The result folder; `video.mp4` goes there. */
  dir: string;
  segments: Segment[];
  /** Monotonic ms at which the clip ends; the last segment is trimmed there. */
  until: number;
}

/** The concat demuxer's script: one `file` line and its `duration` per segment. */
export function concatScript(segments: Segment[]): string {
  const quote = (p: string) => `'${p.replaceAll("'", "'\\''")}'`;
  return segments.map((s) => `file ${quote(s.path)}\nduration ${s.duration.toFixed(6)}\n`).join('');
}

/** Seconds of the joined segments to keep: all of them, less what the last one shows after `until`. */
export function keptSeconds(segments: Segment[], until: number): number {
  const total = segments.reduce((sum, s) => sum + s.duration, 0);
  const last = segments.at(-1);
  const over = last === undefined ? 0 : Math.max(0, Math.min(last.end - until, last.end - last.start)) / 1000;
  return Math.max(0, total - over);
}

/**
 * What `video.json` holds: `start_time`, the wall-clock time of the video's
 * time 0 (the first segment's start on the monotonic clock, moved to the wall
 * clock as it stands when the clip is cut, like the log's stamps), with milliseconds. A log line
 * stamped T is at video time T - start_time (until a capture restart's jump cut).
 */
export function videoClock(segments: Segment[], wallMinusMonotonic = Date.now() - performance.now()): { start_time: string } {
  return { start_time: new Date(wallMinusMonotonic + (segments[0]?.start ?? 0)).toISOString() };
}

/** Write `video.mp4` into `o.dir` from `o.segments` (which must not be empty). */
export async function cutClip(o: CutOptions): Promise<void> {
  const tag = randomBytes(6).toString('hex');
  const list = join(o.workDir, `.clip-${tag}.txt`);
  const tmp = join(o.dir, `.video.mp4.${tag}.tmp`);
  const meta = join(o.dir, `.video.json.${tag}.tmp`);
  try {
    await writeFile(list, concatScript(o.segments));
    const args = [
      '-hide_banner', '-nostdin', '-loglevel', 'error',
      '-f', 'concat', '-safe', '0', '-i', list,
      '-map', '0:v', '-c', 'copy', '-t', keptSeconds(o.segments, o.until).toFixed(3),
      '-movflags', '+faststart', '-f', 'mp4', '-y', tmp,
    ];
    await run(o.ffmpeg, args);
    await rename(tmp, join(o.dir, 'video.mp4'));
    await writeFile(meta, JSON.stringify(videoClock(o.segments)) + '\n');
    await rename(meta, join(o.dir, 'video.json'));
  } finally {
    await Promise.all([rm(list, { force: true }), rm(tmp, { force: true }), rm(meta, { force: true })]);
  }
}

function run(binary: string, args: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    execFile(binary, args, { timeout: REMUX_TIMEOUT_MS, killSignal: 'SIGKILL' }, (err, _out, stderr) => {
      if (err) reject(new Error(`ffmpeg could not cut the clip: ${String(stderr).trim() || err.message}`));
      else resolve();
    });
  });
}
