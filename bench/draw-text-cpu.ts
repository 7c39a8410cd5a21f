/**
 * What stbt.draw_text's overlay costs ffmpeg: `node --import tsx bench/draw-text-cpu.ts [--rounds 3]`.
 *
 * CPU seconds (user + system, of ffmpeg as a whole) for a fixed piece of work, 30 s of 720p25 (750 frames of the
 * virtual set-top box's menu, rendered here), so that a machine shared with other work changes the figures
 * little (CPU over wall time on the live virtual box was tried first: on a loaded machine the box itself renders
 * 1-22 frames a second, so ffmpeg's load varied more than anything the filter does). Three ways each, in turn,
 * `--rounds` times: without drawtext, with it and an empty file (a run that never calls draw_text), with one text:
 * 1. the whole shipped command (capture.ts's outputs: the preview, the recording, the live view) on the menu read
 *    as a PNG for every frame (every frame new, as when the picture moves), as fast as ffmpeg can;
 * 2. drawtext alone, on the frame decoded once and repeated in memory, at 1280x720 (the recording) and after the
 *    live view's scale to 640x360, to the null muxer.
 * CPU seconds per 30 s of video are cores at real time times 30.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import sharp from 'sharp';
import { ffmpegArgs, liveOutput, previewOutput, recordOutput } from '../src/hardware/capture/ffmpeg-args.js';
import { DEFAULT_OVERLAY_FONT, drawtextFilter } from '../src/hardware/capture/overlay.js';
import { initialState, renderFrame, viewOf } from '../src/hardware/virtual/index.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '3' } } });
const ROUNDS = Number(values.rounds);
const [W, H, FPS, FRAMES] = [1280, 720, 25, 750];

/** ffmpeg's user + system CPU seconds (bash's `time`); throws when ffmpeg fails. */
function cpuSecs(args: string[]): number {
  const r = spawnSync('bash', ['-c', 'TIMEFORMAT="%U %S"; time ffmpeg "$@" 2>/dev/null', '_', ...args], { encoding: 'utf8' });
  const m = /([\d.]+) ([\d.]+)\s*$/.exec(r.stderr);
  if (r.status !== 0 || !m) throw new Error(`ffmpeg failed: ${r.stderr}`);
  return Number(m[1]) + Number(m[2]);
}

const tmp = mkdtempSync(join(tmpdir(), 'farmhand-draw-text-bench-'));
try {
  const png = join(tmp, 'menu.png');
  await sharp(await renderFrame(viewOf(initialState()), '12:00:00', W, H), { raw: { width: W, height: H, channels: 3 } }).png().toFile(png);
  const files = { 'no filter': undefined, 'filter, no text': join(tmp, 'empty.txt'), 'filter, one text': join(tmp, 'one.txt') } as const;
  writeFileSync(files['filter, no text'], '');
  writeFileSync(files['filter, one text'], 'FARMHAND 42');
  const modes = Object.keys(files) as Array<keyof typeof files>;
  const draw = (mode: keyof typeof files, height: number) => {
    const file = files[mode];
    return file === undefined ? undefined : drawtextFilter({ file, font: DEFAULT_OVERLAY_FONT, height });
  };

  const whole = (mode: keyof typeof files): string[] => {
    const segs = join(tmp, 'segs');
    rmSync(segs, { recursive: true, force: true });
    mkdirSync(segs);
    const input = { args: ['-loop', '1', '-framerate', String(FPS), '-t', String(FRAMES / FPS), '-i', png], stdin: 'none' as const };
    const preview = previewOutput({ width: W, height: H, previewFps: 5 });
    preview.args[preview.args.length - 1] = '/dev/null';
    const rec = recordOutput({ width: W, height: H, fps: FPS, pattern: join(segs, 'seg-%06d.ts'), list: join(segs, 'list.csv'), overlay: draw(mode, H) });
    const live = liveOutput({ width: 640, height: 360, rate: FPS, pipe: '/dev/null', overlay: draw(mode, 360) });
    return ['-y', ...ffmpegArgs(input, [preview, rec, live])];
  };
  const alone = (mode: keyof typeof files, height: number): string[] => {
    const vf = [...(height === H ? [] : ['scale=640:360:flags=fast_bilinear']), 'format=yuv420p', ...(mode === 'no filter' ? [] : [draw(mode, height)!])];
    return ['-nostdin', '-f', 'lavfi', '-i', `movie=${png},loop=loop=${FRAMES - 1}:size=1:start=0,setpts=N/${FPS}/TB`, '-threads', '1', '-vf', vf.join(','), '-f', 'null', '-'];
  };

  const table = new Map<string, number[]>();
  const add = (key: string, secs: number) => table.set(key, [...(table.get(key) ?? []), secs]);
  for (let r = 1; r <= ROUNDS; r++) {
    for (const mode of modes) add(`whole command, ${mode}`, cpuSecs(whole(mode)));
    for (const height of [H, 360]) for (const mode of modes) add(`drawtext alone at ${height}p, ${mode}`, cpuSecs(alone(mode, height)));
    console.log(`round ${r} done`);
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  for (const [key, xs] of table) {
    console.log(`${key}: ${xs.map((x) => x.toFixed(2)).join(', ')} CPU s per 30 s of video; median ${median(xs).toFixed(2)} (${(median(xs) / 30).toFixed(4)} cores at 25 new frames a second)`);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
