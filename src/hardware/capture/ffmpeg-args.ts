/**
 * The ffmpeg command line of a capture device, built from parts: global
 * options, one input chosen by the capture URI, then any number of outputs.
 * The outputs are the raw RGB preview piped to Node and, when recording is
 * on, H.264 segments for per-run video: both on the same command, because
 * only one process may stream from a V4L2 device (DESIGN.md, "Capture and
 * video").
 */
import type { InputSpec } from './input-spec.js';
import { isNetworkCaptureUri, networkInputArgs } from './network-input.js';

/** What an input needs besides its arguments. */
export interface InputOptions {
  width: number;
  height: number;
  fps: number;
  /** V4L2 pixel format (`mjpeg`, `yuyv422`, ...); ffmpeg picks when unset. */
  input_format?: string | undefined;
}

/**
 * One ffmpeg input. `stdin: 'frames'` means ffmpeg reads raw rgb24 frames of
 * the configured size from its standard input, which the caller must feed
 * (the virtual set-top box); `'none'` means stdin is unused.
 */
export type { InputSpec } from './input-spec.js';

/** One ffmpeg output: its options and target, in command-line order. */
export interface OutputSpec {
  args: string[];
}

/**
 * The input arguments for a capture URI: `testsrc:`, `v4l2:/dev/videoN`,
 * `virtual:` or a network stream (network-input.ts). Throws a plain Error for
 * anything else (`none:` has no ffmpeg; the config schema rejects the rest
 * before this is reached).
 */
export function inputArgs(uri: string, o: InputOptions): InputSpec {
  if (isNetworkCaptureUri(uri)) return networkInputArgs(uri);
  const size = `${o.width}x${o.height}`;
  if (uri === 'testsrc:') {
    // lavfi generates frames as fast as it can; -re paces it at `fps`, so
    // the preview rate is the real one and ffmpeg idles between frames.
    return { args: ['-re', '-f', 'lavfi', '-i', `testsrc2=size=${size}:rate=${o.fps}`], stdin: 'none' };
  }
  if (uri.startsWith('v4l2:')) {
    const device = uri.slice('v4l2:'.length);
    if (!device.startsWith('/dev/')) throw new Error(`capture uri ${uri}: expected v4l2:/dev/videoN`);
    const format = o.input_format === undefined ? [] : ['-input_format', o.input_format];
    return {
      args: ['-f', 'v4l2', ...format, '-video_size', size, '-framerate', String(o.fps), '-i', device],
      stdin: 'none',
    };
  }
  if (uri === 'virtual:') {
    // Raw frames carry no time: by default ffmpeg counts them (frame n at n / fps), so a feed that falls behind
    // its nominal rate on a loaded machine makes video time run slower than wall time and the run's clip short.
    // Stamp each frame with the wall clock when it arrives instead, as a V4L2 card's kernel timestamps do; the
    // recording output turns that into a constant rate (recordOutput). `-framerate` is only the nominal rate.
    return {
      args: ['-use_wallclock_as_timestamps', '1', '-f', 'rawvideo', '-pix_fmt', 'rgb24', '-s', size, '-framerate', String(o.fps), '-i', 'pipe:0'],
      stdin: 'frames',
    };
  }
  throw new Error(`capture uri ${uri}: ffmpeg cannot read it`);
}

/**
 * The preview output: at most `previewFps` raw rgb24 frames per second of
 * exactly width x height on stdout. The scale keeps the frame size fixed
 * even if a card delivers another mode than the one asked for, so Node can
 * cut the byte stream into frames by length alone.
 *
 * `constantRate` (while recording): exactly `previewFps` frames a second,
 * repeating frames over gaps (`-fps_mode cfr -r`), because the recorder's
 * stream clock counts preview frames (stream-clock.ts). Output frame n is
 * written as soon as the input frame that fills slot n arrives: nothing is
 * held back. (Until issue 20 this was the `fps` filter, which holds each
 * output slot until an input frame past the slot's middle arrives: half a
 * preview interval and more on every new picture, 100-150 ms at 5 a second;
 * docs/portal.md, "Live view on the shipped configuration".) Otherwise (no
 * recording) frames pass as they come, only dropped to keep to `previewFps`
 * (`-fps_mode vfr -r`), never held or repeated.
 *
 * `-threads 1`: ffmpeg's rawvideo "encoder" (a copy) runs frame threads by
 * default, and a frame-threaded encoder keeps a frame back until the next
 * one arrives when its thread has not finished first: one preview interval
 * more on the live view (720p, 25 fps: 43 ms from the frame written to the
 * frame read back, 5 ms with one thread; with the fps filter 84 and 44 ms).
 * ffmpeg gives an output's thread count to its filters too, so the scale
 * runs in one thread: no work when the size is already right.
 */
export function previewOutput(o: { width: number; height: number; previewFps: number; constantRate?: boolean }): OutputSpec {
  const rate = ['-vf', `scale=${o.width}:${o.height}`, '-fps_mode', o.constantRate === false ? 'vfr' : 'cfr', '-r', String(o.previewFps)];
  return {
    args: ['-map', '0:v', '-threads', '1', ...rate, '-f', 'rawvideo', '-pix_fmt', 'rgb24', 'pipe:1'],
  };
}

/**
 * The live output's JPEG quantiser (ffmpeg `-q:v`, 2 best .. 31): 3 gives 640x360 pictures a little smaller than
 * sharp's quality 80 (testsrc: 15.5 KB against 16.6 KB) at about the same PSNR (33.7 dB against 34.0 dB).
 */
export const LIVE_MJPEG_QSCALE = 3;

/**
 * The live view's own output (issue 20): at most `rate` JPEGs a second (ffmpeg's MJPEG: the JPEG
 * is made once here, viewers or not, and the live view passes the bytes on), scaled down to width x height,
 * on `pipe` (fd 4), passed as they come (`-fps_mode vfr -r`: never held, never repeated), one thread as the
 * preview. The scale is swscale's `fast_bilinear`: measured on 720p25 (docs/portal.md, "The first viewer's
 * CPU"), a 640x360 output costs ffmpeg ~0.03 cores, against ~0.08 for the default bicubic and ~0.02 for
 * `neighbor`, which drops every other pixel (thin lines and text vanish). `overlay`: a filter drawn after the
 * scale (draw_text's drawtext, overlay.ts), so its text is sized for the live picture.
 */
export function liveOutput(o: { width: number; height: number; rate: number; pipe: string; overlay?: string | undefined }): OutputSpec {
  const filters = [`scale=${o.width}:${o.height}:flags=fast_bilinear`, ...(o.overlay === undefined ? [] : [o.overlay])];
  return {
    args: ['-map', '0:v', '-threads', '1', '-vf', filters.join(','), '-fps_mode', 'vfr', '-r', String(o.rate),
      '-c:v', 'mjpeg', '-q:v', String(LIVE_MJPEG_QSCALE), '-pix_fmt', 'yuvj420p', '-f', 'mjpeg', o.pipe],
  };
}

/** Frames above this many pixels (i.e. above 720p) are encoded with `veryfast`, the rest `ultrafast`. */
const ULTRAFAST_MAX_PIXELS = 1280 * 720;

/**
 * The recording output: H.264 (libx264) in 1 s MPEG-TS segments named by
 * `pattern` (a `%06d` counter), with the segment list as CSV
 * (`name,start,end` per closed segment) written to `list` (a file or
 * `pipe:N`). Every segment starts with a keyframe and carries SPS/PPS
 * (`repeat-headers=1`), so any run of consecutive segments plays from its
 * first frame. Presets as DESIGN.md measured them on the 2-core box:
 * ultrafast up to 720p, veryfast above. `overlay`: a filter drawn on every
 * frame after the scale (draw_text's drawtext, overlay.ts).
 */
export function recordOutput(o: { width: number; height: number; fps: number; pattern: string; list: string; scale?: boolean; overlay?: string | undefined }): OutputSpec {
  const gop = String(Math.max(1, Math.round(o.fps)));
  const preset = o.width * o.height > ULTRAFAST_MAX_PIXELS ? 'veryfast' : 'ultrafast';
  const filters = [...(o.scale === true ? [`scale=${o.width}:${o.height}`] : []), ...(o.overlay === undefined ? [] : [o.overlay])];
  return {
    args: [
      '-map', '0:v',
      // An input whose size changes mid-stream (InputSpec.resizes): the encoder keeps the size it started with.
      ...(filters.length > 0 ? ['-vf', filters.join(',')] : []),
      '-c:v', 'libx264', '-preset', preset, '-pix_fmt', 'yuv420p',
      // Constant rate from the input's timestamps: a late frame is repeated, so video time follows wall time.
      '-fps_mode', 'cfr', '-r', String(o.fps),
      // A keyframe every second and none elsewhere, so segments are cut at exactly 1 s.
      '-g', gop, '-keyint_min', gop, '-sc_threshold', '0', '-force_key_frames', 'expr:gte(t,n_forced*1)',
      '-x264-params', 'repeat-headers=1',
      '-f', 'segment', '-segment_time', '1', '-segment_format', 'mpegts',
      '-segment_list', o.list, '-segment_list_type', 'csv',
      o.pattern,
    ],
  };
}

/**
 * The whole argument list (without the binary): quiet global options, the
 * input, then the outputs. Stats and the banner are off so stderr carries
 * only errors, which become the health reason.
 */
export function ffmpegArgs(input: InputSpec, outputs: OutputSpec[]): string[] {
  const global = ['-hide_banner', '-nostats', '-loglevel', 'error'];
  // -nostdin stops ffmpeg reading keystrokes; it must not be given when stdin carries frames.
  if (input.stdin === 'none') global.push('-nostdin');
  return [...global, ...input.args, ...outputs.flatMap((out) => out.args)];
}
